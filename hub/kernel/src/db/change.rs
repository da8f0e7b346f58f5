//! One way to change state. A transition, a capacity or a first write is
//! decided by the database in one statement, never by a read whose answer
//! Rust checks before a later write: under read committed (PostgreSQL,
//! several replicas) two requests read the same state and both win.
//!
//! - A **transition** is `UPDATE ... WHERE tenant_id AND key AND state IN
//!   (...) RETURNING ...`, run by the caller inside its transaction (so the
//!   event is recorded with it); [`Stateful::settle`] turns "no row" into
//!   404 or 409 naming the state the row is in.
//! - A **capacity or counter** is a conditional increment (`UPDATE ... SET
//!   n = n + 1 WHERE n < cap RETURNING`), or, where one statement cannot
//!   say it (a count over other rows), [`Stateful::lock`]: the row that
//!   owns the capacity is locked for the rest of the transaction.
//! - Where no row exists to lock (a run over many rows, "one current row of
//!   a table"), [`serialize`] queues the transactions that name the same
//!   thing.
//! - A **first write wins** is [`insert_or_read`]: `INSERT ... ON CONFLICT
//!   DO NOTHING RETURNING ...`, and when another write won, its row, read in
//!   the same transaction: never a unique violation surfacing as 409 where
//!   the document promises the stored result.
//!
//! On PostgreSQL a guarded `UPDATE` that meets a row another transaction
//! is changing waits for it and re-checks its `WHERE` against the committed
//! row, and `ON CONFLICT DO NOTHING` waits for the conflicting insert: of
//! two requests at once exactly one wins and the other sees the winner's
//! state. SQLite runs one writer at a time, so it needs no lock at all.

use sqlx::{
    Any,
    any::{AnyArguments, AnyRow},
    query::QueryAs,
};

use super::{Backend, Tx};
use crate::error::{ApiError, ApiResult};

/// A tenant's stored resource with a state column, as guarded writes name
/// it: the table, its key column and its state column (`tenant_id` is the
/// tenant's column in every table).
#[derive(Clone, Copy, Debug)]
pub struct Stateful {
    /// What answers call one row: "encounter", "ticket".
    pub noun: &'static str,
    pub table: &'static str,
    pub key: &'static str,
    pub state: &'static str,
}

impl Stateful {
    /// The outcome of a guarded write of the tenant's row `id`: the row it
    /// returned, or 404 when no such row exists, or 409 naming the state
    /// the row is in (`the encounter is sealed: only a closed encounter
    /// can be sealed`, with `expected` = "only a closed encounter can be
    /// sealed"). Reads in the caller's transaction, after the write: on
    /// PostgreSQL that is the state the winning transaction committed.
    pub async fn settle<T>(&self, tx: &mut Tx, tenant_id: &str, id: &str, written: Option<T>, expected: &str) -> ApiResult<T> {
        if let Some(row) = written {
            return Ok(row);
        }
        match self.state_of(tx, tenant_id, id).await? {
            None => Err(ApiError::NotFound),
            Some(state) => Err(ApiError::Conflict(format!("the {} is {state}: {expected}", self.noun))),
        }
    }

    /// The state of the tenant's row `id`, or `None` if it does not exist.
    pub async fn state_of(&self, tx: &mut Tx, tenant_id: &str, id: &str) -> ApiResult<Option<String>> {
        let sql = format!("SELECT {} FROM {} WHERE tenant_id = $1 AND {} = $2", self.state, self.table, self.key);
        Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(id).fetch_optional(&mut **tx).await?)
    }

    /// Locks the tenant's row `id` for the rest of the transaction and
    /// answers its `state` column (a capacity, where the row has no state),
    /// or `None` when there is no such row: the writes that depend on the
    /// row (a capacity counted over other rows) queue behind one another.
    /// On SQLite the one writer already excludes the others. The lock is
    /// PostgreSQL's `FOR NO KEY UPDATE`: lockers queue on one another, but
    /// rows that reference the locked one by a foreign key (a ticket of
    /// the event, any row of the tenant) are still inserted meanwhile.
    pub async fn lock<T>(&self, tx: &mut Tx, tenant_id: &str, id: &str) -> ApiResult<Option<T>>
    where
        T: Send + Unpin + sqlx::Type<Any> + for<'r> sqlx::Decode<'r, Any>,
    {
        let lock = if Backend::of(tx) == Backend::Postgres { " FOR NO KEY UPDATE" } else { "" };
        let sql = format!("SELECT {} FROM {} WHERE tenant_id = $1 AND {} = $2{lock}", self.state, self.table, self.key);
        Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(id).fetch_optional(&mut **tx).await?)
    }
}

/// Whether a first write made the row or found another write's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// This call inserted the row (201, an event).
    Made,
    /// Another call had (200, the stored row, no event).
    Found,
}

/// First write wins: runs `insert` (an `INSERT ... ON CONFLICT DO NOTHING
/// RETURNING ...`) and, when a row with its key is stored already, runs
/// `read` in the same transaction: a `SELECT` of the stored row, or an
/// `UPDATE ... RETURNING` where a later write replaces it.
pub async fn insert_or_read<'q, T>(tx: &mut Tx, insert: QueryAs<'q, Any, T, AnyArguments>, read: QueryAs<'q, Any, T, AnyArguments>) -> ApiResult<(T, Written)>
where
    T: Send + Unpin + for<'r> sqlx::FromRow<'r, AnyRow>,
{
    if let Some(row) = insert.fetch_optional(&mut **tx).await? {
        return Ok((row, Written::Made));
    }
    // Nothing inserted: a row with the key exists, committed (PostgreSQL
    // waited for the transaction that inserted it).
    let row = read.fetch_optional(&mut **tx).await?.ok_or_else(|| ApiError::Internal(anyhow::anyhow!("a conflicting row vanished before it was read")))?;
    Ok((row, Written::Found))
}

/// The next number of the tenant's sequence `name` (a versioned
/// resource's versions: `import_template slug:orders`), in one upsert that
/// concurrent writers queue on. A sequence starts after `floor`, a
/// `SELECT` of the highest number already used (bound to `$1` = the tenant
/// and `$3` = `floor_arg`), so resources stored before the sequence existed
/// keep their numbers.
pub async fn next_number(tx: &mut Tx, tenant_id: &str, name: &str, floor: &str, floor_arg: &str) -> ApiResult<i64> {
    let sql = format!(
        "INSERT INTO tenant_sequence (tenant_id, name, last) VALUES ($1, $2, COALESCE(({floor}), 0) + 1) \
         ON CONFLICT (tenant_id, name) DO UPDATE SET last = tenant_sequence.last + 1 RETURNING last"
    );
    Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(name).bind(floor_arg).fetch_one(&mut **tx).await?)
}

/// Queues the transactions that name the same `name` one after another,
/// until each commits, where no row exists to lock (a run over many rows,
/// a table's "one current row"): PostgreSQL's transaction advisory lock on
/// the name's hash. SQLite's one writer already runs them one at a time.
pub async fn serialize(tx: &mut Tx, name: &str) -> ApiResult<()> {
    if Backend::of(tx) == Backend::Postgres {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))").bind(name).execute(&mut **tx).await?;
    }
    Ok(())
}
