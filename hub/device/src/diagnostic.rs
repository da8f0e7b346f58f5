//! hdk-diagnostic: the hub's outbox of device rows. Devices push rows
//! (`received_at` stamped on arrival, once per idempotency key); a drain
//! claims up to `limit` undrained rows, oldest first, stamps `drained_at`
//! and returns them.

use hub_kernel::audit::registry;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(push)).routes(routes!(drain))
}

/// An outbox row as a drain returns it.
#[derive(Debug, FromRow, Serialize, ToSchema)]
struct OutboxRow {
    row_id: Id,
    device_uuid: Option<Id>,
    event_type: String,
    #[sqlx(try_from = "String")]
    payload: JsonText,
    idempotency_key: String,
    received_at: Timestamp,
    drained_at: Timestamp,
}

/// The rows a drain took.
#[derive(Serialize, ToSchema)]
struct Drained {
    count: usize,
    rows: Vec<OutboxRow>,
}

/// A push's body.
#[derive(Deserialize, ToSchema)]
struct Push {
    #[schema(format = "uuid")]
    device_uuid: Option<String>,
    #[schema(min_items = 1, max_items = 500)]
    rows: Vec<PushedRow>,
}

#[derive(Deserialize, ToSchema)]
struct PushedRow {
    /// A platform event type or one the tenant registered
    /// (`<domain>.<entity>.<verb>.v<N>`).
    #[schema(pattern = r"^[a-z](?:[-_]?[a-z0-9])*(?:\.[a-z](?:[-_]?[a-z0-9])*)+\.v[1-9][0-9]*$", max_length = 200)]
    event_type: String,
    /// Any JSON but null.
    #[schema(value_type = Value)]
    payload: Value,
    idempotency_key: String,
}

/// Which keys were stored, and which were already there.
#[derive(Serialize, ToSchema)]
struct Pushed {
    accepted: Vec<String>,
    duplicates: Vec<String>,
}

/// A drain's body, all optional.
#[derive(Deserialize, ToSchema)]
struct DrainRequest {
    /// Rows to take: 1 to 1000, default 100.
    #[schema(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
}

const DEFAULT_DRAIN: i64 = 100;

/// Pushes rows: `{ device_uuid?, rows: [{ event_type, payload, idempotency_key }] }`.
#[utoipa::path(post, path = "/api/hdk/diagnostic/outbox", tag = "hdk-diagnostic", request_body = Push,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "events": 0,
        "body": { "rows": [{ "event_type": "diagnostic.health.reported.v1", "payload": { "race": true }, "idempotency_key": "k-{unique}" }] } }))),
    responses((status = 201, description = "the keys stored and those already there", body = Data<Pushed>)))]
async fn push(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<Push>) -> ApiResult<Created<Pushed>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let device = check.optional_uuid("device_uuid", &body.device_uuid);
    let rows = body.rows;
    static EVENT_TYPE: Pattern = Pattern::of::<PushedRow>("event_type");
    for (i, row) in rows.iter().enumerate() {
        if !EVENT_TYPE.is_match(&row.event_type) {
            check.fail(format!("rows[{i}].event_type must look like <domain>.<entity>.<verb>.v<N>"));
        }
    }
    check.finish()?;
    // Events 1: the vocabulary is closed. A type neither in the baseline
    // nor registered by the tenant refuses the whole push before any write.
    let mut check = Check::new();
    let mut known = std::collections::HashMap::new();
    for (i, row) in rows.iter().enumerate() {
        let event_type = row.event_type.as_str();
        if !known.contains_key(event_type) {
            let found = registry::lookup(&state.db.read, &ctx.tenant_id, event_type).await?.is_some();
            known.insert(event_type, found);
        }
        if !known[event_type] {
            check.fail(format!(
                "rows[{i}].event_type {event_type} is neither a platform event type nor one of the tenant's (register it with POST /api/events/types)"
            ));
        }
    }
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let (mut accepted, mut duplicates) = (Vec::new(), Vec::new());
    for row in &rows {
        let key = row.idempotency_key.trim().to_string();
        let done = sqlx::query(
            "INSERT INTO hdk_outbox (row_id, tenant_id, device_uuid, event_type, payload, idempotency_key, received_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (tenant_id, idempotency_key) DO NOTHING",
        )
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(device.map(|d| d.to_string()))
        .bind(&row.event_type)
        .bind(row.payload.to_string())
        .bind(&key)
        .bind(db::now())
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 1 { accepted.push(key) } else { duplicates.push(key) }
    }
    tx.commit().await?;
    Ok(created(Pushed { accepted, duplicates }))
}

/// Drains: body optional, `{ limit }` (default 100, at most 1000).
#[utoipa::path(post, path = "/api/hdk/diagnostic/drain", tag = "hdk-diagnostic", request_body = DrainRequest,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "events": 1, "given": [
        ["POST", "/api/hdk/diagnostic/outbox", { "rows": [{ "event_type": "diagnostic.health.reported.v1", "payload": { "race": true }, "idempotency_key": "d-{unique}" }] }]],
        "body": {} }))),
    responses((status = 200, description = "the rows taken, oldest first", body = Data<Drained>)))]
async fn drain(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<DrainRequest>) -> ApiResult<Data<Drained>> {
    let limit = body.checked()?.limit.unwrap_or(DEFAULT_DRAIN);
    let drain_id = db::new_id();
    let now = db::now();
    let mut tx = state.db.begin().await?;
    // The outer `drained_at IS NULL` re-check makes concurrent drains on
    // PostgreSQL skip rows another drain claimed first: no row is returned twice.
    sqlx::query(
        "UPDATE hdk_outbox SET drained_at = $1, drain_id = $2 WHERE drained_at IS NULL AND row_id IN \
         (SELECT row_id FROM hdk_outbox WHERE tenant_id = $3 AND drained_at IS NULL ORDER BY received_at, row_id LIMIT $4)",
    )
    .bind(&now)
    .bind(&drain_id)
    .bind(&ctx.tenant_id)
    .bind(limit)
    .execute(&mut *tx)
    .await?;
    let rows: Vec<OutboxRow> = sqlx::query_as(
        "SELECT row_id, device_uuid, event_type, payload, idempotency_key, received_at, drained_at FROM hdk_outbox \
         WHERE drain_id = $1 ORDER BY received_at, row_id",
    )
    .bind(&drain_id)
    .fetch_all(&mut *tx)
    .await?;
    if !rows.is_empty() {
        audit::record(&mut tx, &ctx, events::OUTBOX_DRAINED, json!({ "drain_id": drain_id, "count": rows.len() })).await?;
    }
    tx.commit().await?;
    Ok(ok(Drained { count: rows.len(), rows }))
}
