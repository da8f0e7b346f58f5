//! sdk-audit: the tenant's event vocabulary (register, list, get one) and
//! its hash-chained audit entries (append, verify one pool's chain).
//!
//! The actor of an appended entry is always the credential's: the person
//! (JWT subject) or the API key's synthetic persona.

use axum::{Json, response::IntoResponse};

use hub_kernel::audit::{
    Appended, actor_of,
    appender::OwnedEvent,
    chain::Reason,
    registry::{self, EventType},
};
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(register, list_types)).routes(routes!(get_type)).routes(routes!(append)).routes(routes!(verify))
}

/// A new tenant event type.
#[derive(Deserialize, ToSchema)]
struct NewEventType {
    /// `<domain>.<entity>.<verb>.v<N>`, not a platform type.
    #[schema(pattern = r"^[a-z](?:[-_]?[a-z0-9])*(?:\.[a-z](?:[-_]?[a-z0-9])*)+\.v[1-9][0-9]*$", max_length = 200)]
    event_type: String,
    #[schema(inline)]
    retention_class: RetentionClass,
    #[schema(inline)]
    conflict_policy: ConflictPolicy,
    /// `active` when absent.
    #[schema(inline)]
    schema_state: Option<SchemaState>,
    /// `none` when absent.
    #[schema(inline)]
    compaction_policy: Option<CompactionPolicy>,
    /// 1 when absent.
    #[schema(minimum = 1)]
    schema_version: Option<i64>,
}

// The words of `RETENTION_CLASSES`, `CONFLICT_POLICIES`, `SCHEMA_STATES`
// and `COMPACTION_POLICIES`: a test compares them.
stored_enum! {
    /// How long the type's entries are kept.
    enum RetentionClass { Transient = "transient", Operational = "operational", Regulated = "regulated" }
}

stored_enum! {
    /// How devices resolve conflicting events of the type.
    enum ConflictPolicy { Crdt = "crdt", Lww = "lww", Merge = "merge", EventSourcing = "event-sourcing", HumanReview = "human-review" }
}

stored_enum! {
    /// The state of the type's schema.
    enum SchemaState { Active = "active", Deprecated = "deprecated", Retired = "retired" }
}

stored_enum! {
    /// How the type's events are compacted.
    enum CompactionPolicy { None = "none", Snapshot = "snapshot", KeepLatest = "keep-latest" }
}

/// A new audit entry.
#[derive(Deserialize, ToSchema)]
struct NewAuditEntry {
    /// The chain to append to.
    #[schema(minimum = 0)]
    pool_index: i64,
    event_type: String,
    /// Any JSON value but a blank string.
    payload: Value,
    /// When given, the credential's own kind (it is taken from the credential).
    actor_kind: Option<String>,
    /// The event type's own when absent.
    #[schema(inline)]
    retention_class: Option<RetentionClass>,
    /// Accepted and ignored: the entry is stamped when it is appended.
    #[schema(value_type = Option<String>)]
    #[allow(dead_code)]
    occurred_at: Option<serde::de::IgnoredAny>,
}

/// A verification request.
#[derive(Deserialize, ToSchema)]
struct AuditVerifyRequest {
    /// The chain to verify.
    #[schema(minimum = 0)]
    pool_index: i64,
}

/// The verdict on one of the caller's chains.
#[derive(Serialize, ToSchema)]
struct AuditPoolVerdict {
    pool_index: i64,
    ok: bool,
    entries_checked: i64,
    /// Where the chain breaks (only when it does).
    #[serde(skip_serializing_if = "Option::is_none")]
    failed_seq: Option<i64>,
    /// `gap`, `wrong-prev` or `wrong-hash` (only when the chain breaks).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    reason: Option<Reason>,
    tenant_id: String,
}

/// The types a tenant may emit.
#[derive(Serialize, ToSchema)]
struct EventTypeList {
    success: bool,
    data: Vec<EventType>,
    total: i64,
    platform_count: i64,
    tenant_count: i64,
}

/// A checked string field, trimmed as every string field is; the string
/// itself when it has nothing to trim (no copy).
fn trimmed(s: String) -> String {
    if s.trim().len() == s.len() { s } else { s.trim().to_string() }
}

/// A registration's answer: the type as stored, and whether this call
/// registered it.
#[derive(Serialize, ToSchema)]
struct EventTypeRegistered {
    #[serde(flatten)]
    event_type: EventType,
    created: bool,
}

/// Registers an event type of the caller's tenant.
///
/// 201 the first time, 200 with the stored metadata and `created: false` on
/// a repeat. A baseline name is 400.
#[utoipa::path(post, path = "/api/events/types", tag = "sdk-audit", request_body = NewEventType,
    responses((status = 201, description = "registered", body = Data<EventTypeRegistered>),
        (status = 200, description = "already registered", body = Data<EventTypeRegistered>)),
    extensions(("x-concurrency" = json!({ "outcome": "first-creates", "body": { "event_type": "races.t{unique}.made.v1", "retention_class": "operational", "conflict_policy": "lww" }, "events": 1 }))))]
async fn register(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewEventType>) -> ApiResult<Response> {
    let body = body.checked()?;
    let mut check = Check::new();
    let name = trimmed(body.event_type);
    if !registry::valid_name(&name) {
        check.fail("event_type must be <domain>.<entity>.<verb>.v<N>: lowercase, '-' or '_' inside a segment, at least two segments before the version");
    } else if registry::baseline().contains(&name) {
        check.fail(format!("event_type '{name}' is a platform event type; a tenant cannot register or shadow it"));
    }
    check.finish()?;
    let retention = body.retention_class;
    let conflict = body.conflict_policy;
    let schema_state = body.schema_state.unwrap_or(SchemaState::Active);
    let compaction = body.compaction_policy.unwrap_or(CompactionPolicy::None);
    let version = body.schema_version.unwrap_or(1);
    let mut tx = state.db.begin().await?;
    let inserted = sqlx::query(
        "INSERT INTO audit_event_type (tenant_id, event_type, retention_class, conflict_policy, schema_state, compaction_policy, \
         schema_version, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (tenant_id, event_type) DO NOTHING",
    )
    .bind(&ctx.tenant_id)
    .bind(&name)
    .bind(retention)
    .bind(conflict)
    .bind(schema_state)
    .bind(compaction)
    .bind(version)
    .bind(db::now())
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    let stored = registry::lookup(&mut *tx, &ctx.tenant_id, &name).await?.ok_or(ApiError::NotFound)?;
    if inserted {
        audit::record(&mut tx, &ctx, events::EVENT_TYPE_REGISTERED, serde_json::to_value(&stored).expect("event types serialise")).await?;
    }
    tx.commit().await?;
    let data = EventTypeRegistered { event_type: stored, created: inserted };
    Ok(if inserted { created(data).into_response() } else { ok(data).into_response() })
}

/// The event types the tenant may emit: the platform baseline, then its own.
#[utoipa::path(get, path = "/api/events/types", tag = "sdk-audit",
    responses((status = 200, description = "every type, with the count of each source", body = EventTypeList)))]
async fn list_types(State(state): State<AppState>, Tenant(ctx): Tenant) -> ApiResult<Json<EventTypeList>> {
    let platform = &registry::baseline().types;
    let own = registry::tenant_types(&state.db.read, &ctx.tenant_id).await?;
    let (platform_count, tenant_count) = (platform.len() as i64, own.len() as i64);
    let data: Vec<EventType> = platform.iter().cloned().chain(own).collect();
    Ok(Json(EventTypeList { success: true, data, total: platform_count + tenant_count, platform_count, tenant_count }))
}

/// One event type the tenant may emit.
#[utoipa::path(get, path = "/api/events/types/{event_type}", tag = "sdk-audit", params(("event_type" = String, Path, description = "the type's name")),
    responses((status = 200, description = "the type", body = Data<EventType>)))]
async fn get_type(State(state): State<AppState>, Tenant(ctx): Tenant, Path(name): Path<String>) -> ApiResult<Data<EventType>> {
    let t = registry::lookup(&state.db.read, &ctx.tenant_id, &name).await?.ok_or(ApiError::NotFound)?;
    Ok(ok(t))
}

/// Appends one entry to the caller's hash chain in `pool_index`.
///
/// Through the group-commit writer: the 201 comes after the commit.
#[utoipa::path(post, path = "/api/audit/append", tag = "sdk-audit", request_body = NewAuditEntry,
    extensions(("x-concurrency" = json!({"outcome": "independent", "body": {"pool_index": 7, "event_type": "crm.call.logged.v1", "payload": {"race": true}}}))),
    responses((status = 201, description = "the entry, committed", body = Data<Appended>)))]
async fn append(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewAuditEntry>) -> ApiResult<Created<Appended>> {
    let body = body.checked()?;
    let mut check = Check::new();
    if body.payload.as_str().is_some_and(|s| s.trim().is_empty()) {
        check.fail("payload is required");
    }
    let (actor_kind, actor_id) = actor_of(&ctx);
    if let Some(k) = body.actor_kind.as_deref().map(str::trim).filter(|k| !k.is_empty())
        && k != actor_kind
    {
        check.fail(format!("actor_kind is taken from the credential, which is '{actor_kind}'"));
    }
    check.finish()?;
    let appended = state
        .audit
        .append(OwnedEvent {
            tenant_id: ctx.tenant_id.clone(),
            pool_index: body.pool_index,
            event_type: trimmed(body.event_type),
            actor_kind: actor_kind.to_string(),
            actor_id: actor_id.to_string(),
            actor_chain: None,
            payload: body.payload,
            retention_class: body.retention_class.map(|r| r.as_str().to_string()),
        })
        .await?;
    Ok(created(appended))
}

/// Verifies the caller's chain in one pool.
#[utoipa::path(post, path = "/api/audit/verify", tag = "sdk-audit", request_body = AuditVerifyRequest,
    extensions(("x-concurrency" = json!({"outcome": "independent", "events": 0, "body": {"pool_index": 0}}))),
    responses((status = 200, description = "the verdict", body = Data<AuditPoolVerdict>)))]
async fn verify(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<AuditVerifyRequest>) -> ApiResult<Data<AuditPoolVerdict>> {
    let body = body.checked()?;
    let v = hub_kernel::audit::verify(&state.db, &ctx.tenant_id, body.pool_index).await?;
    Ok(ok(AuditPoolVerdict {
        pool_index: v.pool_index,
        ok: v.ok,
        entries_checked: v.entries_checked,
        failed_seq: v.failed_seq,
        reason: v.reason,
        tenant_id: ctx.tenant_id,
    }))
}

#[cfg(test)]
mod tests {
    use hub_kernel::audit::registry::{COMPACTION_POLICIES, CONFLICT_POLICIES, RETENTION_CLASSES, SCHEMA_STATES};
    use utoipa::PartialSchema;

    use super::*;

    fn values<T: PartialSchema>() -> Value {
        serde_json::to_value(T::schema()).unwrap()["enum"].clone()
    }

    #[test]
    fn the_documented_enumerations_are_the_validated_ones() {
        assert_eq!(values::<RetentionClass>(), json!(RETENTION_CLASSES));
        assert_eq!(values::<ConflictPolicy>(), json!(CONFLICT_POLICIES));
        assert_eq!(values::<SchemaState>(), json!(SCHEMA_STATES));
        assert_eq!(values::<CompactionPolicy>(), json!(COMPACTION_POLICIES));
    }
}
