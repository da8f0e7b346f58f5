//! Audit: the event-type registry (platform baseline plus tenant types),
//! the per-(tenant, pool) hash chains with `record_event(tx, ...)` for write paths,
//! streaming verification, the group-commit appender, and retention.

pub mod appender;
pub mod chain;
pub mod entry;
pub mod events;
pub mod outbox;
pub mod registry;
pub mod retention;

pub use appender::Appender;
pub use chain::{Appended, Event, Reason, Verdict, record_event, verify};

/// The chain operator actions are recorded in: the platform's own, under
/// the nil tenant id (no tenant's chain holds them).
pub const PLATFORM_CHAIN: &str = "00000000-0000-0000-0000-000000000000";

use serde_json::Value;

use crate::{db::Tx, error::ApiResult, gate::TenantCtx};

/// The actor a credential acts as: (actor_kind, actor_id) — the person (JWT
/// subject) for a human, the synthetic persona for an API key.
pub fn actor_of(ctx: &TenantCtx) -> (&'static str, &str) {
    (ctx.actor_kind, ctx.person_id.as_deref().unwrap_or(&ctx.persona_id))
}

/// `emit` for what the hub does on its own, not for a credential (a
/// deadline passing, a delivery given up, a signed inbound message):
/// actor kind `system`, the tenant's admin pool, the type's own retention.
pub async fn record_system(tx: &mut Tx, tenant_id: &str, actor_id: &str, event_type: &str, payload: Value) -> ApiResult<Appended> {
    record_event(
        tx,
        Event {
            tenant_id,
            pool_index: None,
            event_type,
            actor_kind: "system",
            actor_id,
            actor_chain: None,
            payload: &payload,
            retention_class: None,
            occurred_at: None,
        },
    )
    .await
}

/// Audit entries of one tenant by id, as JSON (hashes in hex; a shredded
/// payload is null), in chain order: what an export carries as evidence.
pub async fn entries_by_id(pool: &sqlx::AnyPool, tenant_id: &str, ids: &[String]) -> ApiResult<Vec<Value>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!(
        "SELECT entry_id, pool_index, seq, event_type, actor_kind, actor_id, occurred_at, payload, payload_digest, prev_hash, entry_hash \
         FROM audit_entry WHERE tenant_id = $1 AND entry_id IN ({}) ORDER BY pool_index, seq",
        crate::db::placeholders(2, ids.len())
    );
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(tenant_id);
    for id in ids {
        q = q.bind(id);
    }
    let rows = q.fetch_all(pool).await?;
    use sqlx::Row;
    let hex = |r: &sqlx::any::AnyRow, c: &str| -> Result<String, sqlx::Error> { Ok(hex::encode(r.try_get::<Vec<u8>, _>(c)?)) };
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        let payload: Option<String> = r.try_get("payload")?;
        out.push(serde_json::json!({
            "entry_id": r.try_get::<String, _>("entry_id")?,
            "pool_index": r.try_get::<i64, _>("pool_index")?,
            "seq": r.try_get::<i64, _>("seq")?,
            "event_type": r.try_get::<String, _>("event_type")?,
            "actor_kind": r.try_get::<String, _>("actor_kind")?,
            "actor_id": r.try_get::<String, _>("actor_id")?,
            "occurred_at": r.try_get::<String, _>("occurred_at")?,
            "payload": payload.and_then(|p| serde_json::from_str::<Value>(&p).ok()),
            "payload_digest": hex(r, "payload_digest")?,
            "prev_hash": hex(r, "prev_hash")?,
            "entry_hash": hex(r, "entry_hash")?,
        }));
    }
    Ok(out)
}

/// `emit` for a tenant caller's write: the caller's tenant and admin pool,
/// the credential as actor, the type's own retention class.
pub async fn record(tx: &mut Tx, ctx: &TenantCtx, event_type: &str, payload: Value) -> ApiResult<Appended> {
    let (actor_kind, actor_id) = actor_of(ctx);
    record_event(
        tx,
        Event {
            tenant_id: &ctx.tenant_id,
            pool_index: None,
            event_type,
            actor_kind,
            actor_id,
            actor_chain: None,
            payload: &payload,
            retention_class: None,
            occurred_at: None,
        },
    )
    .await
}

/// Records an operator action in the platform chain, the operator as actor.
pub async fn record_operator(tx: &mut Tx, operator: &str, event_type: &str, payload: Value) -> ApiResult<Appended> {
    record_operator_in(tx, PLATFORM_CHAIN, operator, event_type, payload).await
}

/// Records an operator action in a tenant's chain (what was done to it),
/// the operator as actor.
pub async fn record_operator_in(tx: &mut Tx, chain: &str, operator: &str, event_type: &str, payload: Value) -> ApiResult<Appended> {
    record_event(
        tx,
        Event {
            tenant_id: chain,
            pool_index: None,
            event_type,
            actor_kind: "operator",
            actor_id: operator,
            actor_chain: None,
            payload: &payload,
            retention_class: None,
            occurred_at: None,
        },
    )
    .await
}
