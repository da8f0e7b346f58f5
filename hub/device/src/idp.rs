//! hdk-idp: device identity claims binding a device to a person, with
//! optional biometric-template and PIN envelopes sealed at rest. A claim
//! with neither credential is accepted. The envelopes are never returned.

use axum::{Router, extract::State, response::Response, routing::post};
use base64::Engine;
use serde::Deserialize;
use serde_json::json;
use sqlx::Row;

use hub_kernel::{
    db,
    error::{ApiError, ApiResult, Body, created, ok},
    extract::Params,
    gate::Tenant,
    state::AppState,
    validate::Check,
};

pub fn routes() -> Router<AppState> {
    Router::new().route("/api/hdk/idp/claims", post(upsert).get(get_claim))
}

#[derive(Deserialize)]
struct Claim {
    device_uuid: Option<String>,
    person_id: Option<String>,
    biometric_template_envelope: Option<String>,
    pin_envelope: Option<String>,
}

fn decode(check: &mut Check, name: &str, value: &Option<String>) -> Option<Vec<u8>> {
    let v = Check::optional(value)?;
    match base64::engine::general_purpose::STANDARD.decode(&v) {
        Ok(bytes) => Some(bytes),
        Err(_) => {
            check.fail(format!("{name} must be base64"));
            None
        }
    }
}

/// Sealing context: a sealed envelope opens only in its own row and field.
fn aad(tenant: &str, device: &str, field: &str) -> Vec<u8> {
    format!("hdk_idp_claim/{tenant}/{device}/{field}").into_bytes()
}

async fn upsert(State(state): State<AppState>, Tenant(ctx): Tenant, Body(body): Body<Claim>) -> ApiResult<Response> {
    let mut check = Check::new();
    let device = check.required_uuid("device_uuid", &body.device_uuid);
    let person = check.required_uuid("person_id", &body.person_id);
    let biometric = decode(&mut check, "biometric_template_envelope", &body.biometric_template_envelope);
    let pin = decode(&mut check, "pin_envelope", &body.pin_envelope);
    check.finish()?;
    let (device, person) = (device.expect("checked").to_string(), person.expect("checked").to_string());
    let sealed_bio = biometric.map(|b| state.master.seal(&b, &aad(&ctx.tenant_id, &device, "biometric")));
    let sealed_pin = pin.map(|p| state.master.seal(&p, &aad(&ctx.tenant_id, &device, "pin")));
    let now = db::now();
    let mut tx = state.db.begin().await?;
    let existed: Option<String> = sqlx::query_scalar("SELECT person_id FROM hdk_idp_claim WHERE tenant_id = $1 AND device_uuid = $2")
        .bind(&ctx.tenant_id)
        .bind(&device)
        .fetch_optional(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO hdk_idp_claim (tenant_id, device_uuid, person_id, biometric_envelope, pin_envelope, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $6) ON CONFLICT (tenant_id, device_uuid) DO UPDATE SET person_id = excluded.person_id, \
         biometric_envelope = excluded.biometric_envelope, pin_envelope = excluded.pin_envelope, updated_at = excluded.updated_at",
    )
    .bind(&ctx.tenant_id)
    .bind(&device)
    .bind(&person)
    .bind(&sealed_bio)
    .bind(&sealed_pin)
    .bind(&now)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    let data = claim_json(&state, &ctx.tenant_id, &device).await?;
    Ok(if existed.is_some() { ok(data) } else { created(data) })
}

async fn claim_json(state: &AppState, tenant_id: &str, device: &str) -> ApiResult<serde_json::Value> {
    let r =
        sqlx::query("SELECT person_id, biometric_envelope, pin_envelope, created_at, updated_at FROM hdk_idp_claim WHERE tenant_id = $1 AND device_uuid = $2")
            .bind(tenant_id)
            .bind(device)
            .fetch_optional(&state.db.read)
            .await?
            .ok_or(ApiError::NotFound)?;
    Ok(json!({
        "device_uuid": device,
        "person_id": r.try_get::<String, _>("person_id")?,
        "has_biometric_template": r.try_get::<Option<Vec<u8>>, _>("biometric_envelope")?.is_some(),
        "has_pin": r.try_get::<Option<Vec<u8>>, _>("pin_envelope")?.is_some(),
        "created_at": r.try_get::<String, _>("created_at")?,
        "updated_at": r.try_get::<String, _>("updated_at")?,
    }))
}

#[derive(Deserialize)]
struct ByDevice {
    device_uuid: Option<String>,
}

async fn get_claim(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<ByDevice>) -> ApiResult<Response> {
    let mut check = Check::new();
    let device = check.required_uuid("device_uuid", &q.device_uuid);
    check.finish()?;
    Ok(ok(claim_json(&state, &ctx.tenant_id, &device.expect("checked").to_string()).await?))
}
