//! hdk-sync: conflict resolution with the registered policy of an event
//! type (the very code device-core runs on the phone), the endpoint that
//! receives device outbox batches (stored once per idempotency key), and
//! the policies devices pull.

use std::collections::HashMap;

use device_core::policy::{self, ConflictPolicy, Resolution};
use protocol::sync::{EventTypePolicy, MAX_BATCH_EVENTS, RejectedEvent, SyncBatchAck, SyncPolicies};

use hub_kernel::prelude::*;
use hub_kernel::{
    audit::registry::{self, EventType},
    validate,
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(resolve))
        .routes(routes!(list_resolutions))
        .routes(routes!(decide))
        .routes(routes!(receive_batch))
        .routes(routes!(list_events))
        .routes(routes!(policies))
}

/// A resolution request.
#[derive(Deserialize, ToSchema)]
struct ResolveRequest {
    /// A type the tenant registered, with its conflict policy.
    event_type: String,
    /// One side: any JSON but null or a blank string.
    #[schema(value_type = Value)]
    input_a: Value,
    /// The other side: any JSON but null or a blank string.
    #[schema(value_type = Value)]
    input_b: Value,
    #[schema(format = "uuid")]
    audit_entry_id: Option<String>,
    batch_id: Option<String>,
}

/// A batch's answer (`protocol::sync::SyncBatchAck`): every key of the
/// batch in exactly one of the lists.
#[derive(Serialize, ToSchema)]
#[schema(as = HdkSyncAck)]
struct Ack {
    batch_id: String,
    /// Stored now.
    accepted: Vec<String>,
    /// Already stored by an earlier batch: as good as accepted.
    duplicates: Vec<String>,
    /// Refused for good: the device stops sending them.
    rejected: Vec<Rejected>,
}

/// A key refused for good, and why.
#[derive(Serialize, ToSchema)]
#[schema(as = HdkSyncRejected)]
struct Rejected {
    idempotency_key: String,
    reason: String,
}

impl From<SyncBatchAck> for Ack {
    fn from(a: SyncBatchAck) -> Self {
        let rejected = a.rejected.into_iter().map(|r| Rejected { idempotency_key: r.idempotency_key, reason: r.reason }).collect();
        Ack { batch_id: a.batch_id, accepted: a.accepted, duplicates: a.duplicates, rejected }
    }
}

/// The event types a device may sync (`protocol::sync::SyncPolicies`).
#[derive(Serialize, ToSchema)]
#[schema(as = HdkSyncPolicies)]
struct Policies {
    event_types: Vec<Policy>,
}

/// An event type and how its conflicts are resolved
/// (`protocol::sync::EventTypePolicy`).
#[derive(Serialize, ToSchema)]
#[schema(as = HdkSyncPolicy)]
struct Policy {
    event_type: String,
    /// `crdt`, `lww`, `merge`, `event-sourcing` or `human-review`.
    conflict_policy: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    retention_class: Option<String>,
    schema_version: u32,
}

impl From<SyncPolicies> for Policies {
    fn from(p: SyncPolicies) -> Self {
        let event_types = p
            .event_types
            .into_iter()
            .map(|t| Policy {
                event_type: t.event_type,
                conflict_policy: t.conflict_policy,
                retention_class: t.retention_class,
                schema_version: t.schema_version,
            })
            .collect();
        Policies { event_types }
    }
}

/// Whether a side is given: a blank string is not.
fn present(v: &Value) -> bool {
    v.as_str().is_none_or(|s| !s.trim().is_empty())
}

/// Resolves `input_a` against `input_b` with the event type's registered
/// policy; the resolution is recorded (a `human-review` one as pending).
#[utoipa::path(post, path = "/api/hdk/sync/resolve", tag = "hdk-sync", request_body = ResolveRequest,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [
        ["POST", "/api/events/types", { "event_type": "races.t{unique}.noted.v1", "retention_class": "operational", "conflict_policy": "lww" }]],
        "body": { "event_type": "races.t{unique}.noted.v1", "input_a": { "timestamp": "2026-01-01T00:00:00Z", "text": "a" }, "input_b": { "timestamp": "2026-01-02T00:00:00Z", "text": "b" } } }))),
    responses((status = 200, description = "the resolution, shaped by the policy", body = Data<Value>)))]
async fn resolve(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<ResolveRequest>) -> ApiResult<Data<Value>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let event_type = body.event_type.trim().to_string();
    for (field, v) in [("input_a", &body.input_a), ("input_b", &body.input_b)] {
        if !present(v) {
            check.fail(format!("{field} is required"));
        }
    }
    let audit_entry_id = check.optional_uuid("audit_entry_id", &body.audit_entry_id);
    let batch_id = body.batch_id.clone();
    check.finish()?;
    let registered = registry::lookup(&state.db.read, &ctx.tenant_id, &event_type)
        .await?
        .ok_or_else(|| ApiError::invalid(format!("event_type {event_type} is not registered: register it with POST /api/events/types first")))?;
    let policy = ConflictPolicy::parse(&registered.conflict_policy).map_err(|e| ApiError::Internal(anyhow::anyhow!("{e}")))?;
    let (a, b) = (&body.input_a, &body.input_b);
    let resolution = policy::resolve(policy, a, b).map_err(|e| ApiError::invalid(e.to_string()))?;
    let status = match resolution {
        Resolution::Resolved { .. } => "resolved",
        Resolution::NeedsReview { .. } => "pending_review",
    };
    let mut data = resolution.to_json(policy);
    let id = db::new_id();
    let mut tx = state.db.begin().await?;
    sqlx::query(
        "INSERT INTO hdk_sync_resolution (resolution_id, tenant_id, event_type, policy, status, input_a, input_b, result, batch_id, audit_entry_id, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(&id)
    .bind(&ctx.tenant_id)
    .bind(&event_type)
    .bind(policy.as_str())
    .bind(status)
    .bind(a.to_string())
    .bind(b.to_string())
    .bind(data.to_string())
    .bind(&batch_id)
    .bind(audit_entry_id.map(|u| u.to_string()))
    .bind(db::now())
    .execute(&mut *tx)
    .await?;
    let event = if status == "resolved" { events::SYNC_CONFLICT_RESOLVED } else { events::SYNC_CONFLICT_ESCALATED };
    audit::record(&mut tx, &ctx, event, json!({ "resolution_id": id, "event_type": event_type, "policy": policy.as_str(), "batch_id": batch_id })).await?;
    tx.commit().await?;
    data["resolution_id"] = json!(id);
    data["event_type"] = json!(event_type);
    data["batch_id"] = json!(batch_id);
    data["audit_entry_id"] = json!(audit_entry_id.map(|u| u.to_string()));
    Ok(ok(data))
}

/// A device's outbox batch (`protocol::sync::SyncBatch`).
#[derive(Deserialize, ToSchema)]
#[schema(as = HdkSyncBatch)]
struct Batch {
    batch_id: String,
    #[schema(format = "uuid")]
    device_uuid: String,
    #[schema(max_items = 500)]
    events: Vec<BatchEvent>,
}

/// One event of a batch. Only its key is checked with the batch: an event
/// whose type is neither a platform type nor the tenant's, whose payload is
/// missing or whose `occurred_at` is not an RFC 3339 time at most 5
/// minutes ahead is answered in `rejected`, the others stored.
#[derive(Deserialize, ToSchema)]
#[schema(as = HdkSyncEvent)]
struct BatchEvent {
    /// Unique per tenant; the hub's de-duplication key.
    idempotency_key: String,
    /// The device's id of the event (UUIDv7).
    event_id: Option<String>,
    event_type: Option<String>,
    /// Any JSON but null.
    #[schema(value_type = Option<Value>)]
    payload: Option<Value>,
    /// When the device enqueued it (RFC 3339).
    occurred_at: Option<String>,
}

/// Receives a device's outbox batch (`protocol::sync::SyncBatch`). Each
/// event is stored once per (tenant, idempotency_key); every key of the
/// batch is answered in exactly one of accepted, duplicates, rejected, so a
/// device resuming an interrupted sync loses and duplicates nothing.
#[utoipa::path(post, path = "/api/hdk/sync/batches", tag = "hdk-sync", request_body = Batch,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "events": 1, "body": { "batch_id": "b-{unique}", "device_uuid": "{unique}", "events": [
        { "idempotency_key": "k-{unique}", "event_id": "{unique}", "event_type": "diagnostic.health.reported.v1", "payload": { "race": true }, "occurred_at": "2026-05-01T10:00:00Z" }] } }))),
    responses((status = 200, description = "every key in exactly one of accepted, duplicates, rejected", body = Data<Ack>)))]
async fn receive_batch(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<Batch>) -> ApiResult<Data<Ack>> {
    let body = body.checked()?;
    debug_assert!(body.events.len() <= MAX_BATCH_EVENTS, "the schema bounds the batch");
    let batch_id = body.batch_id.trim().to_string();
    let mut check = Check::new();
    let device = check.required_uuid("device_uuid", &Some(body.device_uuid.clone()));
    check.finish()?;
    let device = device.expect("checked").to_string();
    let events = body.events;
    let mut ack = SyncBatchAck { batch_id: batch_id.clone(), ..Default::default() };
    // Each type's schema_state, None when the tenant does not know it.
    let mut known: HashMap<String, Option<String>> = HashMap::new();
    let mut tx = state.db.begin().await?;
    for e in &events {
        let key = e.idempotency_key.trim().to_string();
        let event_type = e.event_type.clone().unwrap_or_default();
        let schema_state = match known.get(&event_type) {
            Some(k) => k.clone(),
            None => {
                let k = registry::lookup(&mut *tx, &ctx.tenant_id, &event_type).await?.map(|t| t.schema_state);
                known.insert(event_type.clone(), k.clone());
                k
            }
        };
        let occurred_at = match &e.occurred_at {
            Some(raw) => validate::observed_time("occurred_at", raw),
            None => Err("occurred_at must be an RFC 3339 timestamp".to_string()),
        };
        let reason = if schema_state.is_none() {
            Some(format!("event type '{event_type}' is neither a platform type nor registered by the tenant"))
        } else if schema_state.as_deref() == Some("retired") {
            Some(format!("event type '{event_type}' is retired: it takes no new events"))
        } else if e.payload.as_ref().is_none_or(Value::is_null) {
            Some("payload is required".to_string())
        } else {
            occurred_at.as_ref().err().cloned()
        };
        if let Some(reason) = reason {
            ack.rejected.push(RejectedEvent { idempotency_key: key, reason });
            continue;
        }
        let stored = sqlx::query(
            "INSERT INTO hdk_sync_event (tenant_id, idempotency_key, event_id, batch_id, device_uuid, event_type, payload, occurred_at, received_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (tenant_id, idempotency_key) DO NOTHING",
        )
        .bind(&ctx.tenant_id)
        .bind(&key)
        .bind(e.event_id.as_deref().unwrap_or_default())
        .bind(&batch_id)
        .bind(&device)
        .bind(&event_type)
        .bind(e.payload.as_ref().map(Value::to_string).unwrap_or_default())
        .bind(db::format_time(occurred_at.expect("checked")))
        .bind(db::now())
        .execute(&mut *tx)
        .await?;
        if stored.rows_affected() == 1 { ack.accepted.push(key) } else { ack.duplicates.push(key) }
    }
    if !ack.accepted.is_empty() {
        let counts = json!({
            "batch_id": batch_id, "device_uuid": device, "accepted": ack.accepted.len(), "duplicates": ack.duplicates.len(), "rejected": ack.rejected.len(),
        });
        audit::record(&mut tx, &ctx, events::SYNC_BATCH_RECEIVED, counts).await?;
    }
    tx.commit().await?;
    metrics::counter!("hub_sync_batches_total").increment(1);
    metrics::counter!("hub_sync_events_total", "outcome" => "accepted").increment(ack.accepted.len() as u64);
    metrics::counter!("hub_sync_events_total", "outcome" => "duplicate").increment(ack.duplicates.len() as u64);
    metrics::counter!("hub_sync_events_total", "outcome" => "rejected").increment(ack.rejected.len() as u64);
    Ok(ok(Ack::from(ack)))
}

fn as_policy(t: &EventType) -> EventTypePolicy {
    EventTypePolicy {
        event_type: t.event_type.clone(),
        conflict_policy: t.conflict_policy.clone(),
        retention_class: Some(t.retention_class.clone()),
        schema_version: u32::try_from(t.schema_version).unwrap_or(1),
    }
}

/// The event types a device may sync and their conflict policies: the
/// platform baseline and the tenant's own.
#[utoipa::path(get, path = "/api/hdk/sync/policies", tag = "hdk-sync",
    responses((status = 200, description = "the event types and their conflict policies", body = Data<Policies>)))]
async fn policies(State(state): State<AppState>, Tenant(ctx): Tenant) -> ApiResult<Data<Policies>> {
    let mut event_types: Vec<EventTypePolicy> = registry::baseline().types.iter().map(as_policy).collect();
    event_types.extend(registry::tenant_types(&state.db.read, &ctx.tenant_id).await?.iter().map(as_policy));
    Ok(ok(Policies::from(SyncPolicies { event_types })))
}

stored_enum! {
    /// Where a recorded resolution is: `resolved` by its policy or a
    /// person's decision, or `pending_review` (a `human-review` conflict).
    #[schema(as = HdkSyncResolutionStatus)]
    enum ResolutionStatus { Resolved = "resolved", PendingReview = "pending_review" }
}

/// A recorded resolution.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = HdkSyncResolution)]
struct ResolutionRow {
    resolution_id: Id,
    event_type: String,
    /// `crdt`, `lww`, `merge`, `event-sourcing` or `human-review`.
    policy: String,
    status: ResolutionStatus,
    #[sqlx(try_from = "String")]
    input_a: JsonText,
    #[sqlx(try_from = "String")]
    input_b: JsonText,
    /// The policy's answer (as `POST /api/hdk/sync/resolve` gave it), or,
    /// once a person decided, `{ policy, status, result, conflicts, decision }`.
    #[sqlx(try_from = "String")]
    result: JsonText,
    batch_id: Option<String>,
    audit_entry_id: Option<String>,
    created_at: Timestamp,
}

const RESOLUTION_COLUMNS: &str = "resolution_id, event_type, policy, status, input_a, input_b, result, batch_id, audit_entry_id, created_at";

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ResolutionFilter {
    #[param(inline)]
    status: Option<ResolutionStatus>,
    #[param(max_length = 256)]
    event_type: Option<String>,
}

/// The tenant's recorded resolutions, newest first: `status=pending_review`
/// is the queue of conflicts waiting for a person.
#[utoipa::path(get, path = "/api/hdk/sync/resolutions", tag = "hdk-sync", params(ResolutionFilter, Page),
    responses((status = 200, description = "one page of resolutions", body = ListOf<ResolutionRow>)))]
async fn list_resolutions(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Params(q): Params<ResolutionFilter>,
    page: Page,
) -> ApiResult<ListOf<ResolutionRow>> {
    let status = q.status.map_or("", ResolutionStatus::as_str);
    let event_type = q.event_type.as_deref().map(str::trim).unwrap_or("");
    let listing = Listing {
        table: "hdk_sync_resolution",
        columns: RESOLUTION_COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR status = $2) AND ($3 = '' OR event_type = $3)",
        order: "created_at DESC, resolution_id DESC",
    };
    page.list::<ResolutionRow>(&state.db.read, &listing, &[&ctx.tenant_id, status, event_type]).await
}

stored_enum! {
    /// What a person decides for a conflict: keep side `a`, side `b`, or
    /// the `value` they give.
    #[schema(as = HdkSyncDecisionChoice)]
    enum Choice { A = "a", B = "b", Value = "value" }
}

/// A person's decision of a conflict waiting for review.
#[derive(Deserialize, ToSchema)]
#[schema(as = HdkSyncDecision)]
struct Decision {
    choice: Choice,
    /// Required with `value` (any JSON but null or a blank string), refused otherwise.
    #[schema(value_type = Option<Value>)]
    value: Option<Value>,
}

const RESOLUTION: Stateful = Stateful { noun: "resolution", table: "hdk_sync_resolution", key: "resolution_id", state: "status" };

/// Decides a `pending_review` resolution: it becomes `resolved` with the
/// chosen side (or the given value) as its result. 409 once resolved.
#[utoipa::path(post, path = "/api/hdk/sync/resolutions/{resolution_id}/decision", tag = "hdk-sync", request_body = Decision,
    params(("resolution_id" = String, Path, description = "the resolution")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [
        ["POST", "/api/events/types", { "event_type": "races.r{unique}.noted.v1", "retention_class": "operational", "conflict_policy": "human-review" }],
        ["POST", "/api/hdk/sync/resolve", { "event_type": "races.r{unique}.noted.v1", "input_a": "yes", "input_b": "no" }]],
        "body": { "choice": "a" } }))),
    responses((status = 200, description = "the resolution, resolved", body = Data<ResolutionRow>)))]
async fn decide(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<Decision>) -> ApiResult<Data<ResolutionRow>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // The sides never change once recorded: they may come from a read; the
    // state is decided by the guarded statement below. Another tenant's or
    // an unknown resolution is 404 whatever the body.
    let sql = format!("SELECT {RESOLUTION_COLUMNS} FROM hdk_sync_resolution WHERE tenant_id = $1 AND resolution_id = $2");
    let found: Option<ResolutionRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
    let found = found.ok_or(ApiError::NotFound)?;
    let body = body.checked()?;
    let mut check = Check::new();
    match (body.choice, &body.value) {
        (Choice::Value, None) => check.fail("value is required with choice value"),
        (Choice::Value, Some(v)) if v.is_null() || !present(v) => check.fail("value must not be null or blank"),
        (Choice::A | Choice::B, Some(_)) => check.fail("value is only taken with choice value"),
        _ => {}
    }
    check.finish()?;
    let chosen = match body.choice {
        Choice::A => found.input_a.0.clone(),
        Choice::B => found.input_b.0.clone(),
        Choice::Value => body.value.clone().unwrap_or_default(),
    };
    let result = json!({ "policy": found.policy, "status": "resolved", "result": chosen, "conflicts": [], "decision": body.choice });
    let sql = format!(
        "UPDATE hdk_sync_resolution SET status = 'resolved', result = $3 \
         WHERE tenant_id = $1 AND resolution_id = $2 AND status = 'pending_review' RETURNING {RESOLUTION_COLUMNS}"
    );
    let moved: Option<ResolutionRow> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).bind(result.to_string()).fetch_optional(&mut *tx).await?;
    let updated = RESOLUTION.settle(&mut tx, &ctx.tenant_id, &id, moved, "only a pending_review resolution can be decided").await?;
    let payload =
        json!({ "resolution_id": id, "event_type": updated.event_type, "policy": updated.policy, "decision": body.choice, "batch_id": updated.batch_id });
    audit::record(&mut tx, &ctx, events::SYNC_CONFLICT_RESOLVED, payload).await?;
    tx.commit().await?;
    Ok(ok(updated))
}

/// An event a device synced.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = HdkSyncedEvent)]
struct SyncedEvent {
    idempotency_key: String,
    /// The device's id of the event.
    event_id: String,
    batch_id: String,
    device_uuid: String,
    event_type: String,
    #[sqlx(try_from = "String")]
    payload: JsonText,
    occurred_at: Timestamp,
    /// When the hub stored it.
    received_at: Timestamp,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct EventFilter {
    /// Only events the hub received after this time (RFC 3339).
    since: Option<String>,
    #[param(max_length = 256)]
    event_type: Option<String>,
    /// Only the events of one device.
    #[param(format = "uuid")]
    device_uuid: Option<String>,
}

/// The events devices synced to the tenant, most recently received first:
/// the pull half of sync (`since` the last pull, of one type or device).
#[utoipa::path(get, path = "/api/hdk/sync/events", tag = "hdk-sync", params(EventFilter, Page),
    responses((status = 200, description = "one page of synced events", body = ListOf<SyncedEvent>)))]
async fn list_events(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<EventFilter>, page: Page) -> ApiResult<ListOf<SyncedEvent>> {
    let mut check = Check::new();
    let since = check.optional_expiry("since", &q.since).unwrap_or_default();
    let device = check.optional_uuid("device_uuid", &q.device_uuid).map(|u| u.to_string()).unwrap_or_default();
    check.finish()?;
    let event_type = q.event_type.as_deref().map(str::trim).unwrap_or("");
    let listing = Listing {
        table: "hdk_sync_event",
        columns: "idempotency_key, event_id, batch_id, device_uuid, event_type, payload, occurred_at, received_at",
        filter: "tenant_id = $1 AND ($2 = '' OR received_at > $2) AND ($3 = '' OR event_type = $3) AND ($4 = '' OR device_uuid = $4)",
        order: "received_at DESC, idempotency_key DESC",
    };
    page.list::<SyncedEvent>(&state.db.read, &listing, &[&ctx.tenant_id, &since, event_type, &device]).await
}
