//! Group commit: one writer task takes appends from many callers, chains a
//! whole batch in one transaction (one head update per chain, multi-row
//! inserts) and answers each caller only after the commit. Under load this
//! turns one transaction per append into one per batch; alone, a request is
//! a batch of one.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;
use sqlx::Row;
use tokio::sync::{mpsc, oneshot};

use super::{
    chain::{self, Appended, Event, Prepared},
    registry::{self, EventType},
};
use crate::{
    db::{Backend, Db, Tx},
    error::{ApiError, ApiResult},
};

/// Appends taken per transaction at most.
const MAX_BATCH: usize = 4096;
/// Rows per INSERT statement (14 parameters each keeps well under the
/// parameter limits of both backends).
const ROWS_PER_INSERT: usize = 256;

/// Chain heads per upsert statement (5 parameters each).
const CHAINS_PER_STATEMENT: usize = 1000;

fn to_hash(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(bytes);
    out
}

/// Advances the heads of several chains by their entry counts in one
/// statement (creating missing heads), locking them in the given (sorted)
/// order on PostgreSQL; returns each chain's new last seq and the hash it
/// had before.
async fn advance_heads(tx: &mut Tx, backend: Backend, group: &[((&str, i64), Vec<usize>)]) -> ApiResult<HashMap<(String, i64), (i64, Vec<u8>)>> {
    let now = crate::db::now();
    let mut sql = multi_row_insert(HEAD_INSERT, backend, group.len(), 5);
    sql.push_str(
        " ON CONFLICT (tenant_id, pool_index) DO UPDATE SET seq = audit_chain_head.seq + excluded.seq, updated_at = excluded.updated_at \
         RETURNING tenant_id, pool_index, seq, head_hash",
    );
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
    for ((tenant_id, pool_index), members) in group {
        q = q.bind(*tenant_id).bind(*pool_index).bind(members.len() as i64).bind(chain::ZERO_HASH.to_vec()).bind(now.clone());
    }
    let mut out = HashMap::with_capacity(group.len());
    for r in q.fetch_all(&mut **tx).await? {
        out.insert((r.try_get::<String, _>(0)?, r.try_get::<i64, _>(1)?), (r.try_get::<i64, _>(2)?, r.try_get::<Vec<u8>, _>(3)?));
    }
    Ok(out)
}

/// Stores the new head hashes of several chains in one statement.
async fn set_heads(tx: &mut Tx, backend: Backend, group: &[(&str, i64, i64, [u8; 32])]) -> ApiResult<()> {
    let now = crate::db::now();
    let mut sql = multi_row_insert(HEAD_INSERT, backend, group.len(), 5);
    sql.push_str(" ON CONFLICT (tenant_id, pool_index) DO UPDATE SET head_hash = excluded.head_hash");
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
    for (tenant_id, pool_index, seq, hash) in group {
        q = q.bind(*tenant_id).bind(*pool_index).bind(*seq).bind(hash.to_vec()).bind(now.clone());
    }
    q.execute(&mut **tx).await?;
    Ok(())
}

const HEAD_INSERT: &str = "INSERT INTO audit_chain_head (tenant_id, pool_index, seq, head_hash, updated_at) VALUES ";

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

struct Job {
    event: OwnedEvent,
    reply: oneshot::Sender<ApiResult<Appended>>,
}

/// The handle callers append through; cheap to clone.
#[derive(Clone)]
pub struct Appender {
    jobs: mpsc::Sender<Job>,
}

impl Appender {
    /// Starts the writer task on `db`. It ends when every handle is dropped.
    pub fn start(db: Db) -> Appender {
        let (jobs, rx) = mpsc::channel(MAX_BATCH * 4);
        tokio::spawn(writer(db, rx));
        Appender { jobs }
    }

    /// Appends one event; answers once its batch has committed (or failed).
    pub async fn append(&self, event: OwnedEvent) -> ApiResult<Appended> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job { event, reply })
            .await
            .map_err(|_| ApiError::Internal(anyhow::anyhow!("the audit writer has stopped")))?;
        answer.await.map_err(|_| ApiError::Internal(anyhow::anyhow!("the audit writer dropped an append")))?
    }
}

async fn writer(db: Db, mut rx: mpsc::Receiver<Job>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let jobs = std::mem::take(&mut batch);
        commit_batch(&db, jobs).await;
    }
}

/// Chains and commits one batch, then answers every job in it.
async fn commit_batch(db: &Db, jobs: Vec<Job>) {
    let mut tx = match db.begin().await {
        Ok(tx) => tx,
        Err(e) => return fail_all(jobs, &e),
    };
    // Validate each job first; a refused job is answered at once and
    // writes nothing.
    let mut kinds: HashMap<(String, String), Option<EventType>> = HashMap::new();
    let mut accepted: Vec<(Prepared, oneshot::Sender<ApiResult<Appended>>)> = Vec::with_capacity(jobs.len());
    for job in jobs {
        let key = (job.event.tenant_id.clone(), job.event.event_type.clone());
        if !kinds.contains_key(&key) {
            match registry::lookup(&mut *tx, &key.0, &key.1).await {
                Ok(kind) => {
                    kinds.insert(key.clone(), kind);
                }
                Err(e) => {
                    let _ = job.reply.send(Err(e));
                    continue;
                }
            }
        }
        match chain::prepare_with(kinds[&key].as_ref(), job.event.pool_index, &job.event.borrow()) {
            Ok(p) => accepted.push((p, job.reply)),
            Err(e) => {
                let _ = job.reply.send(Err(e));
            }
        }
    }
    if accepted.is_empty() {
        return;
    }
    match write(&mut tx, db.backend, &accepted).await {
        Ok(answers) => match tx.commit().await {
            Ok(()) => {
                for ((_, reply), answer) in accepted.into_iter().zip(answers) {
                    let _ = reply.send(Ok(answer));
                }
            }
            Err(e) => fail_prepared(accepted, &e),
        },
        Err(e) => {
            drop(tx);
            fail_prepared(accepted, &e)
        }
    }
}

/// Writes the accepted entries: per chain (in a fixed order, so writers on
/// several replicas lock heads without deadlocking), one head advance, the
/// entries chained in arrival order, one head-hash update.
async fn write(tx: &mut Tx, backend: Backend, accepted: &[(Prepared, oneshot::Sender<ApiResult<Appended>>)]) -> ApiResult<Vec<Appended>> {
    let mut chains: BTreeMap<(&str, i64), Vec<usize>> = BTreeMap::new();
    for (i, (p, _)) in accepted.iter().enumerate() {
        chains.entry((p.tenant_id.as_str(), p.pool_index)).or_default().push(i);
    }
    let mut answers: Vec<Option<Appended>> = vec![None; accepted.len()];
    let mut rows: Vec<(usize, i64, Vec<u8>, [u8; 32])> = Vec::with_capacity(accepted.len());
    let chains: Vec<((&str, i64), Vec<usize>)> = chains.into_iter().collect();
    let mut heads: Vec<(&str, i64, i64, [u8; 32])> = Vec::with_capacity(chains.len());
    for group in chains.chunks(CHAINS_PER_STATEMENT) {
        let advanced = advance_heads(tx, backend, group).await?;
        for ((tenant_id, pool_index), members) in group {
            let (last, head) = advanced
                .get(&(tenant_id.to_string(), *pool_index))
                .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("a chain head was not returned")))?;
            let mut seq = last - members.len() as i64 + 1;
            let mut prev = head.clone();
            for &i in members {
                let (hash, appended) = chain::seal(&accepted[i].0, seq, &prev);
                answers[i] = Some(appended);
                rows.push((i, seq, prev, hash));
                prev = hash.to_vec();
                seq += 1;
            }
            heads.push((tenant_id, *pool_index, *last, to_hash(&prev)));
        }
    }
    for group in heads.chunks(CHAINS_PER_STATEMENT) {
        set_heads(tx, backend, group).await?;
    }
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        let sql = multi_row_insert(chain::INSERT_COLUMNS, backend, chunk.len(), 14);
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (i, seq, prev, hash) in chunk {
            let p = &accepted[*i].0;
            q = q
                .bind(&p.entry_id)
                .bind(&p.tenant_id)
                .bind(p.pool_index)
                .bind(*seq)
                .bind(&p.event_type)
                .bind(&p.actor_kind)
                .bind(&p.actor_id)
                .bind(&p.actor_chain)
                .bind(&p.occurred_at)
                .bind(&p.retention_class)
                .bind(&p.payload)
                .bind(p.payload_digest.to_vec())
                .bind(prev.clone())
                .bind(hash.to_vec());
        }
        q.execute(&mut **tx).await?;
    }
    Ok(answers.into_iter().map(|a| a.expect("every accepted entry is chained")).collect())
}

fn fail_all(jobs: Vec<Job>, e: &dyn std::fmt::Display) {
    tracing::error!(error = %e, "audit batch failed");
    for job in jobs {
        let _ = job.reply.send(Err(ApiError::Internal(anyhow::anyhow!("audit append failed"))));
    }
}

fn fail_prepared(accepted: Vec<(Prepared, oneshot::Sender<ApiResult<Appended>>)>, e: &dyn std::fmt::Display) {
    tracing::error!(error = %e, "audit batch failed");
    for (_, reply) in accepted {
        let _ = reply.send(Err(ApiError::Internal(anyhow::anyhow!("audit append failed"))));
    }
}
