//! The webhook outbox: every audit entry that an active endpoint of its
//! tenant subscribes to is marked by one small row, inserted by the
//! statement after the entries' own insert, in their transaction. A
//! committed event is never missed and a rolled-back one never delivered,
//! whichever path wrote it (a route's `emit` or the group-commit
//! appender); the write pays for one row, however many endpoints. The
//! platform area's webhook worker fans each row out into one delivery per
//! subscribed endpoint.

use crate::{db::Backend, error::ApiResult};

/// Whether a subscription `s` matches the event type `a.event_type`: the
/// type itself, or a prefix (a tail wildcard).
pub const MATCHES: &str = "((s.exact = 1 AND s.pattern = a.event_type) OR (s.exact = 0 AND substr(a.event_type, 1, length(s.prefix)) = s.prefix))";

/// The statement that marks the subscribed entries among the rows of
/// `entries` (a table, or on PostgreSQL the `RETURNING` rows of the insert
/// in the same statement, which its own snapshot could not see), with
/// `$now` the parameter of the time; a caller may narrow the rows with
/// `AND` conditions on `a`.
pub(crate) fn marks_of(entries: &str, now: usize) -> String {
    format!(
        "INSERT INTO webhook_outbox (entry_id, tenant_id, created_at) \
         SELECT a.entry_id, a.tenant_id, ${now} FROM {entries} a \
         WHERE a.event_type NOT LIKE 'webhook.delivery.%' \
         AND EXISTS (SELECT 1 FROM webhook_subscription s JOIN webhook_endpoint e ON e.endpoint_id = s.endpoint_id AND e.status = 'active' \
                     WHERE s.tenant_id = a.tenant_id AND {MATCHES})"
    )
}

/// Marks the entries `entry_ids` (just inserted in `tx`) that an active
/// endpoint subscribes to. The webhook group's own delivery events are
/// never delivered: an endpoint subscribed to `*` would otherwise feed
/// itself.
pub(crate) async fn enqueue(tx: &mut crate::db::Tx, _backend: Backend, entry_ids: &[&str]) -> ApiResult<()> {
    if entry_ids.is_empty() {
        return Ok(());
    }
    let sql = format!("{} AND a.entry_id IN ({marks})", marks_of("audit_entry", 1), marks = crate::db::placeholders(2, entry_ids.len()));
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(crate::db::now());
    for id in entry_ids {
        q = q.bind(*id);
    }
    q.execute(&mut **tx).await?;
    Ok(())
}
