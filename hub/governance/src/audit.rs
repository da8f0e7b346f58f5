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
// What `register` validates by hand (every problem at once).
#[derive(ToSchema)]
#[allow(dead_code)]
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
    /// When given, the caller's tenant.
    #[schema(format = "uuid")]
    tenant_id: Option<String>,
}

/// How long the type's entries are kept.
// The values of `RETENTION_CLASSES`; a test compares them (and the next three).
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
#[allow(dead_code)]
enum RetentionClass {
    Transient,
    Operational,
    Regulated,
}

/// How devices resolve conflicting events of the type.
#[derive(ToSchema)]
#[schema(rename_all = "kebab-case")]
#[allow(dead_code)]
enum ConflictPolicy {
    Crdt,
    Lww,
    Merge,
    EventSourcing,
    HumanReview,
}

/// The state of the type's schema.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
#[allow(dead_code)]
enum SchemaState {
    Active,
    Deprecated,
    Retired,
}

/// How the type's events are compacted.
#[derive(ToSchema)]
#[schema(rename_all = "kebab-case")]
#[allow(dead_code)]
enum CompactionPolicy {
    None,
    Snapshot,
    KeepLatest,
}

/// A new audit entry.
// What `append` validates by hand (every problem at once).
#[derive(ToSchema)]
#[allow(dead_code)]
struct NewAuditEntry {
    /// The chain to append to: an integer of at least 0.
    #[schema(minimum = 0)]
    pool_index: i64,
    event_type: String,
    payload: Value,
    /// When given, the credential's own kind (it is taken from the credential).
    actor_kind: Option<String>,
    /// The event type's own when absent.
    #[schema(inline)]
    retention_class: Option<RetentionClass>,
    /// Accepted and ignored: the entry is stamped when it is appended.
    occurred_at: Option<String>,
    /// When given, the caller's tenant.
    #[schema(format = "uuid")]
    tenant_id: Option<String>,
}

/// A verification request.
#[derive(ToSchema)]
#[allow(dead_code)]
struct AuditVerifyRequest {
    /// The chain to verify: an integer of at least 0.
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

/// An integer field: `Ok(None)` when absent; 0 is a value.
fn integer(check: &mut Check, body: &Value, name: &str, min: i64) -> Option<i64> {
    match body.get(name) {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_i64() {
            Some(n) if n >= min => Some(n),
            _ => {
                check.fail(format!("{name} must be an integer of at least {min}"));
                None
            }
        },
    }
}

fn enumerated(check: &mut Check, body: &Value, name: &str, allowed: &[&str], default: Option<&str>) -> String {
    let value = match default {
        Some(d) => check.text(body, name).unwrap_or_else(|| d.to_string()),
        None => check.required_text(body, name),
    };
    check.one_of(name, &value, allowed);
    value
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
async fn register(State(state): State<AppState>, Tenant(ctx): Tenant, Lenient(body): Lenient<Value>) -> ApiResult<Response> {
    let mut check = Check::new();
    let name = check.text(&body, "event_type");
    match &name {
        None => check.fail("event_type is required"),
        Some(n) if !registry::valid_name(n) => {
            check.fail("event_type must be <domain>.<entity>.<verb>.v<N>: lowercase, '-' or '_' inside a segment, at least two segments before the version")
        }
        Some(n) if registry::baseline().contains(n) => check.fail(format!("event_type '{n}' is a platform event type; a tenant cannot register or shadow it")),
        Some(_) => {}
    }
    let retention = enumerated(&mut check, &body, "retention_class", RETENTION_CLASSES, None);
    let conflict = enumerated(&mut check, &body, "conflict_policy", CONFLICT_POLICIES, None);
    let schema_state = enumerated(&mut check, &body, "schema_state", SCHEMA_STATES, Some("active"));
    let compaction = enumerated(&mut check, &body, "compaction_policy", COMPACTION_POLICIES, Some("none"));
    let version = integer(&mut check, &body, "schema_version", 1).unwrap_or(1);
    let tenant_claim = check.text(&body, "tenant_id");
    check.finish()?;
    ctx.check_tenant(tenant_claim.as_deref())?;
    let name = name.expect("checked");
    let mut tx = state.db.begin().await?;
    let inserted = sqlx::query(
        "INSERT INTO audit_event_type (tenant_id, event_type, retention_class, conflict_policy, schema_state, compaction_policy, \
         schema_version, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (tenant_id, event_type) DO NOTHING",
    )
    .bind(&ctx.tenant_id)
    .bind(&name)
    .bind(&retention)
    .bind(&conflict)
    .bind(&schema_state)
    .bind(&compaction)
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

/// A pool index: required, an integer of at least 0.
fn pool_index(check: &mut Check, body: &Value) -> i64 {
    match body.get("pool_index") {
        None | Some(Value::Null) => {
            check.fail("pool_index is required");
            0
        }
        Some(_) => integer(check, body, "pool_index", 0).unwrap_or(0),
    }
}

/// Appends one entry to the caller's hash chain in `pool_index`.
///
/// Through the group-commit writer: the 201 comes after the commit.
#[utoipa::path(post, path = "/api/audit/append", tag = "sdk-audit", request_body = NewAuditEntry,
    extensions(("x-concurrency" = json!({"outcome": "independent", "body": {"pool_index": 7, "event_type": "crm.call.logged.v1", "payload": {"race": true}}}))),
    responses((status = 201, description = "the entry, committed", body = Data<Appended>)))]
async fn append(State(state): State<AppState>, Tenant(ctx): Tenant, Lenient(body): Lenient<Value>) -> ApiResult<Response> {
    let mut check = Check::new();
    let pool = pool_index(&mut check, &body);
    let event_type = check.text(&body, "event_type");
    if event_type.is_none() {
        check.fail("event_type is required");
    }
    let payload = match body.get("payload") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.trim().is_empty() => None,
        Some(v) => Some(v.clone()),
    };
    if payload.is_none() {
        check.fail("payload is required");
    }
    let (actor_kind, actor_id) = actor_of(&ctx);
    if let Some(k) = check.text(&body, "actor_kind")
        && k != actor_kind
    {
        check.fail(format!("actor_kind is taken from the credential, which is '{actor_kind}'"));
    }
    let retention = check.text(&body, "retention_class");
    if let Some(r) = &retention {
        check.one_of("retention_class", r, RETENTION_CLASSES);
    }
    let tenant_claim = check.text(&body, "tenant_id");
    check.finish()?;
    ctx.check_tenant(tenant_claim.as_deref())?;
    let appended = state
        .audit
        .append(OwnedEvent {
            tenant_id: ctx.tenant_id.clone(),
            pool_index: pool,
            event_type: event_type.expect("checked"),
            actor_kind: actor_kind.to_string(),
            actor_id: actor_id.to_string(),
            actor_chain: None,
            payload: payload.expect("checked"),
            retention_class: retention,
        })
        .await?;
    Ok(created(appended))
}

/// Verifies the caller's chain in one pool.
#[utoipa::path(post, path = "/api/audit/verify", tag = "sdk-audit", request_body = AuditVerifyRequest,
    extensions(("x-concurrency" = json!({"outcome": "independent", "events": 0, "body": {"pool_index": 0}}))),
    responses((status = 200, description = "the verdict", body = Data<AuditPoolVerdict>)))]
async fn verify(State(state): State<AppState>, Tenant(ctx): Tenant, Lenient(body): Lenient<Value>) -> ApiResult<Response> {
    let mut check = Check::new();
    let pool = pool_index(&mut check, &body);
    check.finish()?;
    let verdict = hub_kernel::audit::verify(&state.db, &ctx.tenant_id, pool).await?;
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
