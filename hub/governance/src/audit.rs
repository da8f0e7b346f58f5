//! sdk-audit: the tenant's event vocabulary (register, list, get one) and
//! its hash-chained audit entries (append, verify one pool's chain).
//!
//! The actor of an appended entry is always the credential's: the person
//! (JWT subject) or the API key's synthetic persona.

use axum::{Json, http::StatusCode, response::IntoResponse};

use hub_kernel::audit::{
    Appended, actor_of,
    appender::OwnedEvent,
    registry::{self, COMPACTION_POLICIES, CONFLICT_POLICIES, EventType, RETENTION_CLASSES, SCHEMA_STATES},
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

/// How long the type's entries are kept.
// The values of `RETENTION_CLASSES`; a test compares them (and the next three).
#[derive(Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
enum RetentionClass {
    Transient,
    Operational,
    Regulated,
}

/// How devices resolve conflicting events of the type.
#[derive(Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
enum ConflictPolicy {
    Crdt,
    Lww,
    Merge,
    EventSourcing,
    HumanReview,
}

/// The state of the type's schema.
#[derive(Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
enum SchemaState {
    Active,
    Deprecated,
    Retired,
}

/// How the type's events are compacted.
#[derive(Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
enum CompactionPolicy {
    None,
    Snapshot,
    KeepLatest,
}

impl RetentionClass {
    fn as_str(self) -> &'static str {
        RETENTION_CLASSES[self as usize]
    }
}

impl ConflictPolicy {
    fn as_str(self) -> &'static str {
        CONFLICT_POLICIES[self as usize]
    }
}

impl SchemaState {
    fn as_str(self) -> &'static str {
        SCHEMA_STATES[self as usize]
    }
}

impl CompactionPolicy {
    fn as_str(self) -> &'static str {
        COMPACTION_POLICIES[self as usize]
    }
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
// The kernel's `Verdict` (its Options skipped when None) with the tenant.
#[derive(ToSchema)]
#[allow(dead_code)]
struct AuditPoolVerdict {
    pool_index: i64,
    ok: bool,
    entries_checked: i64,
    /// Where the chain breaks (only when it does).
    failed_seq: Option<i64>,
    /// `gap`, `wrong-prev` or `wrong-hash` (only when the chain breaks).
    reason: Option<String>,
    tenant_id: String,
}

/// The types a tenant may emit.
#[derive(ToSchema)]
#[allow(dead_code)]
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
    let retention = body.retention_class.as_str();
    let conflict = body.conflict_policy.as_str();
    let schema_state = body.schema_state.map_or("active", SchemaState::as_str);
    let compaction = body.compaction_policy.map_or("none", CompactionPolicy::as_str);
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
    Ok(if inserted { created(data) } else { ok(data) })
}

/// The event types the tenant may emit: the platform baseline, then its own.
#[utoipa::path(get, path = "/api/events/types", tag = "sdk-audit",
    responses((status = 200, description = "every type, with the count of each source", body = EventTypeList)))]
async fn list_types(State(state): State<AppState>, Tenant(ctx): Tenant) -> ApiResult<Response> {
    let platform = &registry::baseline().types;
    let own = registry::tenant_types(&state.db.read, &ctx.tenant_id).await?;
    let data: Vec<&EventType> = platform.iter().chain(own.iter()).collect();
    Ok((
        StatusCode::OK,
        Json(json!({
            "success": true, "data": data, "total": platform.len() + own.len(),
            "platform_count": platform.len(), "tenant_count": own.len(),
        })),
    )
        .into_response())
}

/// One event type the tenant may emit.
#[utoipa::path(get, path = "/api/events/types/{event_type}", tag = "sdk-audit", params(("event_type" = String, Path, description = "the type's name")),
    responses((status = 200, description = "the type", body = Data<EventType>)))]
async fn get_type(State(state): State<AppState>, Tenant(ctx): Tenant, Path(name): Path<String>) -> ApiResult<Response> {
    let t = registry::lookup(&state.db.read, &ctx.tenant_id, &name).await?.ok_or(ApiError::NotFound)?;
    Ok(ok(t))
}

/// Appends one entry to the caller's hash chain in `pool_index`.
///
/// Through the group-commit writer: the 201 comes after the commit.
#[utoipa::path(post, path = "/api/audit/append", tag = "sdk-audit", request_body = NewAuditEntry,
    extensions(("x-concurrency" = json!({"outcome": "independent", "body": {"pool_index": 7, "event_type": "crm.call.logged.v1", "payload": {"race": true}}}))),
    responses((status = 201, description = "the entry, committed", body = Data<Appended>)))]
async fn append(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewAuditEntry>) -> ApiResult<Response> {
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
async fn verify(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<AuditVerifyRequest>) -> ApiResult<Response> {
    let body = body.checked()?;
    let verdict = hub_kernel::audit::verify(&state.db, &ctx.tenant_id, body.pool_index).await?;
    let mut data = serde_json::to_value(&verdict).expect("verdicts serialise");
    data["tenant_id"] = json!(ctx.tenant_id);
    Ok(ok(data))
}

#[cfg(test)]
mod tests {
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
