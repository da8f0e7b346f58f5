//! hdk-idp: device identity claims binding a device to a person, with
//! optional biometric-template and PIN envelopes sealed at rest. A claim
//! with neither credential is accepted. The envelopes are never returned.

use axum::response::IntoResponse;
use base64::Engine;

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(upsert, get_claim, remove))
}

/// A claim as its tenant sees it: whether envelopes are held, never them.
#[derive(Debug, FromRow, Serialize, ToSchema)]
struct ClaimRow {
    device_uuid: Id,
    person_id: Id,
    #[sqlx(try_from = "i64")]
    has_biometric_template: Flag,
    #[sqlx(try_from = "i64")]
    has_pin: Flag,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const COLUMNS: &str = "device_uuid, person_id, \
     CAST(CASE WHEN biometric_envelope IS NULL THEN 0 ELSE 1 END AS BIGINT) AS has_biometric_template, \
     CAST(CASE WHEN pin_envelope IS NULL THEN 0 ELSE 1 END AS BIGINT) AS has_pin, created_at, updated_at";

#[derive(Deserialize, ToSchema)]
struct Claim {
    #[schema(format = "uuid")]
    device_uuid: String,
    /// The person the device is bound to.
    #[schema(format = "uuid")]
    person_id: String,
    /// Base64.
    biometric_template_envelope: Option<String>,
    /// Base64.
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

/// Binds a device to a person, with optional sealed credential envelopes
/// (base64); 201 for a new claim, 200 when it replaces the device's claim.
#[utoipa::path(post, path = "/api/hdk/idp/claims", tag = "hdk-idp", request_body = Claim,
    extensions(("x-concurrency" = json!({ "outcome": "first-creates", "events": 0, "given": [],
        "body": { "device_uuid": "{unique}", "person_id": "{person_id}" } }))),
    responses((status = 201, description = "a new claim", body = Data<ClaimRow>), (status = 200, description = "the device's claim, replaced", body = Data<ClaimRow>)))]
async fn upsert(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<Claim>) -> ApiResult<Response> {
    let body = body.checked()?;
    let mut check = Check::new();
    let device = check.required_uuid("device_uuid", &Some(body.device_uuid));
    let person = check.required_uuid("person_id", &Some(body.person_id));
    let biometric = decode(&mut check, "biometric_template_envelope", &body.biometric_template_envelope);
    let pin = decode(&mut check, "pin_envelope", &body.pin_envelope);
    check.finish()?;
    let (device, person) = (device.expect("checked").to_string(), person.expect("checked").to_string());
    let sealed_bio = biometric.map(|b| state.master.seal(&b, &aad(&ctx.tenant_id, &device, "biometric")));
    let sealed_pin = pin.map(|p| state.master.seal(&p, &aad(&ctx.tenant_id, &device, "pin")));
    let mut tx = state.db.begin().await?;
    // The device's first claim inserts it (201); any other, concurrent or
    // later, finds it and replaces it (200).
    let now = db::now();
    let insert = format!(
        "INSERT INTO hdk_idp_claim (tenant_id, device_uuid, person_id, biometric_envelope, pin_envelope, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $6) ON CONFLICT (tenant_id, device_uuid) DO NOTHING RETURNING {COLUMNS}"
    );
    let replace = format!(
        "UPDATE hdk_idp_claim SET person_id = $3, biometric_envelope = $4, pin_envelope = $5, updated_at = $6 \
         WHERE tenant_id = $1 AND device_uuid = $2 RETURNING {COLUMNS}"
    );
    let (claim, written): (ClaimRow, _) = insert_or_read(
        &mut tx,
        sqlx::query_as(sqlx::AssertSqlSafe(insert)).bind(&ctx.tenant_id).bind(&device).bind(&person).bind(&sealed_bio).bind(&sealed_pin).bind(&now),
        sqlx::query_as(sqlx::AssertSqlSafe(replace)).bind(&ctx.tenant_id).bind(&device).bind(&person).bind(&sealed_bio).bind(&sealed_pin).bind(&now),
    )
    .await?;
    tx.commit().await?;
    Ok(if written == Written::Found { ok(claim).into_response() } else { created(claim).into_response() })
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ByDevice {
    /// The device.
    #[param(format = "uuid")]
    device_uuid: String,
}

/// The claim of a device (404 when it has none).
#[utoipa::path(get, path = "/api/hdk/idp/claims", tag = "hdk-idp", params(ByDevice),
    responses((status = 200, description = "the device's claim", body = Data<ClaimRow>), (status = 404, description = "no claim")))]
async fn get_claim(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<ByDevice>) -> ApiResult<Data<ClaimRow>> {
    let sql = format!("SELECT {COLUMNS} FROM hdk_idp_claim WHERE tenant_id = $1 AND device_uuid = $2");
    let claim: ClaimRow = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(canonical_uuid(&q.device_uuid))
        .fetch_optional(&state.db.read)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(ok(claim))
}

/// What removing a claim answers.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = HdkIdpClaimRemoved)]
struct Removed {
    #[schema(format = "uuid")]
    device_uuid: String,
    #[schema(format = "uuid")]
    person_id: String,
    /// Always `true`: the claim and its sealed envelopes are erased.
    deleted: bool,
}

/// Removes a device's claim (a lost or reassigned device): the row and its
/// sealed biometric and PIN envelopes are erased, not archived; the event
/// `device.idp_claim.removed.v1` keeps who and when. 404 when the device
/// has no claim.
#[utoipa::path(delete, path = "/api/hdk/idp/claims", tag = "hdk-idp", params(ByDevice),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404,
        "given": [["POST", "/api/hdk/idp/claims", { "device_uuid": "{unique}", "person_id": "{person_id}" }]],
        "query": "device_uuid={device_uuid}" }))),
    responses((status = 200, description = "the claim, erased", body = Data<Removed>), (status = 404, description = "no claim")))]
async fn remove(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<ByDevice>) -> ApiResult<Data<Removed>> {
    let mut check = Check::new();
    let device = check.required_uuid("device_uuid", &Some(q.device_uuid));
    check.finish()?;
    let device = device.expect("checked").to_string();
    let mut tx = state.db.begin().await?;
    let person: String = sqlx::query_scalar("DELETE FROM hdk_idp_claim WHERE tenant_id = $1 AND device_uuid = $2 RETURNING person_id")
        .bind(&ctx.tenant_id)
        .bind(&device)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(ApiError::NotFound)?;
    audit::record(&mut tx, &ctx, events::DEVICE_IDP_CLAIM_REMOVED, json!({ "device_uuid": device, "person_id": person })).await?;
    tx.commit().await?;
    Ok(ok(Removed { device_uuid: device, person_id: person, deleted: true }))
}
