//! sdk-diagnostic-telemetry: crash reports per device, and device health
//! snapshots with the public latest-health read.
//!
//! Several tenants may register the same `device_uuid`; each tenant's
//! snapshots are its own. The public read speaks for one tenant: the one
//! named by `tenant_id`, or else the one that registered the device first,
//! so a tenant that registers the device later cannot change what the
//! public read shows.

use axum::{
    Router,
    extract::{Path, State},
    response::Response,
    routing::{get, post},
};
use serde::Deserialize;
use serde_json::{Value, json};
use sqlx::Row;

use crate::device;
use hub_kernel::{
    db,
    error::{ApiError, ApiResult, Body, created, ok},
    extract::{Page, Params, list},
    gate::Tenant,
    state::AppState,
    validate::{Check, path_id},
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/diagnostic/crash", post(report_crash).get(list_crashes))
        .route("/api/diagnostic/crash/{id}", get(get_crash))
        .route("/api/diagnostic/snapshots", post(record_snapshot))
        .route("/api/diagnostic/health", get(latest_health))
}

#[derive(Deserialize)]
struct Crash {
    app_version: Option<String>,
    device_uuid: Option<String>,
    occurred_at: Option<String>,
    os_version: Option<String>,
    person_id: Option<String>,
    stack_envelope: Option<String>,
    tenant_id: Option<String>,
}

fn crash_json(r: &sqlx::any::AnyRow, tenant_id: &str) -> ApiResult<Value> {
    Ok(json!({
        "id": r.try_get::<String, _>("crash_id")?,
        "tenant_id": tenant_id,
        "device_uuid": r.try_get::<String, _>("device_uuid")?,
        "person_id": r.try_get::<Option<String>, _>("person_id")?,
        "app_version": r.try_get::<Option<String>, _>("app_version")?,
        "os_version": r.try_get::<Option<String>, _>("os_version")?,
        "occurred_at": r.try_get::<String, _>("occurred_at")?,
        "stack_envelope": r.try_get::<String, _>("stack_envelope")?,
        "created_at": r.try_get::<String, _>("created_at")?,
    }))
}

const CRASH_COLUMNS: &str = "crash_id, device_uuid, person_id, app_version, os_version, occurred_at, stack_envelope, created_at";

/// Records a crash of a registered device of the caller's tenant.
async fn report_crash(State(state): State<AppState>, Tenant(ctx): Tenant, Body(body): Body<Crash>) -> ApiResult<Response> {
    let mut check = Check::new();
    let device = check.required_uuid("device_uuid", &body.device_uuid);
    let stack = check.required("stack_envelope", &body.stack_envelope);
    let person = check.optional_uuid("person_id", &body.person_id);
    let occurred_at = check.time_or_now("occurred_at", &body.occurred_at);
    check.finish()?;
    ctx.check_tenant(body.tenant_id.as_deref())?;
    let device = device.expect("checked").to_string();
    let mut tx = state.db.begin().await?;
    if !device::registered(&mut *tx, &ctx.tenant_id, &device).await? {
        return Err(ApiError::invalid("device_uuid does not name a registered device of this tenant"));
    }
    let id = db::new_id();
    sqlx::query(
        "INSERT INTO diagnostic_crash (crash_id, tenant_id, device_uuid, person_id, app_version, os_version, occurred_at, stack_envelope, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&id)
    .bind(&ctx.tenant_id)
    .bind(&device)
    .bind(person.map(|p| p.to_string()))
    .bind(Check::optional(&body.app_version))
    .bind(Check::optional(&body.os_version))
    .bind(&occurred_at)
    .bind(&stack)
    .bind(db::now())
    .execute(&mut *tx)
    .await?;
    let row =
        sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {CRASH_COLUMNS} FROM diagnostic_crash WHERE crash_id = $1"))).bind(&id).fetch_one(&mut *tx).await?;
    let data = crash_json(&row, &ctx.tenant_id)?;
    tx.commit().await?;
    Ok(created(data))
}

#[derive(Deserialize)]
struct DeviceQuery {
    device_uuid: Option<String>,
}

/// The crashes of one device, newest first; no paging.
async fn list_crashes(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<DeviceQuery>, page: Page) -> ApiResult<Response> {
    let mut check = Check::new();
    let device = check.required_uuid("device_uuid", &q.device_uuid);
    check.finish()?;
    let device = device.expect("checked").to_string();
    let total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM diagnostic_crash WHERE tenant_id = $1 AND device_uuid = $2")
        .bind(&ctx.tenant_id)
        .bind(&device)
        .fetch_one(&state.db.read)
        .await?;
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {CRASH_COLUMNS} FROM diagnostic_crash WHERE tenant_id = $1 AND device_uuid = $2 ORDER BY occurred_at DESC, crash_id DESC LIMIT $3 OFFSET $4"
    )))
    .bind(&ctx.tenant_id)
    .bind(&device)
    .bind(page.limit)
    .bind(page.offset)
    .fetch_all(&state.db.read)
    .await?;
    let data = rows.iter().map(|r| crash_json(r, &ctx.tenant_id)).collect::<ApiResult<Vec<_>>>()?;
    Ok(list(data, total))
}

async fn get_crash(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Response> {
    let id = path_id(&id)?.to_string();
    let row = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {CRASH_COLUMNS} FROM diagnostic_crash WHERE crash_id = $1 AND tenant_id = $2")))
        .bind(&id)
        .bind(&ctx.tenant_id)
        .fetch_optional(&state.db.read)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(ok(crash_json(&row, &ctx.tenant_id)?))
}

#[derive(Deserialize)]
struct Snapshot {
    device_uuid: Option<String>,
    status: Option<String>,
    metrics: Option<Value>,
    taken_at: Option<String>,
}

const HEALTH_STATUSES: &[&str] = &["ok", "degraded", "critical"];

/// Records a health snapshot of a registered device.
async fn record_snapshot(State(state): State<AppState>, Tenant(ctx): Tenant, Body(body): Body<Snapshot>) -> ApiResult<Response> {
    let mut check = Check::new();
    let device = check.required_uuid("device_uuid", &body.device_uuid);
    let status = check.required("status", &body.status);
    check.one_of("status", &status, HEALTH_STATUSES);
    let metrics = match &body.metrics {
        None | Some(Value::Null) => json!({}),
        Some(m @ Value::Object(_)) => m.clone(),
        Some(_) => {
            check.fail("metrics must be an object");
            Value::Null
        }
    };
    let taken_at = check.time_or_now("taken_at", &body.taken_at);
    check.finish()?;
    let device = device.expect("checked").to_string();
    let mut tx = state.db.begin().await?;
    if !device::registered(&mut *tx, &ctx.tenant_id, &device).await? {
        return Err(ApiError::invalid("device_uuid does not name a registered device of this tenant"));
    }
    let id = db::new_id();
    sqlx::query(
        "INSERT INTO diagnostic_health (snapshot_id, tenant_id, device_uuid, status, metrics, taken_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&id)
    .bind(&ctx.tenant_id)
    .bind(&device)
    .bind(&status)
    .bind(metrics.to_string())
    .bind(&taken_at)
    .bind(db::now())
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(created(json!({ "snapshot_id": id, "device_uuid": device, "status": status, "metrics": metrics, "taken_at": taken_at })))
}

#[derive(Deserialize)]
struct HealthQuery {
    device_uuid: Option<String>,
    tenant_id: Option<String>,
}

/// Public (its path ends in /health): the latest health status of a
/// device, from the snapshots of one tenant that registered it: the
/// `tenant_id` given, or else the first to register it. It answers without
/// a credential, so it says only the status and when it was taken, never
/// metrics or the tenant.
async fn latest_health(State(state): State<AppState>, Params(q): Params<HealthQuery>) -> ApiResult<Response> {
    let mut check = Check::new();
    let device = check.required_uuid("device_uuid", &q.device_uuid);
    let tenant = check.optional_uuid("tenant_id", &q.tenant_id);
    check.finish()?;
    let device = device.expect("checked").to_string();
    let row = sqlx::query(
        "SELECT status, taken_at FROM diagnostic_health WHERE device_uuid = $1 AND tenant_id = \
         (SELECT tenant_id FROM platform_device WHERE device_uuid = $1 AND ($2 = '' OR tenant_id = $2) ORDER BY created_at, tenant_id LIMIT 1) \
         ORDER BY taken_at DESC, snapshot_id DESC LIMIT 1",
    )
    .bind(&device)
    .bind(tenant.map(|t| t.to_string()).unwrap_or_default())
    .fetch_optional(&state.db.read)
    .await?;
    let data = match row {
        Some(r) => json!({ "device_uuid": device, "status": r.try_get::<String, _>("status")?, "taken_at": r.try_get::<String, _>("taken_at")? }),
        None => json!({ "device_uuid": device, "status": "unknown", "taken_at": null }),
    };
    Ok(ok(data))
}
