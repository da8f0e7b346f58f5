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

pub const ZERO_HASH: [u8; 32] = [0; 32];

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
#[derive(Clone, Debug, Serialize)]
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
    pub payload_digest: String,
    pub prev_hash: String,
    pub entry_hash: String,
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

/// Checks an event against the closed vocabulary (baseline or the tenant's
/// registered types) and fills in its defaults. Reads only.
pub async fn prepare(tx: &mut Tx, ev: &Event<'_>) -> ApiResult<Prepared> {
    let kind = registry::lookup(&mut **tx, ev.tenant_id, ev.event_type).await?;
    let pool_index = match ev.pool_index {
        Some(p) => p,
        None => sqlx::query_scalar("SELECT admin_pool_index FROM tenant_tenant WHERE tenant_id = $1")
            .bind(ev.tenant_id)
            .fetch_optional(&mut **tx)
            .await?
            .unwrap_or(0),
    };
    prepare_with(kind.as_ref(), pool_index, ev)
}

/// `prepare` once the event's type has been looked up (`None`: unknown).
pub fn prepare_with(kind: Option<&registry::EventType>, pool_index: i64, ev: &Event<'_>) -> ApiResult<Prepared> {
    let Some(kind) = kind else {
        return Err(ApiError::invalid(format!(
            "event_type '{}' is neither a platform event type nor registered by this tenant (POST /api/events/types)",
            ev.event_type
        )));
    };
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

/// Takes the next `seq` of a chain and its current head hash, creating the
/// head on first use. The upsert takes the head row's lock on PostgreSQL,
/// so concurrent appends to one chain queue here until the holder commits;
/// SQLite writes are serialised by the single write connection anyway.
pub async fn advance_head(tx: &mut Tx, tenant_id: &str, pool_index: i64, by: i64) -> ApiResult<(i64, Vec<u8>)> {
    let row = sqlx::query(
        "INSERT INTO audit_chain_head (tenant_id, pool_index, seq, head_hash, updated_at) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (tenant_id, pool_index) DO UPDATE SET seq = audit_chain_head.seq + $3, updated_at = $5 \
         RETURNING seq, head_hash",
    )
    .bind(tenant_id)
    .bind(pool_index)
    .bind(by)
    .bind(ZERO_HASH.to_vec())
    .bind(db::now())
    .fetch_one(&mut **tx)
    .await?;
    // `seq` is now the last seq this caller owns; the first is seq - by + 1.
    Ok((row.try_get::<i64, _>("seq")?, row.try_get::<Vec<u8>, _>("head_hash")?))
}

pub async fn set_head_hash(tx: &mut Tx, tenant_id: &str, pool_index: i64, hash: &[u8]) -> ApiResult<()> {
    sqlx::query("UPDATE audit_chain_head SET head_hash = $1 WHERE tenant_id = $2 AND pool_index = $3")
        .bind(hash.to_vec())
        .bind(tenant_id)
        .bind(pool_index)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Chains a prepared entry after `prev_hash` at `seq` and answers it.
pub fn seal(p: &Prepared, seq: i64, prev_hash: &[u8]) -> ([u8; 32], Appended) {
    let hash = entry_hash(prev_hash, &Fields {
        entry_id: &p.entry_id,
        tenant_id: &p.tenant_id,
        pool_index: p.pool_index,
        seq,
        event_type: &p.event_type,
        actor_kind: &p.actor_kind,
        actor_id: &p.actor_id,
        actor_chain: p.actor_chain.as_deref(),
        occurred_at: &p.occurred_at,
        retention_class: &p.retention_class,
        payload_digest: &p.payload_digest,
    });
    let appended = Appended {
        entry_id: p.entry_id.clone(),
        tenant_id: p.tenant_id.clone(),
        pool_index: p.pool_index,
        seq,
        event_type: p.event_type.clone(),
        actor_kind: p.actor_kind.clone(),
        actor_id: p.actor_id.clone(),
        occurred_at: p.occurred_at.clone(),
        retention_class: p.retention_class.clone(),
        payload_digest: hex::encode(p.payload_digest),
        prev_hash: hex::encode(prev_hash),
        entry_hash: hex::encode(hash),
    };
    (hash, appended)
}

pub const INSERT_COLUMNS: &str = "INSERT INTO audit_entry (entry_id, tenant_id, pool_index, seq, event_type, actor_kind, actor_id, \
     actor_chain, occurred_at, retention_class, payload, payload_digest, prev_hash, entry_hash) VALUES ";

pub async fn insert(tx: &mut Tx, p: &Prepared, seq: i64, prev_hash: &[u8], hash: &[u8]) -> ApiResult<()> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "{INSERT_COLUMNS}($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
    )))
    .bind(&p.entry_id)
    .bind(&p.tenant_id)
    .bind(p.pool_index)
    .bind(seq)
    .bind(&p.event_type)
    .bind(&p.actor_kind)
    .bind(&p.actor_id)
    .bind(&p.actor_chain)
    .bind(&p.occurred_at)
    .bind(&p.retention_class)
    .bind(&p.payload)
    .bind(p.payload_digest.to_vec())
    .bind(prev_hash.to_vec())
    .bind(hash.to_vec())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Records an event inside the caller's transaction: the entry and the
/// chain head commit or roll back with the change the event records, so a
/// 2xx proves the event landed (RULINGS 1). The vocabulary is checked
/// before anything is written.
pub async fn emit(tx: &mut Tx, ev: Event<'_>) -> ApiResult<Appended> {
    let p = prepare(tx, &ev).await?;
    let (seq, prev) = advance_head(tx, &p.tenant_id, p.pool_index, 1).await?;
    let (hash, appended) = seal(&p, seq, &prev);
    insert(tx, &p, seq, &prev, &hash).await?;
    set_head_hash(tx, &p.tenant_id, p.pool_index, &hash).await?;
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
#[derive(Clone, Debug, Serialize)]
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

/// The verification of one chain, fed its entries in `seq` order. It holds
/// only the previous hash, so memory stays flat whatever the length.
pub struct Checker<'t> {
    tenant_id: &'t str,
    verdict: Verdict,
    expected: i64,
    prev: [u8; 32],
    /// The encoding buffer, reused for every entry.
    buf: Vec<u8>,
}

impl<'t> Checker<'t> {
    pub fn new(tenant_id: &'t str, pool_index: i64) -> Self {
        Checker {
            tenant_id,
            verdict: Verdict { pool_index, ok: true, entries_checked: 0, failed_seq: None, reason: None },
            expected: 1,
            prev: ZERO_HASH,
            buf: Vec::with_capacity(512),
        }
    }

    /// Checks the next entry; `false` once the chain has failed.
    pub fn next(&mut self, e: &Stored<'_>) -> bool {
        let failure = if e.seq != self.expected {
            Some((self.expected, Reason::Gap))
        } else if *e.prev_hash != self.prev[..] {
            Some((e.seq, Reason::WrongPrev))
        } else if e.payload.is_some_and(|p| payload_digest(p)[..] != *e.payload_digest) {
            Some((e.seq, Reason::WrongHash))
        } else {
            let computed = entry_hash_with(&mut self.buf, &self.prev, &Fields {
                entry_id: e.entry_id,
                tenant_id: self.tenant_id,
                pool_index: self.verdict.pool_index,
                seq: e.seq,
                event_type: e.event_type,
                actor_kind: e.actor_kind,
                actor_id: e.actor_id,
                actor_chain: e.actor_chain,
                occurred_at: e.occurred_at,
                retention_class: e.retention_class,
                payload_digest: e.payload_digest,
            });
            (computed[..] != *e.entry_hash).then_some((e.seq, Reason::WrongHash))
        };
        match failure {
            Some((seq, reason)) => {
                self.fail(seq, reason);
                false
            }
            None => {
                self.verdict.entries_checked += 1;
                self.prev = to_array(e.entry_hash);
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

    /// The verdict, after checking the end of the chain against its head
    /// (a deleted last entry is a gap; a rewritten one a wrong hash).
    pub fn finish(mut self, head: Option<(i64, &[u8])>) -> Verdict {
        if self.verdict.ok
            && let Some((head_seq, head_hash)) = head
        {
            let last = self.expected - 1;
            if last < head_seq {
                self.fail(self.expected, Reason::Gap);
            } else if last > 0 && self.prev[..] != *head_hash {
                self.fail(last, Reason::WrongHash);
            }
        }
        self.verdict
    }
}

/// A stored entry hash (already checked equal to a computed one, so 32 bytes).
fn to_array(stored: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(stored);
    out
}

const VERIFY_SELECT: &str = "SELECT entry_id, seq, event_type, actor_kind, actor_id, actor_chain, occurred_at, retention_class, payload, \
     payload_digest, prev_hash, entry_hash FROM audit_entry WHERE tenant_id = $1 AND pool_index = $2 AND seq <= $3 ORDER BY seq";

/// Verifies the chain `(tenant_id, pool_index)` against its head, reading
/// the entries as a stream in `seq` order: memory stays flat whatever the
/// chain's length. Entries appended after the head was read are left for
/// the next verification.
pub async fn verify(db: &Db, tenant_id: &str, pool_index: i64) -> ApiResult<Verdict> {
    let head = sqlx::query("SELECT seq, head_hash FROM audit_chain_head WHERE tenant_id = $1 AND pool_index = $2")
        .bind(tenant_id)
        .bind(pool_index)
        .fetch_optional(&db.read)
        .await?;
    let head = match &head {
        Some(r) => Some((r.try_get::<i64, _>("seq")?, r.try_get::<Vec<u8>, _>("head_hash")?)),
        None => None,
    };
    match sqlite_file(db) {
        Some(path) => {
            let tenant = tenant_id.to_string();
            tokio::task::spawn_blocking(move || verify_sqlite_file(&path, &tenant, pool_index, head))
                .await
                .map_err(|e| ApiError::Internal(anyhow::anyhow!("verification task: {e}")))?
        }
        None => verify_stream(&db.read, tenant_id, pool_index, head).await,
    }
}

/// The SQLite database file behind `db`, for readers that bypass the pool
/// (None on PostgreSQL and for in-memory databases).
fn sqlite_file(db: &Db) -> Option<std::path::PathBuf> {
    use std::str::FromStr;
    if db.backend != crate::db::Backend::Sqlite {
        return None;
    }
    let options = sqlx::sqlite::SqliteConnectOptions::from_str(&db.url).ok()?;
    let file = options.get_filename();
    (!file.as_os_str().is_empty() && file != std::path::Path::new(":memory:")).then(|| file.to_path_buf())
}

/// Any backend: the entries as an sqlx stream (`fetch`, never `fetch_all`).
async fn verify_stream(pool: &sqlx::AnyPool, tenant_id: &str, pool_index: i64, head: Option<(i64, Vec<u8>)>) -> ApiResult<Verdict> {
    let mut checker = Checker::new(tenant_id, pool_index);
    let mut rows = sqlx::query(VERIFY_SELECT)
        .bind(tenant_id)
        .bind(pool_index)
        .bind(head.as_ref().map_or(i64::MAX, |h| h.0))
        .fetch(pool);
    while let Some(r) = rows.try_next().await? {
        let (payload, actor_chain): (Option<String>, Option<String>) = (r.try_get(8)?, r.try_get(5)?);
        let (digest, prev, hash): (Vec<u8>, Vec<u8>, Vec<u8>) = (r.try_get(9)?, r.try_get(10)?, r.try_get(11)?);
        let stored = Stored {
            entry_id: &r.try_get::<String, _>(0)?,
            seq: r.try_get(1)?,
            event_type: &r.try_get::<String, _>(2)?,
            actor_kind: &r.try_get::<String, _>(3)?,
            actor_id: &r.try_get::<String, _>(4)?,
            actor_chain: actor_chain.as_deref(),
            occurred_at: &r.try_get::<String, _>(6)?,
            retention_class: &r.try_get::<String, _>(7)?,
            payload: payload.as_deref(),
            payload_digest: &digest,
            prev_hash: &prev,
            entry_hash: &hash,
        };
        if !checker.next(&stored) {
            break;
        }
    }
    Ok(checker.finish(head.as_ref().map(|(s, h)| (*s, h.as_slice()))))
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
fn verify_sqlite_file(path: &std::path::Path, tenant_id: &str, pool_index: i64, head: Option<(i64, Vec<u8>)>) -> ApiResult<Verdict> {
    use rusqlite::OpenFlags;
    let fault = |e: rusqlite::Error| ApiError::Internal(anyhow::anyhow!("verifying from SQLite: {e}"));
    let conn = rusqlite::Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX).map_err(fault)?;
    conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(fault)?;
    let mut stmt = conn.prepare(VERIFY_SELECT).map_err(fault)?;
    let mut rows = stmt.query((tenant_id, pool_index, head.as_ref().map_or(i64::MAX, |h| h.0))).map_err(fault)?;
    let mut checker = Checker::new(tenant_id, pool_index);
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
    Ok(checker.finish(head.as_ref().map(|(s, h)| (*s, h.as_slice()))))
}

/// Every pool in which a tenant has a chain, in order.
pub async fn pools_of(pool: &sqlx::AnyPool, tenant_id: &str) -> ApiResult<Vec<i64>> {
    Ok(sqlx::query_scalar(
        "SELECT pool_index FROM audit_chain_head WHERE tenant_id = $1 \
         UNION SELECT DISTINCT pool_index FROM audit_entry WHERE tenant_id = $1 ORDER BY 1",
    )
    .bind(tenant_id)
    .fetch_all(pool)
    .await?)
}
