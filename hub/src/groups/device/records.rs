//! hdk-permissions, hdk-measure, hdk-watermark: records devices report and
//! read back by their key (newest permission snapshot of a device;
//! measurements of a capture; watermark applications of a variant).

use axum::{
    Router,
    extract::State,
    response::Response,
    routing::{get, post},
};
use serde::Deserialize;
use serde_json::{Value, json};
use sqlx::Row;

use crate::{
    db,
    error::{ApiError, ApiResult, Body, created, ok},
    extract::{Page, Params, list},
    gate::Tenant,
    state::AppState,
    validate::Check,
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/hdk/permissions/snapshots", post(record_snapshot))
        .route("/api/hdk/permissions/snapshots/latest", get(latest_snapshot))
        .route("/api/hdk/measure/measurements", post(record_measurement).get(list_measurements))
        .route("/api/hdk/watermark/applications", post(record_watermark).get(list_watermarks))
}

fn json_text(r: &sqlx::any::AnyRow, col: &str) -> ApiResult<Value> {
    let text: String = r.try_get(col)?;
    Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[derive(Deserialize)]
struct NewSnapshot {
    device_uuid: Option<String>,
    persona_id: Option<String>,
    permission_set: Option<Value>,
    taken_at: Option<String>,
}

async fn record_snapshot(State(state): State<AppState>, Tenant(ctx): Tenant, Body(body): Body<NewSnapshot>) -> ApiResult<Response> {
    let mut check = Check::new();
    let device = check.required_uuid("device_uuid", &body.device_uuid);
    let persona = check.optional_uuid("persona_id", &body.persona_id);
    let set = match &body.permission_set {
        Some(v @ (Value::Object(_) | Value::Array(_))) => v.clone(),
        _ => {
            check.fail("permission_set is required (an object or an array)");
            Value::Null
        }
    };
    let taken_at = check.time_or_now("taken_at", &body.taken_at);
    check.finish()?;
    let id = db::new_id();
    let (device, persona) = (device.expect("checked").to_string(), persona.map(|p| p.to_string()));
    sqlx::query(
        "INSERT INTO hdk_permission_snapshot (snapshot_id, tenant_id, device_uuid, persona_id, permission_set, taken_at, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&id)
    .bind(&ctx.tenant_id)
    .bind(&device)
    .bind(&persona)
    .bind(set.to_string())
    .bind(&taken_at)
    .bind(db::now())
    .execute(state.db.writer())
    .await?;
    Ok(created(json!({
        "snapshot_id": id, "tenant_id": ctx.tenant_id, "device_uuid": device, "persona_id": persona,
        "permission_set": set, "taken_at": taken_at,
    })))
}

#[derive(Deserialize)]
struct ByDevice {
    device_uuid: Option<String>,
}

/// The newest snapshot of a device by taken_at (404 when it has none).
async fn latest_snapshot(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<ByDevice>) -> ApiResult<Response> {
    let mut check = Check::new();
    let device = check.required_uuid("device_uuid", &q.device_uuid);
    check.finish()?;
    let device = device.expect("checked").to_string();
    let r = sqlx::query(
        "SELECT snapshot_id, persona_id, permission_set, taken_at FROM hdk_permission_snapshot \
         WHERE tenant_id = $1 AND device_uuid = $2 ORDER BY taken_at DESC, snapshot_id DESC LIMIT 1",
    )
    .bind(&ctx.tenant_id)
    .bind(&device)
    .fetch_optional(&state.db.read)
    .await?
    .ok_or(ApiError::NotFound)?;
    Ok(ok(json!({
        "snapshot_id": r.try_get::<String, _>("snapshot_id")?,
        "tenant_id": ctx.tenant_id,
        "device_uuid": device,
        "persona_id": r.try_get::<Option<String>, _>("persona_id")?,
        "permission_set": json_text(&r, "permission_set")?,
        "taken_at": r.try_get::<String, _>("taken_at")?,
    })))
}

#[derive(Deserialize)]
struct NewMeasurement {
    capture_id: Option<String>,
    kind: Option<String>,
    value: Option<Value>,
    unit: Option<String>,
}

async fn record_measurement(State(state): State<AppState>, Tenant(ctx): Tenant, Body(body): Body<NewMeasurement>) -> ApiResult<Response> {
    let mut check = Check::new();
    let capture = check.required("capture_id", &body.capture_id);
    let kind = check.required("kind", &body.kind);
    let unit = check.required("unit", &body.unit);
    let value = match &body.value {
        Some(Value::Number(n)) => n.as_f64(),
        None | Some(Value::Null) => {
            check.fail("value is required");
            None
        }
        Some(_) => {
            check.fail("value must be a number");
            None
        }
    };
    check.finish()?;
    let id = db::new_id();
    let now = db::now();
    let value = value.expect("checked");
    sqlx::query("INSERT INTO hdk_measurement (measurement_id, tenant_id, capture_id, kind, value, unit, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)")
        .bind(&id)
        .bind(&ctx.tenant_id)
        .bind(&capture)
        .bind(&kind)
        .bind(value)
        .bind(&unit)
        .bind(&now)
        .execute(state.db.writer())
        .await?;
    Ok(created(json!({ "measurement_id": id, "capture_id": capture, "kind": kind, "value": value, "unit": unit, "created_at": now })))
}

#[derive(Deserialize)]
struct ByCapture {
    capture_id: Option<String>,
}

/// Measurements of a capture; an unknown capture is an empty list.
async fn list_measurements(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<ByCapture>, page: Page) -> ApiResult<Response> {
    let mut check = Check::new();
    let capture = check.required("capture_id", &q.capture_id);
    check.finish()?;
    let total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM hdk_measurement WHERE tenant_id = $1 AND capture_id = $2")
        .bind(&ctx.tenant_id)
        .bind(&capture)
        .fetch_one(&state.db.read)
        .await?;
    let rows = sqlx::query(
        "SELECT measurement_id, kind, value, unit, created_at FROM hdk_measurement WHERE tenant_id = $1 AND capture_id = $2 \
         ORDER BY created_at, measurement_id LIMIT $3 OFFSET $4",
    )
    .bind(&ctx.tenant_id)
    .bind(&capture)
    .bind(page.limit)
    .bind(page.offset)
    .fetch_all(&state.db.read)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        out.push(json!({
            "measurement_id": r.try_get::<String, _>("measurement_id")?,
            "capture_id": capture,
            "kind": r.try_get::<String, _>("kind")?,
            "value": r.try_get::<f64, _>("value")?,
            "unit": r.try_get::<String, _>("unit")?,
            "created_at": r.try_get::<String, _>("created_at")?,
        }));
    }
    Ok(list(out, total))
}

#[derive(Deserialize)]
struct NewWatermark {
    variant_id: Option<String>,
    watermark_kind: Option<String>,
    asset_ref: Option<String>,
    payload: Option<Value>,
    applied_at: Option<String>,
}

const WATERMARK_KINDS: &[&str] = &["visible", "invisible", "forensic"];

async fn record_watermark(State(state): State<AppState>, Tenant(ctx): Tenant, Body(body): Body<NewWatermark>) -> ApiResult<Response> {
    let mut check = Check::new();
    let variant = check.required("variant_id", &body.variant_id);
    let kind = check.required("watermark_kind", &body.watermark_kind);
    check.one_of("watermark_kind", &kind, WATERMARK_KINDS);
    let payload = match &body.payload {
        None | Some(Value::Null) => json!({}),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(_) => {
            check.fail("payload must be an object");
            Value::Null
        }
    };
    let applied_at = check.time_or_now("applied_at", &body.applied_at);
    check.finish()?;
    let id = db::new_id();
    let asset_ref = Check::optional(&body.asset_ref);
    sqlx::query(
        "INSERT INTO hdk_watermark_application (application_id, tenant_id, variant_id, watermark_kind, asset_ref, payload, applied_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&id)
    .bind(&ctx.tenant_id)
    .bind(&variant)
    .bind(&kind)
    .bind(&asset_ref)
    .bind(payload.to_string())
    .bind(&applied_at)
    .execute(state.db.writer())
    .await?;
    Ok(created(json!({
        "application_id": id, "variant_id": variant, "watermark_kind": kind, "asset_ref": asset_ref,
        "payload": payload, "applied_at": applied_at,
    })))
}

#[derive(Deserialize)]
struct ByVariant {
    variant_id: Option<String>,
}

/// Watermark applications of a variant; an unknown variant is an empty list.
async fn list_watermarks(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<ByVariant>, page: Page) -> ApiResult<Response> {
    let mut check = Check::new();
    let variant = check.required("variant_id", &q.variant_id);
    check.finish()?;
    let total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM hdk_watermark_application WHERE tenant_id = $1 AND variant_id = $2")
        .bind(&ctx.tenant_id)
        .bind(&variant)
        .fetch_one(&state.db.read)
        .await?;
    let rows = sqlx::query(
        "SELECT application_id, watermark_kind, asset_ref, payload, applied_at FROM hdk_watermark_application \
         WHERE tenant_id = $1 AND variant_id = $2 ORDER BY applied_at, application_id LIMIT $3 OFFSET $4",
    )
    .bind(&ctx.tenant_id)
    .bind(&variant)
    .bind(page.limit)
    .bind(page.offset)
    .fetch_all(&state.db.read)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        out.push(json!({
            "application_id": r.try_get::<String, _>("application_id")?,
            "variant_id": variant,
            "watermark_kind": r.try_get::<String, _>("watermark_kind")?,
            "asset_ref": r.try_get::<Option<String>, _>("asset_ref")?,
            "payload": json_text(&r, "payload")?,
            "applied_at": r.try_get::<String, _>("applied_at")?,
        }));
    }
    Ok(list(out, total))
}
