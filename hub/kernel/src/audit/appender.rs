//! Group commit, in two stages that overlap. The first takes appends from
//! many callers, checks each against the vocabulary and fills in its
//! defaults (id, time, payload digest); the second chains a whole batch in
//! one transaction (one head read and one head write per chain) and
//! answers each caller only after the commit. While one batch commits, the
//! next is prepared. Alone, a request is a batch of one.
//!
//! On PostgreSQL a batch is written with multi-row statements through sqlx
//! ([`write_sql`], which `emit` also uses inside a caller's transaction).
//! On SQLite the commit stage writes through a rusqlite connection of its
//! own ([`SqliteChains`]): prepared statements bound to borrowed values,
//! on a blocking thread. Meanwhile it holds the hub's one sqlx write
//! connection idle ([`Db::hold_writer`]), so the two writers take turns and
//! never contend for SQLite's write lock. Its commits skip the fsync: a
//! third stage syncs the WAL once for all the batches committed meanwhile
//! and only then answers their callers, and a fourth thread checkpoints the
//! WAL, so neither the disk flush nor the copy into the database file
//! holds up the next batch.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;
use sqlx::Row;
use tokio::sync::{mpsc, oneshot};

use super::{
    chain::{self, Appended, Event, Hash, Prepared, ZERO_HASH},
    registry::{self, EventType},
};
use crate::{
    db::{self, Backend, Db, Tx},
    error::{ApiError, ApiResult},
};

/// Appends taken into one prepared batch at most.
const MAX_BATCH: usize = 4096;
/// Prepared batches merged into one transaction at most.
const MAX_MERGED: usize = 64;
/// Rows per INSERT statement (15 parameters each keeps well under the
/// parameter limits of both backends).
const ROWS_PER_INSERT: usize = 256;
/// Chain heads per upsert statement (5 parameters each).
const CHAINS_PER_STATEMENT: usize = 1000;

/// An event owned by its job.
#[derive(Clone, Debug)]
pub struct OwnedEvent {
    pub tenant_id: String,
    pub pool_index: i64,
    pub event_type: String,
    pub actor_kind: String,
    pub actor_id: String,
    pub actor_chain: Option<Value>,
    pub payload: Value,
    pub retention_class: Option<String>,
}

impl OwnedEvent {
    fn borrow(&self) -> Event<'_> {
        Event {
            tenant_id: &self.tenant_id,
            pool_index: Some(self.pool_index),
            event_type: &self.event_type,
            actor_kind: &self.actor_kind,
            actor_id: &self.actor_id,
            actor_chain: self.actor_chain.as_ref(),
            payload: &self.payload,
            retention_class: self.retention_class.as_deref(),
            occurred_at: None,
        }
    }
}

type Reply = oneshot::Sender<ApiResult<Appended>>;

struct Job {
    event: OwnedEvent,
    reply: Reply,
}

/// The handle callers append through; cheap to clone.
#[derive(Clone)]
pub struct Appender {
    jobs: mpsc::Sender<Job>,
}

impl Appender {
    /// Starts both stages on `db`; they end when every handle is dropped.
    /// On SQLite the commit stage is a thread of its own ([`sqlite_commits`]).
    pub fn start(db: Db) -> anyhow::Result<Appender> {
        let (jobs, job_rx) = mpsc::channel(MAX_BATCH * 4);
        let (batches, batch_rx) = mpsc::channel(MAX_MERGED);
        tokio::spawn(prepare_stage(db.read.clone(), job_rx, batches));
        match db.sqlite_file() {
            Some(path) => {
                let (checkpoint_tx, checkpoint_rx) = std::sync::mpsc::sync_channel(1);
                let chains = SqliteChains::open(&path, checkpoint_tx)?;
                let checkpointer = SqliteChains::connect(&path)?;
                let (written_tx, written_rx) = std::sync::mpsc::channel();
                let wal = WalFile::new(&path);
                let runtime = tokio::runtime::Handle::current();
                std::thread::Builder::new().name("audit-sqlite".into()).spawn(move || sqlite_commits(&runtime, &db, chains, batch_rx, written_tx))?;
                std::thread::Builder::new().name("audit-fsync".into()).spawn(move || sqlite_syncs(wal, written_rx))?;
                std::thread::Builder::new().name("audit-checkpoint".into()).spawn(move || sqlite_checkpoints(checkpointer, checkpoint_rx))?;
            }
            None => {
                tokio::spawn(sql_commits(db, batch_rx));
            }
        }
        Ok(Appender { jobs })
    }

    /// Appends one event; answers once its batch has committed (or failed).
    pub async fn append(&self, event: OwnedEvent) -> ApiResult<Appended> {
        let (reply, answer) = oneshot::channel();
        self.jobs.send(Job { event, reply }).await.map_err(|_| ApiError::Internal(anyhow::anyhow!("the audit writer has stopped")))?;
        answer.await.map_err(|_| ApiError::Internal(anyhow::anyhow!("the audit writer dropped an append")))?
    }
}

type Batch = Vec<(Prepared, Reply)>;

/// Stage one: validates and prepares whatever appends are waiting, then
/// hands them on as one batch. A refused append is answered at once and
/// goes no further.
async fn prepare_stage(read: sqlx::AnyPool, mut jobs: mpsc::Receiver<Job>, out: mpsc::Sender<Batch>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while jobs.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let accepted = accept(&read, std::mem::take(&mut batch)).await;
        if !accepted.is_empty() && out.send(accepted).await.is_err() {
            return;
        }
    }
}

async fn accept(read: &sqlx::AnyPool, jobs: Vec<Job>) -> Batch {
    // Baseline types are in memory; a tenant's own are read once a batch.
    let baseline: Vec<Option<&EventType>> = jobs.iter().map(|job| registry::baseline().get(&job.event.event_type)).collect();
    let mut tenant_kinds: HashMap<(&str, &str), ApiResult<Option<EventType>>> = HashMap::new();
    for (job, _) in jobs.iter().zip(&baseline).filter(|(_, kind)| kind.is_none()) {
        let key = (job.event.tenant_id.as_str(), job.event.event_type.as_str());
        if let std::collections::hash_map::Entry::Vacant(slot) = tenant_kinds.entry(key) {
            slot.insert(registry::lookup(read, key.0, key.1).await);
        }
    }
    let mut prepared = Vec::with_capacity(jobs.len());
    for (job, in_baseline) in jobs.iter().zip(baseline) {
        let kind = match in_baseline {
            Some(kind) => Ok(Some(kind)),
            None => match &tenant_kinds[&(job.event.tenant_id.as_str(), job.event.event_type.as_str())] {
                Ok(kind) => Ok(kind.as_ref()),
                Err(e) => Err(ApiError::Internal(anyhow::anyhow!("looking up an event type: {e}"))),
            },
        };
        prepared.push(kind.and_then(|kind| chain::prepare_with(kind, job.event.pool_index, &job.event.borrow())));
    }
    drop(tenant_kinds);
    let mut accepted = Vec::with_capacity(jobs.len());
    for (job, p) in jobs.into_iter().zip(prepared) {
        match p {
            Ok(p) => accepted.push((p, job.reply)),
            Err(e) => {
                let _ = job.reply.send(Err(e));
            }
        }
    }
    accepted
}

/// Stage two on PostgreSQL: commits what stage one has prepared, merging
/// the batches that wait, in sqlx transactions.
async fn sql_commits(db: Db, mut batches: mpsc::Receiver<Batch>) {
    let mut waiting = Vec::with_capacity(MAX_MERGED);
    while batches.recv_many(&mut waiting, MAX_MERGED).await > 0 {
        let (entries, replies): (Vec<Prepared>, Vec<Reply>) = waiting.drain(..).flatten().unzip();
        let size = entries.len();
        let result = async {
            let mut tx = db.begin().await?;
            let answers = write_sql(&mut tx, db.backend, entries).await?;
            tx.commit().await?;
            metrics::histogram!("hub_audit_commit_batch_size").record(size as f64);
            metrics::counter!("hub_audit_appends_total", "path" => "group_commit").increment(size as u64);
            Ok(answers)
        };
        answer(replies, result.await);
    }
}

/// Stage two on SQLite, on a thread of its own so that a batch starts the
/// moment the one before it is written, however busy the runtime is.
///
/// Each batch is written and committed without an fsync; the callers are
/// answered by the sync stage ([`sqlite_syncs`]) once the WAL holding the
/// commit is on disk, while this thread already writes the next batch.
/// Batches are written while the sqlx write connection is held; it is kept
/// across consecutive batches for at most [`HOLD_WRITER_FOR`] and given
/// back whenever no batch waits, so the hub's other writes queue behind
/// at most that long.
fn sqlite_commits(
    runtime: &tokio::runtime::Handle,
    db: &Db,
    mut chains: SqliteChains,
    mut batches: mpsc::Receiver<Batch>,
    synced: std::sync::mpsc::Sender<Written>,
) {
    // The held connection goes back to its pool through the runtime.
    let _context = runtime.enter();
    let mut waiting = Vec::with_capacity(MAX_MERGED);
    let mut held: Option<(sqlx::pool::PoolConnection<sqlx::Any>, std::time::Instant)> = None;
    loop {
        let batch = match batches.try_recv() {
            Ok(batch) => batch,
            Err(mpsc::error::TryRecvError::Empty) => {
                held = None;
                match batches.blocking_recv() {
                    Some(batch) => batch,
                    None => return,
                }
            }
            Err(mpsc::error::TryRecvError::Disconnected) => return,
        };
        let mut count = batch.len();
        waiting.push(batch);
        while count < MAX_BATCH
            && let Ok(more) = batches.try_recv()
        {
            count += more.len();
            waiting.push(more);
        }
        let (entries, replies): (Vec<Prepared>, Vec<Reply>) = waiting.drain(..).flatten().unzip();
        if held.as_ref().is_none_or(|(_, since)| since.elapsed() > HOLD_WRITER_FOR) {
            held = None;
            match runtime.block_on(db.hold_writer()) {
                Ok(conn) => held = Some((conn, std::time::Instant::now())),
                Err(e) => {
                    answer(replies, Err(e.into()));
                    continue;
                }
            }
        }
        match chains.write(&entries) {
            Ok(sealed) => {
                metrics::histogram!("hub_audit_commit_batch_size").record(entries.len() as f64);
                metrics::counter!("hub_audit_appends_total", "path" => "group_commit").increment(entries.len() as u64);
                if synced.send(Written { replies, answers: answers(entries, sealed) }).is_err() {
                    return;
                }
            }
            Err(e) => answer(replies, Err(e)),
        }
    }
}

/// How long the SQLite commit stage keeps the sqlx write connection across
/// consecutive batches before letting the hub's other writes in.
const HOLD_WRITER_FOR: std::time::Duration = std::time::Duration::from_millis(20);

/// A committed batch whose callers wait for the WAL to reach the disk.
struct Written {
    replies: Vec<Reply>,
    answers: Vec<Appended>,
}

/// Stage three on SQLite: makes the WAL durable once for every batch
/// committed since the last sync (group fsync), then answers their callers:
/// a 201 means the entry survives a power cut. A failed sync answers 500.
fn sqlite_syncs(mut wal: WalFile, written: std::sync::mpsc::Receiver<Written>) {
    while let Ok(first) = written.recv() {
        let mut done = vec![first];
        done.extend(written.try_iter());
        let synced = wal.sync();
        for Written { replies, answers } in done {
            match &synced {
                Ok(()) => answer(replies, Ok(answers)),
                Err(e) => answer(replies, Err(ApiError::Internal(anyhow::anyhow!("syncing the audit WAL: {e}")))),
            }
        }
    }
}

/// The SQLite write-ahead log, opened for fsync: fsync covers every write
/// to the file, whichever descriptor made it. SQLite keeps the file while
/// any connection is open (the appender's always is); should it ever be
/// replaced, the new file is opened and synced.
struct WalFile {
    path: std::path::PathBuf,
    file: Option<std::fs::File>,
}

impl WalFile {
    fn new(db_file: &std::path::Path) -> WalFile {
        let mut path = db_file.as_os_str().to_owned();
        path.push("-wal");
        WalFile { path: path.into(), file: None }
    }

    fn sync(&mut self) -> std::io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let current = std::fs::metadata(&self.path)?.ino();
        if self.file.as_ref().is_none_or(|f| f.metadata().is_ok_and(|m| m.ino() != current)) {
            self.file = Some(std::fs::File::open(&self.path)?);
        }
        self.file.as_ref().expect("opened above").sync_data()
    }
}

/// Checkpoints the SQLite WAL into the database file on a connection and
/// thread of its own, for every writer of the file: a PASSIVE checkpoint
/// whenever the appender's commit stage reports progress, at most every
/// [`CHECKPOINT_EVERY`], and at least every [`CHECKPOINT_IDLE`] for the
/// hub's sqlx write connection, which reports nothing. Both writers raise
/// their own automatic checkpoint to [`db::WAL_AUTOCHECKPOINT`] frames, so
/// a request's commit copies pages only when this thread falls behind
/// (before, every thousandth page written made one request's commit run a
/// checkpoint, syncs included: the command path's p99). A checkpoint with
/// nothing new to copy costs a look at the WAL index. The checkpoint syncs
/// the WAL before copying and the database after (`synchronous = NORMAL`).
fn sqlite_checkpoints(conn: rusqlite::Connection, progress: std::sync::mpsc::Receiver<()>) {
    use std::sync::mpsc::RecvTimeoutError;
    loop {
        if let Err(RecvTimeoutError::Disconnected) = progress.recv_timeout(CHECKPOINT_IDLE) {
            return;
        }
        let started = std::time::Instant::now();
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::warn!(error = %e, "WAL checkpoint failed");
        }
        std::thread::sleep(CHECKPOINT_EVERY.saturating_sub(started.elapsed()));
        // Progress reported meanwhile is covered by the next checkpoint.
        progress.try_iter().for_each(drop);
    }
}

/// The longest time between two checkpoints.
const CHECKPOINT_IDLE: std::time::Duration = std::time::Duration::from_millis(200);
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// Answers every caller of a committed (or failed) batch.
fn answer(replies: Vec<Reply>, result: ApiResult<Vec<Appended>>) {
    match result {
        Ok(answers) => {
            for (reply, answer) in replies.into_iter().zip(answers) {
                let _ = reply.send(Ok(answer));
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "audit batch failed");
            for reply in replies {
                let _ = reply.send(Err(ApiError::Internal(anyhow::anyhow!("audit append failed"))));
            }
        }
    }
}

/// Where an entry lands in its chain.
#[derive(Clone, Copy, Default)]
struct Sealed {
    chain_id: i64,
    seq: i64,
    prev: Hash,
    hash: Hash,
}

/// The chains a batch touches, in a fixed order (so writers on several
/// replicas lock heads in one order and cannot deadlock), each with the
/// positions of its entries in arrival order.
fn by_chain(entries: &[Prepared]) -> Vec<((&str, i64), Vec<usize>)> {
    let mut chains: BTreeMap<(&str, i64), Vec<usize>> = BTreeMap::new();
    for (i, p) in entries.iter().enumerate() {
        chains.entry((p.tenant_id.as_str(), p.pool_index)).or_default().push(i);
    }
    chains.into_iter().collect()
}

/// Chains `members` of `entries` into chain `chain_id` after a head at
/// (`last` seq, `head` hash); returns the chain's new head hash.
fn seal_chain(entries: &[Prepared], members: &[usize], chain_id: i64, last: i64, head: Hash, sealed: &mut [Sealed]) -> Hash {
    let mut prev = head;
    for (n, &i) in members.iter().enumerate() {
        let seq = last + 1 + n as i64;
        let hash = entries[i].seal(seq, &prev);
        sealed[i] = Sealed { chain_id, seq, prev, hash };
        prev = hash;
    }
    prev
}

fn answers(entries: Vec<Prepared>, sealed: Vec<Sealed>) -> Vec<Appended> {
    entries.into_iter().zip(sealed).map(|(p, s)| p.into_appended(s.seq, s.prev, s.hash)).collect()
}

/// Writes a batch inside `tx` through sqlx: per group of chains, one head
/// advance (which takes the heads' row locks on PostgreSQL), the entries
/// chained in arrival order, then [`store`].
pub(crate) async fn write_sql(tx: &mut Tx, backend: Backend, entries: Vec<Prepared>) -> ApiResult<Vec<Appended>> {
    let mut sealed = vec![Sealed::default(); entries.len()];
    let chains = by_chain(&entries);
    let mut heads: Vec<(&str, i64, i64, Hash)> = Vec::with_capacity(chains.len());
    for group in chains.chunks(CHAINS_PER_STATEMENT) {
        let advanced = advance_heads(tx, backend, group).await?;
        for ((tenant_id, pool_index), members) in group {
            let (chain_id, last, head) =
                advanced.get(&(tenant_id.to_string(), *pool_index)).ok_or_else(|| ApiError::Internal(anyhow::anyhow!("a chain head was not returned")))?;
            let new_head = seal_chain(&entries, members, *chain_id, last - members.len() as i64, chain::hash_from(head)?, &mut sealed);
            heads.push((tenant_id, *pool_index, *last, new_head));
        }
    }
    store(tx, backend, &entries, &sealed, &heads).await?;
    Ok(answers(entries, sealed))
}

/// One event of a route's transaction on PostgreSQL, in its tenant's pool:
/// the head advance reads the pool (`admin_pool_index`, 0 for an unknown
/// tenant) as it locks the head, so the event costs two round trips (head
/// advance, then [`store`]'s one statement).
pub(crate) async fn write_in_tenant_pool(tx: &mut Tx, mut entry: Prepared) -> ApiResult<Appended> {
    let sql = format!(
        "INSERT INTO audit_chain_head (tenant_id, pool_index, seq, head_hash, updated_at) \
         SELECT $1, COALESCE((SELECT admin_pool_index FROM tenant_tenant WHERE tenant_id = $1), 0), 1, $2, $3{HEAD_ADVANCE}"
    );
    let advanced = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(&entry.tenant_id).bind(ZERO_HASH.to_vec()).bind(crate::db::now()).fetch_one(&mut **tx).await?;
    entry.pool_index = advanced.try_get(1)?;
    let (chain_id, seq, head): (i64, i64, Vec<u8>) = (advanced.try_get(2)?, advanced.try_get(3)?, advanced.try_get(4)?);
    let entries = [entry];
    let mut sealed = [Sealed::default()];
    let new_head = seal_chain(&entries, &[0], chain_id, seq - 1, chain::hash_from(&head)?, &mut sealed);
    store(tx, Backend::Postgres, &entries, &sealed, &[(&entries[0].tenant_id, entries[0].pool_index, seq, new_head)]).await?;
    let [entry] = entries;
    let [sealed] = sealed;
    Ok(entry.into_appended(sealed.seq, sealed.prev, sealed.hash))
}

/// Stores chained entries and their chains' new `heads` (tenant, pool,
/// last seq, hash): the head hashes, then the entries in multi-row
/// inserts, each followed by its outbox marks. On PostgreSQL the head-hash
/// update, the first insert and its marks are one statement
/// (data-modifying `WITH` parts), as is every later insert with its marks.
async fn store(tx: &mut Tx, backend: Backend, entries: &[Prepared], sealed: &[Sealed], heads: &[(&str, i64, i64, Hash)]) -> ApiResult<()> {
    // The head updates the first insert carries (PostgreSQL, one group).
    let mut carried: &[(&str, i64, i64, Hash)] = &[];
    if backend == Backend::Postgres && heads.len() <= CHAINS_PER_STATEMENT {
        carried = heads;
    } else {
        for group in heads.chunks(CHAINS_PER_STATEMENT) {
            set_heads(tx, backend, group).await?;
        }
    }
    for (chunk, positions) in entries.chunks(ROWS_PER_INSERT).zip(sealed.chunks(ROWS_PER_INSERT)) {
        let insert = multi_row_insert(chain::INSERT_COLUMNS, backend, chunk.len(), chain::INSERT_COLUMN_COUNT);
        let now = crate::db::now();
        let sql = match backend {
            Backend::Sqlite => insert,
            Backend::Postgres => {
                let mut sql = String::from("WITH ");
                if !carried.is_empty() {
                    sql.push_str("h AS (");
                    sql.push_str(&head_hash_update(backend, carried.len()));
                    sql.push_str("), ");
                }
                // The entries' parameters follow the heads'.
                let before = carried.len() * 5;
                let numbered = (0..chunk.len()).map(|n| row_placeholders(backend, before + n * chain::INSERT_COLUMN_COUNT, chain::INSERT_COLUMN_COUNT));
                sql.push_str("a AS (");
                sql.push_str(chain::INSERT_COLUMNS);
                sql.push_str(&numbered.collect::<Vec<_>>().join(","));
                sql.push_str(" RETURNING entry_id, tenant_id, event_type) ");
                sql.push_str(&super::outbox::marks_of("a", before + chunk.len() * chain::INSERT_COLUMN_COUNT + 1));
                sql
            }
        };
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (tenant_id, pool_index, seq, hash) in carried {
            q = q.bind(*tenant_id).bind(*pool_index).bind(*seq).bind(hash.to_vec()).bind(now.clone());
        }
        for (p, s) in chunk.iter().zip(positions) {
            q = q
                .bind(&p.entry_id)
                .bind(&p.tenant_id)
                .bind(p.pool_index)
                .bind(s.chain_id)
                .bind(s.seq)
                .bind(&p.event_type)
                .bind(&p.actor_kind)
                .bind(&p.actor_id)
                .bind(&p.actor_chain)
                .bind(&p.occurred_at)
                .bind(&p.retention_class)
                .bind(&p.payload)
                .bind(p.payload_digest.to_vec())
                .bind(s.prev.to_vec())
                .bind(s.hash.to_vec());
        }
        if backend == Backend::Postgres {
            q = q.bind(now);
        }
        q.execute(&mut **tx).await?;
        carried = &[];
        if backend == Backend::Sqlite {
            let ids: Vec<&str> = chunk.iter().map(|p| p.entry_id.as_str()).collect();
            super::outbox::enqueue(tx, backend, &ids).await?;
        }
    }
    Ok(())
}

/// Advances the heads of several chains by their entry counts in one
/// statement (creating missing heads), locking them in the given (sorted)
/// order on PostgreSQL; returns each chain's id, new last seq and the hash
/// it had before.
async fn advance_heads(tx: &mut Tx, backend: Backend, group: &[((&str, i64), Vec<usize>)]) -> ApiResult<HashMap<(String, i64), (i64, i64, Vec<u8>)>> {
    let now = crate::db::now();
    let mut sql = multi_row_insert(HEAD_INSERT, backend, group.len(), 5);
    sql.push_str(HEAD_ADVANCE);
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
    for ((tenant_id, pool_index), members) in group {
        q = q.bind(*tenant_id).bind(*pool_index).bind(members.len() as i64).bind(ZERO_HASH.to_vec()).bind(now.clone());
    }
    let mut out = HashMap::with_capacity(group.len());
    for r in q.fetch_all(&mut **tx).await? {
        out.insert((r.try_get::<String, _>(0)?, r.try_get::<i64, _>(1)?), (r.try_get::<i64, _>(2)?, r.try_get::<i64, _>(3)?, r.try_get::<Vec<u8>, _>(4)?));
    }
    Ok(out)
}

/// Stores the new head hashes of several chains in one statement.
async fn set_heads(tx: &mut Tx, backend: Backend, group: &[(&str, i64, i64, Hash)]) -> ApiResult<()> {
    let now = crate::db::now();
    let mut q = sqlx::query(sqlx::AssertSqlSafe(head_hash_update(backend, group.len())));
    for (tenant_id, pool_index, seq, hash) in group {
        q = q.bind(*tenant_id).bind(*pool_index).bind(*seq).bind(hash.to_vec()).bind(now.clone());
    }
    q.execute(&mut **tx).await?;
    Ok(())
}

const HEAD_INSERT: &str = "INSERT INTO audit_chain_head (tenant_id, pool_index, seq, head_hash, updated_at) VALUES ";

/// What ends a head advance: an existing head moves on by the inserted
/// row's `seq` (its entry count), and every head answers its id, new last
/// seq and the hash it had before.
const HEAD_ADVANCE: &str = " ON CONFLICT (tenant_id, pool_index) DO UPDATE SET seq = audit_chain_head.seq + excluded.seq, \
     updated_at = excluded.updated_at RETURNING tenant_id, pool_index, chain_id, seq, head_hash";

/// The statement that stores the new head hashes of `chains` chains (five
/// parameters each, numbered from 1).
fn head_hash_update(backend: Backend, chains: usize) -> String {
    let mut sql = multi_row_insert(HEAD_INSERT, backend, chains, 5);
    sql.push_str(" ON CONFLICT (tenant_id, pool_index) DO UPDATE SET head_hash = excluded.head_hash");
    sql
}

/// `head` (an `INSERT ... VALUES ` prefix) followed by `rows` placeholder
/// rows of `cols` parameters each.
fn multi_row_insert(head: &str, backend: Backend, rows: usize, cols: usize) -> String {
    let mut sql = String::with_capacity(head.len() + rows * (cols * 5 + 3));
    sql.push_str(head);
    for n in 0..rows {
        if n > 0 {
            sql.push(',');
        }
        sql.push_str(&row_placeholders(backend, n * cols, cols));
    }
    sql
}

/// `(p1, ..., pn)` for a row whose parameters follow the first `before`.
///
/// The one dialect difference of this module: PostgreSQL needs numbered
/// `$N`, while SQLite resolves each numbered parameter by a linear search
/// of the statement's names (quadratic in a multi-row insert with thousands
/// of parameters), so SQLite gets anonymous `?`, bound in order.
fn row_placeholders(backend: Backend, before: usize, n: usize) -> String {
    let mut out = String::with_capacity(n * 5 + 2);
    out.push('(');
    for c in 1..=n {
        if c > 1 {
            out.push(',');
        }
        match backend {
            Backend::Sqlite => out.push('?'),
            Backend::Postgres => {
                out.push('$');
                out.push_str(&(before + c).to_string());
            }
        }
    }
    out.push(')');
    out
}

/// The SQLite commit path: a write connection of the appender's own. Its
/// commits do not fsync (`synchronous = NORMAL`): the sync stage makes the
/// WAL durable before any caller is answered, so a 201 still survives a
/// power cut. It leaves checkpoints to [`sqlite_checkpoints`] and runs one
/// itself only once the WAL reaches [`db::WAL_AUTOCHECKPOINT`] frames, which
/// bounds the WAL when the background checkpoints never catch up with a
/// busy writer (the WAL restarts only after a checkpoint copied all of it).
pub(crate) struct SqliteChains {
    conn: rusqlite::Connection,
    checkpoint: std::sync::mpsc::SyncSender<()>,
}

const SQLITE_HEAD_SELECT: &str = "SELECT chain_id, seq, head_hash FROM audit_chain_head WHERE tenant_id = ?1 AND pool_index = ?2";
const SQLITE_HEAD_CREATE: &str = "INSERT INTO audit_chain_head (tenant_id, pool_index, seq, head_hash, updated_at) VALUES (?1, ?2, 0, ?3, ?4) \
     RETURNING chain_id";
const SQLITE_HEAD_UPDATE: &str = "UPDATE audit_chain_head SET seq = ?2, head_hash = ?3, updated_at = ?4 WHERE chain_id = ?1";

impl SqliteChains {
    fn open(path: &std::path::Path, checkpoint: std::sync::mpsc::SyncSender<()>) -> anyhow::Result<SqliteChains> {
        let conn = SqliteChains::connect(path)?;
        conn.execute_batch(&format!("PRAGMA wal_autocheckpoint = {}", db::WAL_AUTOCHECKPOINT))?;
        Ok(SqliteChains { conn, checkpoint })
    }

    /// A connection of the appender's own to the hub's database file.
    fn connect(path: &std::path::Path) -> anyhow::Result<rusqlite::Connection> {
        use rusqlite::OpenFlags;
        let conn = rusqlite::Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.execute_batch("PRAGMA synchronous = NORMAL")?;
        Ok(conn)
    }

    /// Chains and commits `entries` in one IMMEDIATE transaction (the write
    /// lock is taken before the heads are read); each head is read (or
    /// created) once and written once.
    fn write(&mut self, entries: &[Prepared]) -> ApiResult<Vec<Sealed>> {
        use rusqlite::OptionalExtension;
        let fault = |e: rusqlite::Error| ApiError::Internal(anyhow::anyhow!("writing audit entries to SQLite: {e}"));
        let now = crate::db::now();
        let mut sealed = vec![Sealed::default(); entries.len()];
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(fault)?;
        {
            let mut head_select = tx.prepare_cached(SQLITE_HEAD_SELECT).map_err(fault)?;
            let mut head_create = tx.prepare_cached(SQLITE_HEAD_CREATE).map_err(fault)?;
            let mut head_update = tx.prepare_cached(SQLITE_HEAD_UPDATE).map_err(fault)?;
            let mut insert = tx.prepare_cached(&multi_row_insert(chain::INSERT_COLUMNS, Backend::Sqlite, 1, chain::INSERT_COLUMN_COUNT)).map_err(fault)?;
            let mut mark = tx.prepare_cached(&format!("{} AND a.entry_id = $2", super::outbox::marks_of("audit_entry", 1))).map_err(fault)?;
            for ((tenant_id, pool_index), members) in by_chain(entries) {
                let head: Option<(i64, i64, Vec<u8>)> =
                    head_select.query_row((tenant_id, pool_index), |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional().map_err(fault)?;
                let (chain_id, last, head) = match head {
                    Some((chain_id, seq, hash)) => (chain_id, seq, chain::hash_from(&hash)?),
                    None => (head_create.query_row((tenant_id, pool_index, &ZERO_HASH[..], &now), |r| r.get(0)).map_err(fault)?, 0, ZERO_HASH),
                };
                let new_head = seal_chain(entries, &members, chain_id, last, head, &mut sealed);
                for &i in &members {
                    let (p, s) = (&entries[i], &sealed[i]);
                    insert
                        .execute(rusqlite::params![
                            p.entry_id,
                            p.tenant_id,
                            p.pool_index,
                            s.chain_id,
                            s.seq,
                            p.event_type,
                            p.actor_kind,
                            p.actor_id,
                            p.actor_chain,
                            p.occurred_at,
                            p.retention_class,
                            p.payload,
                            &p.payload_digest[..],
                            &s.prev[..],
                            &s.hash[..],
                        ])
                        .map_err(fault)?;
                    mark.execute((&now, &p.entry_id)).map_err(fault)?;
                }
                head_update.execute(rusqlite::params![chain_id, last + members.len() as i64, &new_head[..], now]).map_err(fault)?;
            }
        }
        tx.commit().map_err(fault)?;
        // The checkpointer is busy or already told: either way it runs again.
        let _ = self.checkpoint.try_send(());
        Ok(sealed)
    }
}
