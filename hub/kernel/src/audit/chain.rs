//! Hash chains: one per `(tenant_id, pool_index)`, `seq` from 1, the first
//! entry linked to 32 zero bytes, `entry_hash = SHA-256(prev_hash ||
//! canonical encoding of the entry)` (RULINGS 2). The encoding carries a
//! digest of the payload rather than the payload, so a shredded payload
//! leaves the chain verifiable.
//!
//! `emit` appends inside the caller's transaction; `verify` streams a chain
//! in `seq` order with memory bounded whatever its length.

use aws_lc_rs::digest;
use futures_util::TryStreamExt;
use serde::Serialize;
use serde_json::Value;
use sqlx::Row;

use super::registry;
use crate::{
    db::{self, Db, Tx},
    error::{ApiError, ApiResult},
};

/// A SHA-256 digest.
pub type Hash = [u8; 32];

pub const ZERO_HASH: Hash = [0; 32];

/// A hash read back from the database: 32 bytes, or the row is damaged.
pub fn hash_from(stored: &[u8]) -> ApiResult<Hash> {
    Hash::try_from(stored).map_err(|_| ApiError::Internal(anyhow::anyhow!("a stored chain hash is {} bytes, not 32", stored.len())))
}

/// Serialises a hash as lowercase hex, without an intermediate `String`.
fn hex_hash<S: serde::Serializer>(hash: &Hash, s: S) -> Result<S::Ok, S::Error> {
    let mut out = [0u8; 64];
    hex::encode_to_slice(hash, &mut out).expect("64 bytes hold 32 in hex");
    s.serialize_str(std::str::from_utf8(&out).expect("hex is ASCII"))
}

/// An event to record. `pool_index` None means the tenant's admin pool;
/// `occurred_at` None means now (a past time serves imports of historical
/// records, and tests of retention).
pub struct Event<'a> {
    pub tenant_id: &'a str,
    pub pool_index: Option<i64>,
    pub event_type: &'a str,
    pub actor_kind: &'a str,
    pub actor_id: &'a str,
    pub actor_chain: Option<&'a Value>,
    pub payload: &'a Value,
    pub retention_class: Option<&'a str>,
    pub occurred_at: Option<String>,
}

/// What an append answers: the entry's identity, position and hashes (hex).
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct Appended {
    pub entry_id: String,
    pub tenant_id: String,
    pub pool_index: i64,
    pub seq: i64,
    pub event_type: String,
    pub actor_kind: String,
    pub actor_id: String,
    pub occurred_at: String,
    pub retention_class: String,
    #[serde(serialize_with = "hex_hash")]
    #[schema(value_type = String)]
    pub payload_digest: Hash,
    #[serde(serialize_with = "hex_hash")]
    #[schema(value_type = String)]
    pub prev_hash: Hash,
    #[serde(serialize_with = "hex_hash")]
    #[schema(value_type = String)]
    pub entry_hash: Hash,
}

/// The fields an entry's hash covers.
pub struct Fields<'a> {
    pub entry_id: &'a str,
    pub tenant_id: &'a str,
    pub pool_index: i64,
    pub seq: i64,
    pub event_type: &'a str,
    pub actor_kind: &'a str,
    pub actor_id: &'a str,
    pub actor_chain: Option<&'a str>,
    pub occurred_at: &'a str,
    pub retention_class: &'a str,
    pub payload_digest: &'a [u8],
}

/// Tag of the canonical encoding, so a future encoding cannot collide.
const ENCODING_TAG: &[u8] = b"hub.audit.entry.v1";

fn put_bytes(buf: &mut Vec<u8>, bytes: &[u8]) {
    buf.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    buf.extend_from_slice(bytes);
}

/// `prev_hash || encoding` into `buf` (cleared first). The encoding is the
/// tag, then each field in a fixed order: strings and bytes as a 4-byte
/// big-endian length and the bytes, integers as 8 bytes big-endian, an
/// absent actor chain as a zero flag byte (present: a one byte, then the
/// text). Length prefixes make it unambiguous: no two entries encode to the
/// same bytes.
fn encode(buf: &mut Vec<u8>, prev_hash: &[u8], f: &Fields<'_>) {
    buf.clear();
    buf.extend_from_slice(prev_hash);
    put_bytes(buf, ENCODING_TAG);
    put_bytes(buf, f.entry_id.as_bytes());
    put_bytes(buf, f.tenant_id.as_bytes());
    buf.extend_from_slice(&f.pool_index.to_be_bytes());
    buf.extend_from_slice(&f.seq.to_be_bytes());
    put_bytes(buf, f.event_type.as_bytes());
    put_bytes(buf, f.actor_kind.as_bytes());
    put_bytes(buf, f.actor_id.as_bytes());
    match f.actor_chain {
        None => buf.push(0),
        Some(c) => {
            buf.push(1);
            put_bytes(buf, c.as_bytes());
        }
    }
    put_bytes(buf, f.occurred_at.as_bytes());
    put_bytes(buf, f.retention_class.as_bytes());
    put_bytes(buf, f.payload_digest);
}

/// `SHA-256(prev_hash || encoding)`, encoding into `buf` so a caller
/// hashing many entries reuses one allocation and makes one digest call
/// per entry (each call into the crypto library has a fixed cost).
fn entry_hash_with(buf: &mut Vec<u8>, prev_hash: &[u8], f: &Fields<'_>) -> [u8; 32] {
    encode(buf, prev_hash, f);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest::digest(&digest::SHA256, buf).as_ref());
    out
}

/// `SHA-256(prev_hash || encoding)` of one entry (see [`encode`]).
pub fn entry_hash(prev_hash: &[u8], f: &Fields<'_>) -> [u8; 32] {
    entry_hash_with(&mut Vec::with_capacity(256), prev_hash, f)
}

pub fn payload_digest(text: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest::digest(&digest::SHA256, text.as_bytes()).as_ref());
    out
}

/// A validated event, ready to be chained: everything checked, nothing
/// written yet.
pub struct Prepared {
    pub entry_id: String,
    pub tenant_id: String,
    pub pool_index: i64,
    pub event_type: String,
    pub actor_kind: String,
    pub actor_id: String,
    pub actor_chain: Option<String>,
    pub occurred_at: String,
    pub retention_class: String,
    pub payload: String,
    pub payload_digest: [u8; 32],
}

/// The audit pool a tenant's events go to when the caller names none: its
/// `admin_pool_index` (0 for an unknown tenant).
async fn tenant_pool(tx: &mut Tx, tenant_id: &str) -> ApiResult<i64> {
    let pool = sqlx::query_scalar("SELECT admin_pool_index FROM tenant_tenant WHERE tenant_id = $1").bind(tenant_id).fetch_optional(&mut **tx).await?;
    Ok(pool.unwrap_or(0))
}

/// Checks an event against the closed vocabulary (`kind`, its type as
/// looked up: `None` for unknown) and fills in its defaults, for the chain
/// of pool `pool_index`. Writes nothing.
pub fn prepare_with(kind: Option<&registry::EventType>, pool_index: i64, ev: &Event<'_>) -> ApiResult<Prepared> {
    let Some(kind) = kind else {
        return Err(ApiError::invalid(format!(
            "event_type '{}' is neither a platform event type nor registered by this tenant (POST /api/events/types)",
            ev.event_type
        )));
    };
    // A retired type is kept for the entries it has; it takes no new one
    // (a deprecated type still does: it is on its way out, not gone).
    if kind.schema_state == "retired" {
        return Err(ApiError::invalid(format!("event_type '{}' is retired: it takes no new entries", ev.event_type)));
    }
    let retention_class = match ev.retention_class {
        Some(r) if registry::RETENTION_CLASSES.contains(&r) => r.to_string(),
        Some(_) => {
            return Err(ApiError::invalid(format!("retention_class must be one of: {}", registry::RETENTION_CLASSES.join(", "))));
        }
        None => kind.retention_class.clone(),
    };
    let payload = ev.payload.to_string();
    Ok(Prepared {
        entry_id: db::new_id(),
        tenant_id: ev.tenant_id.to_string(),
        pool_index,
        event_type: ev.event_type.to_string(),
        actor_kind: ev.actor_kind.to_string(),
        actor_id: ev.actor_id.to_string(),
        actor_chain: ev.actor_chain.map(Value::to_string),
        occurred_at: ev.occurred_at.clone().unwrap_or_else(db::now),
        retention_class,
        payload_digest: payload_digest(&payload),
        payload,
    })
}

impl Prepared {
    /// The entry's hash once chained at `seq` after `prev`.
    pub fn seal(&self, seq: i64, prev: &Hash) -> Hash {
        entry_hash(
            prev,
            &Fields {
                entry_id: &self.entry_id,
                tenant_id: &self.tenant_id,
                pool_index: self.pool_index,
                seq,
                event_type: &self.event_type,
                actor_kind: &self.actor_kind,
                actor_id: &self.actor_id,
                actor_chain: self.actor_chain.as_deref(),
                occurred_at: &self.occurred_at,
                retention_class: &self.retention_class,
                payload_digest: &self.payload_digest,
            },
        )
    }

    /// What the append answers, once the entry is stored at `seq`.
    pub fn into_appended(self, seq: i64, prev_hash: Hash, entry_hash: Hash) -> Appended {
        Appended {
            entry_id: self.entry_id,
            tenant_id: self.tenant_id,
            pool_index: self.pool_index,
            seq,
            event_type: self.event_type,
            actor_kind: self.actor_kind,
            actor_id: self.actor_id,
            occurred_at: self.occurred_at,
            retention_class: self.retention_class,
            payload_digest: self.payload_digest,
            prev_hash,
            entry_hash,
        }
    }
}

/// How many columns [`INSERT_COLUMNS`] names.
pub const INSERT_COLUMN_COUNT: usize = 15;

/// The columns of an entry, in the order they are bound.
pub const INSERT_COLUMNS: &str = "INSERT INTO audit_entry (entry_id, tenant_id, pool_index, chain_id, seq, event_type, actor_kind, actor_id, \
     actor_chain, occurred_at, retention_class, payload, payload_digest, prev_hash, entry_hash) VALUES ";

/// Records an event inside the caller's transaction: the entry and the
/// chain head commit or roll back with the change the event records, so a
/// 2xx proves the event landed (RULINGS 1). The vocabulary is checked
/// before anything is written.
pub async fn record_event(tx: &mut Tx, ev: Event<'_>) -> ApiResult<Appended> {
    let kind = registry::lookup(&mut **tx, ev.tenant_id, ev.event_type).await?;
    let backend = db::Backend::of(tx);
    let appended = match (ev.pool_index, backend) {
        // The head advance reads the tenant's pool itself: a round trip fewer.
        (None, db::Backend::Postgres) => super::appender::write_in_tenant_pool(tx, prepare_with(kind.as_ref(), 0, &ev)?).await?,
        (pool, _) => {
            let pool = match pool {
                Some(p) => p,
                None => tenant_pool(tx, ev.tenant_id).await?,
            };
            let p = prepare_with(kind.as_ref(), pool, &ev)?;
            super::appender::write_sql(tx, backend, vec![p]).await?.pop().expect("one entry in, one out")
        }
    };
    // Counted when written: a transaction rolled back afterwards included.
    metrics::counter!("hub_audit_appends_total", "path" => "transaction").increment(1);
    Ok(appended)
}

/// Why a chain failed verification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Reason {
    /// A `seq` is missing (an entry deleted, or the head ahead of the entries).
    #[serde(rename = "gap")]
    Gap,
    /// An entry's `prev_hash` is not the previous entry's `entry_hash`.
    #[serde(rename = "wrong-prev")]
    WrongPrev,
    /// An entry's own hash (or its payload digest, or the head) does not
    /// match its content.
    #[serde(rename = "wrong-hash")]
    WrongHash,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Gap => "gap",
            Reason::WrongPrev => "wrong-prev",
            Reason::WrongHash => "wrong-hash",
        }
    }
}

/// The outcome of verifying one chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub pool_index: i64,
    pub ok: bool,
    pub entries_checked: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_seq: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
}

/// One stored entry, borrowed from whichever reader produced it.
pub struct Stored<'a> {
    pub entry_id: &'a str,
    pub seq: i64,
    pub event_type: &'a str,
    pub actor_kind: &'a str,
    pub actor_id: &'a str,
    pub actor_chain: Option<&'a str>,
    pub occurred_at: &'a str,
    pub retention_class: &'a str,
    pub payload: Option<&'a str>,
    pub payload_digest: &'a [u8],
    pub prev_hash: &'a [u8],
    pub entry_hash: &'a [u8],
}

/// The verification of one chain, or of one part of it, fed its entries in
/// `seq` order. It holds only the previous hash, so memory stays flat
/// whatever the length.
pub struct Checker {
    tenant_id: String,
    verdict: Verdict,
    /// The first seq this checker covers, and the next it expects.
    start: i64,
    expected: i64,
    /// The previous entry's hash; None at the start of a part after the
    /// first, whose link to the part before is checked by [`Checker::join`].
    prev: Option<Hash>,
    /// The `prev_hash` stored in that part's first entry.
    first_prev: Option<Vec<u8>>,
    /// The encoding buffer, reused for every entry.
    buf: Vec<u8>,
}

impl Checker {
    /// A checker for a whole chain, from seq 1.
    pub fn new(tenant_id: &str, pool_index: i64) -> Self {
        let mut checker = Checker::part(tenant_id, pool_index, 1);
        checker.prev = Some(ZERO_HASH);
        checker
    }

    /// A checker for the part of a chain that starts at seq `start` (> 1).
    pub fn part(tenant_id: &str, pool_index: i64, start: i64) -> Self {
        Checker {
            tenant_id: tenant_id.to_string(),
            verdict: Verdict { pool_index, ok: true, entries_checked: 0, failed_seq: None, reason: None },
            start,
            expected: start,
            prev: None,
            first_prev: None,
            buf: Vec::with_capacity(512),
        }
    }

    /// Checks the next entry; `false` once the chain has failed.
    pub fn next(&mut self, e: &Stored<'_>) -> bool {
        if e.seq == self.start && self.prev.is_none() {
            self.first_prev = Some(e.prev_hash.to_vec());
        }
        let failure = if e.seq != self.expected {
            Some((self.expected, Reason::Gap))
        } else if self.prev.is_some_and(|prev| *e.prev_hash != prev[..]) {
            Some((e.seq, Reason::WrongPrev))
        } else if e.payload.is_some_and(|p| payload_digest(p)[..] != *e.payload_digest) {
            Some((e.seq, Reason::WrongHash))
        } else {
            let prev = self.prev.as_ref().map_or(e.prev_hash, |p| &p[..]);
            let computed = entry_hash_with(
                &mut self.buf,
                prev,
                &Fields {
                    entry_id: e.entry_id,
                    tenant_id: &self.tenant_id,
                    pool_index: self.verdict.pool_index,
                    seq: e.seq,
                    event_type: e.event_type,
                    actor_kind: e.actor_kind,
                    actor_id: e.actor_id,
                    actor_chain: e.actor_chain,
                    occurred_at: e.occurred_at,
                    retention_class: e.retention_class,
                    payload_digest: e.payload_digest,
                },
            );
            (computed[..] != *e.entry_hash).then_some((e.seq, Reason::WrongHash))
        };
        match failure {
            Some((seq, reason)) => {
                self.fail(seq, reason);
                false
            }
            None => {
                self.verdict.entries_checked += 1;
                self.prev = Some(Hash::try_from(e.entry_hash).expect("equal to a computed hash"));
                self.expected += 1;
                true
            }
        }
    }

    fn fail(&mut self, seq: i64, reason: Reason) {
        self.verdict.ok = false;
        self.verdict.failed_seq = Some(seq);
        self.verdict.reason = Some(reason);
    }

    /// Appends the next part's outcome to this one's, as if one checker had
    /// read both: the seq after this part must open the next, and the next
    /// part's first entry must link to this part's last.
    pub fn join(mut self, next: Checker) -> Checker {
        if !self.verdict.ok {
            return self;
        }
        if self.expected != next.start {
            self.fail(self.expected, Reason::Gap);
            return self;
        }
        if let Some(first_prev) = &next.first_prev
            && self.prev.is_none_or(|prev| prev[..] != first_prev[..])
        {
            self.fail(next.start, Reason::WrongPrev);
            return self;
        }
        self.verdict.entries_checked += next.verdict.entries_checked;
        if !next.verdict.ok {
            self.verdict.ok = false;
            self.verdict.failed_seq = next.verdict.failed_seq;
            self.verdict.reason = next.verdict.reason;
            return self;
        }
        self.expected = next.expected;
        self.prev = next.prev;
        self
    }

    /// The verdict, after checking the end of the chain against its head
    /// (a deleted last entry is a gap; a rewritten one a wrong hash).
    pub fn finish(mut self, head: Option<(i64, &[u8])>) -> Verdict {
        if self.verdict.ok
            && let Some((head_seq, head_hash)) = head
        {
            let last = self.expected - 1;
            if last < head_seq {
                self.fail(self.expected, Reason::Gap);
            } else if last > 0 && self.prev.is_none_or(|prev| prev[..] != *head_hash) {
                self.fail(last, Reason::WrongHash);
            }
        }
        self.verdict
    }
}

const VERIFY_SELECT: &str = "SELECT entry_id, seq, event_type, actor_kind, actor_id, actor_chain, occurred_at, retention_class, payload, \
     payload_digest, prev_hash, entry_hash FROM audit_entry WHERE chain_id = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq";

/// Chains shorter than this are verified in one pass.
const MIN_PART: i64 = 100_000;
/// Parts a long chain is verified in at most (each on a core of its own).
const MAX_PARTS: i64 = 4;

/// The seq ranges a chain ending at `last` is verified in: one, or for a
/// long chain one per core, checked in parallel and then joined.
fn parts(last: i64) -> Vec<(i64, i64)> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as i64);
    let n = cores.min(MAX_PARTS).min(last / MIN_PART).max(1);
    (0..n).map(|i| (1 + i * last / n, (i + 1) * last / n)).collect()
}

/// Verifies the chain `(tenant_id, pool_index)` against its head, reading
/// the entries as a stream in `seq` order: memory stays flat whatever the
/// chain's length. A long chain is read in parts, in parallel; each part
/// is checked on its own and the parts are joined at their boundaries, so
/// the verdict is the one a single pass would give. Entries appended after
/// the head was read are left for the next verification. A pool without a
/// chain verifies, with no entry checked (its entries, if any, would
/// reference a head: they cannot outlive it).
pub async fn verify(db: &Db, tenant_id: &str, pool_index: i64) -> ApiResult<Verdict> {
    let head = sqlx::query("SELECT chain_id, seq, head_hash FROM audit_chain_head WHERE tenant_id = $1 AND pool_index = $2")
        .bind(tenant_id)
        .bind(pool_index)
        .fetch_optional(&db.read)
        .await?;
    let Some(head) = head else {
        return Ok(Checker::new(tenant_id, pool_index).finish(None));
    };
    let (chain_id, head_seq, head_hash): (i64, i64, Vec<u8>) = (head.try_get(0)?, head.try_get(1)?, head.try_get(2)?);
    let file = db.sqlite_file();
    let mut tasks = Vec::new();
    for (n, (first, last)) in parts(head_seq).into_iter().enumerate() {
        let checker = if n == 0 { Checker::new(tenant_id, pool_index) } else { Checker::part(tenant_id, pool_index, first) };
        tasks.push(match &file {
            Some(path) => {
                let path = path.clone();
                tokio::task::spawn_blocking(move || check_sqlite_file(&path, chain_id, checker, last))
            }
            None => tokio::spawn(check_postgres(db.postgres_streams()?, chain_id, checker, last)),
        });
    }
    let mut joined: Option<Checker> = None;
    for task in tasks {
        let part = task.await.map_err(|e| ApiError::Internal(anyhow::anyhow!("verification task: {e}")))??;
        joined = Some(match joined {
            None => part,
            Some(before) => before.join(part),
        });
    }
    let checker = joined.expect("at least one part");
    Ok(checker.finish(Some((head_seq, &head_hash))))
}

/// PostgreSQL: the part's entries as a stream (`fetch`, never
/// `fetch_all`) on the native driver's pool, every column borrowed from
/// its row: the Any driver would copy each value into an owned one first.
async fn check_postgres(pool: sqlx::PgPool, chain_id: i64, mut checker: Checker, last: i64) -> ApiResult<Checker> {
    let mut rows = sqlx::query(VERIFY_SELECT).bind(chain_id).bind(checker.start).bind(last).fetch(&pool);
    while let Some(r) = rows.try_next().await? {
        let stored = Stored {
            entry_id: r.try_get(0)?,
            seq: r.try_get(1)?,
            event_type: r.try_get(2)?,
            actor_kind: r.try_get(3)?,
            actor_id: r.try_get(4)?,
            actor_chain: r.try_get(5)?,
            occurred_at: r.try_get(6)?,
            retention_class: r.try_get(7)?,
            payload: r.try_get(8)?,
            payload_digest: r.try_get(9)?,
            prev_hash: r.try_get(10)?,
            entry_hash: r.try_get(11)?,
        };
        if !checker.next(&stored) {
            break;
        }
    }
    drop(rows);
    Ok(checker)
}

/// A nullable TEXT column, borrowed.
fn text(v: rusqlite::types::ValueRef<'_>) -> rusqlite::Result<Option<&str>> {
    match v {
        rusqlite::types::ValueRef::Null => Ok(None),
        other => other.as_str().map(Some).map_err(Into::into),
    }
}

/// SQLite: the same stream read with rusqlite on a blocking thread, over a
/// read-only connection of its own. Rows are borrowed in place, with no
/// per-row allocation or hand-off between threads, which is what lets a
/// verification keep pace with SHA-256 rather than with the driver.
fn check_sqlite_file(path: &std::path::Path, chain_id: i64, mut checker: Checker, last: i64) -> ApiResult<Checker> {
    use rusqlite::OpenFlags;
    let fault = |e: rusqlite::Error| ApiError::Internal(anyhow::anyhow!("verifying from SQLite: {e}"));
    let conn = rusqlite::Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX).map_err(fault)?;
    conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(fault)?;
    let mut stmt = conn.prepare(VERIFY_SELECT).map_err(fault)?;
    let mut rows = stmt.query((chain_id, checker.start, last)).map_err(fault)?;
    while let Some(r) = rows.next().map_err(fault)? {
        let t = |i: usize| -> rusqlite::Result<&str> { Ok(text(r.get_ref(i)?)?.unwrap_or_default()) };
        let b = |i: usize| -> rusqlite::Result<&[u8]> { r.get_ref(i)?.as_blob().map_err(Into::into) };
        let stored = Stored {
            entry_id: t(0).map_err(fault)?,
            seq: r.get(1).map_err(fault)?,
            event_type: t(2).map_err(fault)?,
            actor_kind: t(3).map_err(fault)?,
            actor_id: t(4).map_err(fault)?,
            actor_chain: text(r.get_ref(5).map_err(fault)?).map_err(fault)?,
            occurred_at: t(6).map_err(fault)?,
            retention_class: t(7).map_err(fault)?,
            payload: text(r.get_ref(8).map_err(fault)?).map_err(fault)?,
            payload_digest: b(9).map_err(fault)?,
            prev_hash: b(10).map_err(fault)?,
            entry_hash: b(11).map_err(fault)?,
        };
        if !checker.next(&stored) {
            break;
        }
    }
    drop(rows);
    Ok(checker)
}

/// Every pool in which a tenant has a chain, in order.
pub async fn pools_of(pool: &sqlx::AnyPool, tenant_id: &str) -> ApiResult<Vec<i64>> {
    Ok(sqlx::query_scalar("SELECT pool_index FROM audit_chain_head WHERE tenant_id = $1 ORDER BY pool_index").bind(tenant_id).fetch_all(pool).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry as stored, owned.
    #[derive(Clone)]
    struct Row {
        entry_id: String,
        seq: i64,
        payload: String,
        digest: Vec<u8>,
        prev: Vec<u8>,
        hash: Vec<u8>,
    }

    const TENANT: &str = "0190a000-0000-7000-8000-000000000001";

    fn fields<'a>(r: &'a Row, digest: &'a [u8]) -> Fields<'a> {
        Fields {
            entry_id: &r.entry_id,
            tenant_id: TENANT,
            pool_index: 3,
            seq: r.seq,
            event_type: "crm.call.logged.v1",
            actor_kind: "service",
            actor_id: "tester",
            actor_chain: None,
            occurred_at: "2026-11-21T00:00:00.000000Z",
            retention_class: "operational",
            payload_digest: digest,
        }
    }

    fn chain(n: i64) -> Vec<Row> {
        let mut prev = ZERO_HASH.to_vec();
        (1..=n)
            .map(|seq| {
                let payload = format!("{{\"n\":{seq}}}");
                let digest = payload_digest(&payload).to_vec();
                let mut row = Row { entry_id: format!("entry-{seq}"), seq, payload, digest: digest.clone(), prev: prev.clone(), hash: Vec::new() };
                row.hash = entry_hash(&prev, &fields(&row, &digest)).to_vec();
                prev = row.hash.clone();
                row
            })
            .collect()
    }

    fn stored(r: &Row) -> Stored<'_> {
        Stored {
            entry_id: &r.entry_id,
            seq: r.seq,
            event_type: "crm.call.logged.v1",
            actor_kind: "service",
            actor_id: "tester",
            actor_chain: None,
            occurred_at: "2026-11-21T00:00:00.000000Z",
            retention_class: "operational",
            payload: Some(&r.payload),
            payload_digest: &r.digest,
            prev_hash: &r.prev,
            entry_hash: &r.hash,
        }
    }

    /// Feeds a checker the rows of its range, in seq order.
    fn run(mut checker: Checker, rows: &[Row], first: i64, last: i64) -> Checker {
        let mut rows: Vec<&Row> = rows.iter().filter(|r| r.seq >= first && r.seq <= last).collect();
        rows.sort_by_key(|r| r.seq);
        for r in rows {
            if !checker.next(&stored(r)) {
                break;
            }
        }
        checker
    }

    /// The verdict of one pass, and of parts cut before each seq in `cuts`.
    fn verdicts(rows: &[Row], head: (i64, &[u8]), cuts: &[i64]) -> (Verdict, Verdict) {
        let single = run(Checker::new(TENANT, 3), rows, 1, head.0).finish(Some(head));
        let mut bounds = vec![1];
        bounds.extend_from_slice(cuts);
        let mut joined: Option<Checker> = None;
        for (i, &first) in bounds.iter().enumerate() {
            let last = bounds.get(i + 1).map_or(head.0, |next| next - 1);
            let checker = if i == 0 { Checker::new(TENANT, 3) } else { Checker::part(TENANT, 3, first) };
            let part = run(checker, rows, first, last);
            joined = Some(match joined {
                None => part,
                Some(before) => before.join(part),
            });
        }
        (single, joined.unwrap().finish(Some(head)))
    }

    #[test]
    fn parts_agree_with_one_pass_on_every_tampering() {
        let n = 12;
        let clean = chain(n);
        let head_hash = clean.last().unwrap().hash.clone();
        let mut cases: Vec<(String, Vec<Row>)> = vec![("intact".into(), clean.clone())];
        for k in 0..n as usize {
            let mut deleted = clean.clone();
            deleted.remove(k);
            cases.push((format!("delete {}", k + 1), deleted));
            let mut payload = clean.clone();
            payload[k].payload = "{\"n\":-1}".into();
            cases.push((format!("payload {}", k + 1), payload));
            let mut prev = clean.clone();
            prev[k].prev[0] ^= 1;
            cases.push((format!("prev {}", k + 1), prev));
            let mut hash = clean.clone();
            hash[k].hash[5] ^= 1;
            cases.push((format!("hash {}", k + 1), hash));
            if k + 1 < n as usize {
                let mut swapped = clean.clone();
                let (a, b) = (swapped[k].seq, swapped[k + 1].seq);
                swapped[k].seq = b;
                swapped[k + 1].seq = a;
                cases.push((format!("reorder {}/{}", k + 1, k + 2), swapped));
            }
        }
        let mut failures = 0;
        for (name, rows) in &cases {
            for cuts in [vec![2], vec![6], vec![12], vec![4, 8], vec![2, 3, 11], vec![5, 6, 7, 12]] {
                let (single, parts) = verdicts(rows, (n, &head_hash), &cuts);
                assert_eq!(single, parts, "{name}, cut before {cuts:?}");
                failures += usize::from(!single.ok);
            }
        }
        // Every tampered case fails (the intact one passes under each cut).
        assert_eq!(failures, (cases.len() - 1) * 6);
        let (intact, _) = verdicts(&clean, (n, &head_hash), &[7]);
        assert!(intact.ok && intact.entries_checked == n, "{intact:?}");
    }

    #[test]
    fn long_chains_split_into_ranges_that_cover_them() {
        assert_eq!(parts(0), vec![(1, 0)]);
        assert_eq!(parts(10), vec![(1, 10)]);
        let cut = parts(1_000_003);
        assert_eq!(cut.first().unwrap().0, 1);
        assert_eq!(cut.last().unwrap().1, 1_000_003);
        for pair in cut.windows(2) {
            assert_eq!(pair[0].1 + 1, pair[1].0);
        }
    }
}
