//! sdk-audit: the tenant's event vocabulary (register, list, get one, move
//! a type's schema state forward) and its hash-chained audit entries
//! (append, verify one pool's chain, list and read its own entries).
//!
//! The actor of an appended entry is always the credential's: the person
//! (JWT subject) or the API key's synthetic persona.

use axum::{Json, response::IntoResponse};

use hub_kernel::audit::{
    Appended, actor_of,
    appender::OwnedEvent,
    chain::Reason,
    entry::{self, AuditEntry},
    registry::{self, EventType},
};
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(register, list_types))
        .routes(routes!(get_type, update_type))
        .routes(routes!(append))
        .routes(routes!(verify))
        .routes(routes!(list_entries))
        .routes(routes!(get_entry))
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

/// A change of one of the tenant's event types: what is absent stays.
#[derive(Deserialize, ToSchema)]
struct EventTypeChange {
    /// Forward only: `active` → `deprecated` → `retired`.
    #[schema(inline)]
    schema_state: Option<SchemaState>,
    #[schema(inline)]
    compaction_policy: Option<CompactionPolicy>,
}

impl SchemaState {
    /// Its place in the one-way life of a schema.
    fn rank(self) -> i64 {
        match self {
            SchemaState::Active => 0,
            SchemaState::Deprecated => 1,
            SchemaState::Retired => 2,
        }
    }
}

/// The rank of the stored `schema_state` in SQL (as [`SchemaState::rank`]).
const STORED_RANK: &str = "CASE schema_state WHEN 'active' THEN 0 WHEN 'deprecated' THEN 1 ELSE 2 END";

/// Changes one of the tenant's event types: its `schema_state` moves
/// forward only (`active` → `deprecated` → `retired`) and its
/// `compaction_policy` may change. A change to what is stored already
/// answers the type as it is and records no event; moving the state back
/// is 409; a platform type is 409 (a tenant cannot change it).
#[utoipa::path(patch, path = "/api/events/types/{event_type}", tag = "sdk-audit", request_body = EventTypeChange,
    params(("event_type" = String, Path, description = "the type's name")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer",
        "given": [["POST", "/api/events/types", { "event_type": "races.t{unique}.made.v1", "retention_class": "operational", "conflict_policy": "lww" }]],
        "params": { "event_type": "{event_type}" }, "body": { "schema_state": "deprecated" } }))),
    responses((status = 200, description = "the type as stored after the change", body = Data<EventType>)))]
async fn update_type(State(state): State<AppState>, Tenant(ctx): Tenant, Path(name): Path<String>, body: Body<EventTypeChange>) -> ApiResult<Data<EventType>> {
    if registry::baseline().contains(&name) {
        return Err(ApiError::Conflict(format!("'{name}' is a platform event type: a tenant cannot change it")));
    }
    // The type first (another tenant's is 404 whatever the body), then the body.
    registry::lookup(&state.db.read, &ctx.tenant_id, &name).await?.ok_or(ApiError::NotFound)?;
    let body = body.checked()?;
    if body.schema_state.is_none() && body.compaction_policy.is_none() {
        return Err(ApiError::invalid("give at least one of schema_state, compaction_policy"));
    }
    let target = body.schema_state.map(SchemaState::as_str);
    let compaction = body.compaction_policy.map(CompactionPolicy::as_str);
    // The most advanced state the row may be in for the change to apply.
    let max_rank = body.schema_state.map_or(SchemaState::Retired.rank(), SchemaState::rank);
    let mut tx = state.db.begin().await?;
    // One statement decides: the row moves only forward and only when the
    // change changes something; of identical changes at once one writes
    // (and records the event) and the others find it done.
    let sql = format!(
        "UPDATE audit_event_type SET schema_state = COALESCE($3, schema_state), compaction_policy = COALESCE($4, compaction_policy) \
         WHERE tenant_id = $1 AND event_type = $2 AND {STORED_RANK} <= $5 \
         AND (schema_state <> COALESCE($3, schema_state) OR compaction_policy <> COALESCE($4, compaction_policy)) RETURNING event_type"
    );
    let changed: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(&name)
        .bind(target)
        .bind(compaction)
        .bind(max_rank)
        .fetch_optional(&mut *tx)
        .await?;
    let stored = registry::lookup(&mut *tx, &ctx.tenant_id, &name).await?.ok_or(ApiError::NotFound)?;
    if changed.is_some() {
        let payload = json!({ "event_type": name, "schema_state": stored.schema_state, "compaction_policy": stored.compaction_policy });
        audit::record(&mut tx, &ctx, events::EVENT_TYPE_UPDATED, payload).await?;
    } else if target.is_some_and(|t| t != stored.schema_state) || compaction.is_some_and(|c| c != stored.compaction_policy) {
        // Unchanged and not what was asked: the state would move back.
        return Err(ApiError::Conflict(format!(
            "the event type is {}: its schema_state moves only forward (active, deprecated, retired)",
            stored.schema_state
        )));
    }
    tx.commit().await?;
    Ok(ok(stored))
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

/// The filters of the tenant's entry list.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct EntryFilter {
    /// Only the entries of this chain.
    #[param(minimum = 0)]
    pool_index: Option<i64>,
    /// Only entries of this type.
    #[param(max_length = 200)]
    event_type: Option<String>,
    /// Only entries of this actor (a persona, or a system actor's name).
    #[param(max_length = 256)]
    actor_id: Option<String>,
    /// RFC 3339: entries that occurred at or after.
    #[param(inline)]
    from: Option<Timestamp>,
    /// RFC 3339: entries that occurred at or before.
    #[param(inline)]
    to: Option<Timestamp>,
}

/// An entry of the tenant's chains as the list shows it: who did what and
/// when, and where it stands in which chain.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = AuditTrailEntrySummary)]
struct AuditEntrySummary {
    entry_id: Id,
    pool_index: i64,
    seq: i64,
    event_type: String,
    actor_kind: String,
    actor_id: String,
    occurred_at: Timestamp,
    retention_class: String,
    /// When its payload was shredded (null while it is kept).
    shredded_at: Option<Timestamp>,
}

const SUMMARY_COLUMNS: &str = "entry_id, pool_index, seq, event_type, actor_kind, actor_id, occurred_at, retention_class, shredded_at";

/// The tenant's entries: those of its own chains only. Entries are found
/// through the tenant's chain heads (the `(chain_id, seq)` index), never by
/// scanning other tenants' entries; `tenant_id` is checked as well.
const ENTRY_LISTING: Listing = Listing {
    table: "audit_entry",
    columns: SUMMARY_COLUMNS,
    filter: "chain_id IN (SELECT chain_id FROM audit_chain_head WHERE tenant_id = $1 AND ($2 = '' OR CAST(pool_index AS TEXT) = $2)) \
             AND tenant_id = $1 AND ($3 = '' OR event_type = $3) AND ($4 = '' OR actor_id = $4) \
             AND ($5 = '' OR occurred_at >= $5) AND ($6 = '' OR occurred_at <= $6)",
    order: "occurred_at DESC, entry_id DESC",
};

/// The entries of the caller's own chains, newest first, filtered; one
/// page read by the database (a chain is never loaded whole).
#[utoipa::path(get, path = "/api/audit/entries", tag = "sdk-audit", params(EntryFilter, Page),
    responses((status = 200, description = "one page of the tenant's entries", body = ListOf<AuditEntrySummary>)))]
async fn list_entries(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<EntryFilter>, page: Page) -> ApiResult<ListOf<AuditEntrySummary>> {
    let mut check = Check::new();
    if let (Some(from), Some(to)) = (q.from, q.to)
        && from > to
    {
        check.fail("from must not be later than to");
    }
    check.finish()?;
    let pool = q.pool_index.map(|p| p.to_string()).unwrap_or_default();
    let event_type = Check::optional(&q.event_type).unwrap_or_default();
    let actor = Check::optional(&q.actor_id).unwrap_or_default();
    let (from, to) = (q.from.map(|t| t.to_string()).unwrap_or_default(), q.to.map(|t| t.to_string()).unwrap_or_default());
    page.list::<AuditEntrySummary>(&state.db.read, &ENTRY_LISTING, &[&ctx.tenant_id, &pool, &event_type, &actor, &from, &to]).await
}

/// One entry of the caller's chains, whole.
///
/// Hashes as lowercase hex; a shredded payload is null with its
/// `shredded_at`. Another tenant's entry is 404.
#[utoipa::path(get, path = "/api/audit/entries/{entry_id}", tag = "sdk-audit", params(("entry_id" = String, Path, description = "the entry")),
    responses((status = 200, description = "the entry", body = Data<AuditEntry>)))]
async fn get_entry(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<AuditEntry>> {
    let id = path_id(&id)?.to_string();
    Ok(ok(entry::find(&state.db.read, &id, Some(&ctx.tenant_id)).await?.ok_or(ApiError::NotFound)?))
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
