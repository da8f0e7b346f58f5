//! The webhook outbox: every audit entry an active endpoint of its tenant
//! subscribes to becomes a pending delivery, inserted by the statement
//! after the entries' own insert, in their transaction. A committed event
//! is never missed and a rolled-back one never delivered, whichever path
//! wrote it (a route's `emit` or the group-commit appender). The platform
//! area's webhook group owns the endpoints and delivers.

use crate::{db::Backend, error::ApiResult};

/// A random (v4) UUID computed by the database, one per inserted row.
fn uuid_sql(backend: Backend) -> &'static str {
    match backend {
        Backend::Postgres => "gen_random_uuid()::text",
        Backend::Sqlite => {
            "lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-' || \
             substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)))"
        }
    }
}

/// Enqueues the deliveries of the entries `entry_ids` (just inserted in
/// `tx`). The webhook group's own delivery events are never delivered:
/// an endpoint subscribed to `*` would otherwise feed itself.
pub(crate) async fn enqueue(tx: &mut crate::db::Tx, backend: Backend, entry_ids: &[&str]) -> ApiResult<()> {
    if entry_ids.is_empty() {
        return Ok(());
    }
    let marks: Vec<String> = (2..entry_ids.len() + 2).map(|i| format!("${i}")).collect();
    let sql = format!(
        "INSERT INTO webhook_delivery (delivery_id, tenant_id, endpoint_id, entry_id, event_type, status, attempts, next_attempt_at, created_at) \
         SELECT {uuid}, a.tenant_id, e.endpoint_id, a.entry_id, a.event_type, 'pending', 0, $1, $1 \
         FROM audit_entry a \
         JOIN webhook_subscription s ON s.tenant_id = a.tenant_id \
              AND ((s.exact = 1 AND s.pattern = a.event_type) OR (s.exact = 0 AND substr(a.event_type, 1, length(s.prefix)) = s.prefix)) \
         JOIN webhook_endpoint e ON e.endpoint_id = s.endpoint_id AND e.status = 'active' \
         WHERE a.entry_id IN ({marks}) AND a.event_type NOT LIKE 'webhook.delivery.%' \
         ON CONFLICT (endpoint_id, entry_id) DO NOTHING",
        uuid = uuid_sql(backend),
        marks = marks.join(", ")
    );
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(crate::db::now());
    for id in entry_ids {
        q = q.bind(*id);
    }
    q.execute(&mut **tx).await?;
    Ok(())
}
