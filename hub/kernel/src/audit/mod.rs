//! Audit: the event-type registry (platform baseline plus tenant types),
//! the per-(tenant, pool) hash chains with `emit(tx, ...)` for write paths,
//! streaming verification, the group-commit appender, and retention.

pub mod appender;
pub mod chain;
pub mod events;
pub mod outbox;
pub mod registry;
pub mod retention;

pub use appender::Appender;
pub use chain::{Appended, Event, Reason, Verdict, emit, verify};

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
    emit(
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

/// `emit` for a tenant caller's write: the caller's tenant and admin pool,
/// the credential as actor, the type's own retention class.
pub async fn record(tx: &mut Tx, ctx: &TenantCtx, event_type: &str, payload: Value) -> ApiResult<Appended> {
    let (actor_kind, actor_id) = actor_of(ctx);
    emit(
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
