//! Row counts kept by the writes that change them, for the lists whose
//! `total` would otherwise count every matching row on each read (a
//! `COUNT(*)` over 100,000 index entries costs SQLite several
//! milliseconds). One row per (tenant, count name); a writer adds its
//! deltas in its own transaction, so a count is exact whenever the rows it
//! counts are committed.
//!
//! On PostgreSQL the count rows are row-locked until the transaction ends.
//! A writer takes them first (before its other writes) and in name order,
//! and every writer of a count family includes the family's `all` count,
//! so the writers of one tenant's family queue on that row and never
//! deadlock.

use sqlx::AnyPool;

use super::Tx;
use crate::error::ApiResult;

/// Adds each `(name, delta)` to the tenant's counts, in name order (the
/// deltas of one name summed); a name not counted yet starts at 0.
pub async fn add(tx: &mut Tx, tenant_id: &str, deltas: &mut Vec<(String, i64)>) -> ApiResult<()> {
    deltas.sort();
    deltas.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 += later.1;
        }
        same
    });
    for (name, delta) in deltas.iter() {
        sqlx::query(
            "INSERT INTO list_count (tenant_id, name, n) VALUES ($1, $2, $3) \
             ON CONFLICT (tenant_id, name) DO UPDATE SET n = list_count.n + excluded.n",
        )
        .bind(tenant_id)
        .bind(name)
        .bind(*delta)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// The tenant's count `name` (0 when nothing was ever counted).
pub async fn get(pool: &AnyPool, tenant_id: &str, name: &str) -> ApiResult<i64> {
    let n: Option<i64> =
        sqlx::query_scalar("SELECT n FROM list_count WHERE tenant_id = $1 AND name = $2").bind(tenant_id).bind(name).fetch_optional(pool).await?;
    Ok(n.unwrap_or(0))
}
