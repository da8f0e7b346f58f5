//! sdk-device: device registration (upsert on device_uuid), attestation
//! verified by the hub against a challenge it issued, device-person links
//! and revocation.

use axum::response::IntoResponse;
use serde::Serializer;

use hub_kernel::crypto;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(register, list_devices))
        .routes(routes!(get_one))
        .routes(routes!(challenge))
        .routes(routes!(attest))
        .routes(routes!(attestations))
        .routes(routes!(link_person))
        .routes(routes!(persons))
        .routes(routes!(revoke_link))
        .routes(routes!(suspend_link))
        .routes(routes!(revoke))
}

stored_enum! {
    /// A device's platform.
    #[schema(as = DevicePlatform)]
    enum DevicePlatform { Ios = "ios", Android = "android", Web = "web", Desktop = "desktop" }
}

stored_enum! {
    /// Why a device is revoked; it becomes its status.
    #[schema(as = DeviceRevocationReason)]
    enum DeviceRevocationReason { Revoked = "revoked", Stolen = "stolen" }
}

stored_enum! {
    /// Whether a device is in use: `revoked` or `stolen` once revoked.
    #[schema(as = DeviceStatus)]
    enum DeviceStatus { Active = "active", Revoked = "revoked", Stolen = "stolen" }
}

impl From<DeviceRevocationReason> for DeviceStatus {
    fn from(reason: DeviceRevocationReason) -> Self {
        match reason {
            DeviceRevocationReason::Revoked => DeviceStatus::Revoked,
            DeviceRevocationReason::Stolen => DeviceStatus::Stolen,
        }
    }
}

stored_enum! {
    /// An attestation method (`device_core::attestation::METHODS`).
    #[schema(as = AttestationMethod)]
    enum AttestationMethod {
        SecureEnclave = "secure-enclave",
        KeyAttestation = "key-attestation",
        AppAttest = "app-attest",
        PlayIntegrity = "play-integrity",
    }
}

stored_enum! {
    /// Whether a person's link to a device holds.
    #[schema(as = DevicePersonLinkStatus)]
    enum LinkStatus { Active = "active", Suspended = "suspended", Revoked = "revoked" }
}

/// How long a hub-issued attestation challenge stays usable.
const CHALLENGE_TTL_SECONDS: i64 = 300;

/// A device of a tenant. The pinned attestation key is answered only as
/// whether there is one (`attested`).
#[derive(Debug, FromRow, Serialize, ToSchema)]
struct Device {
    device_uuid: Id,
    tenant_id: String,
    platform: DevicePlatform,
    os_version: Option<String>,
    app_version: Option<String>,
    device_key_ref: Option<String>,
    /// Whether a key is pinned by a verified attestation (never the key).
    #[serde(rename = "attested", serialize_with = "is_some")]
    #[schema(value_type = bool)]
    attested_public_key: Option<String>,
    status: DeviceStatus,
    last_seen_at: Timestamp,
    created_at: Timestamp,
}

const COLUMNS: &str = "device_uuid, tenant_id, platform, os_version, app_version, device_key_ref, attested_public_key, status, last_seen_at, created_at";
const DEVICES: Listing = Listing {
    table: "platform_device",
    columns: COLUMNS,
    filter: "tenant_id = $1 AND ($2 = '' OR platform = $2) AND ($3 = '' OR status = $3) AND ($4 = '' OR EXISTS (SELECT 1 FROM platform_device_person l \
             WHERE l.tenant_id = platform_device.tenant_id AND l.device_uuid = platform_device.device_uuid AND l.person_id = $4 AND l.status = 'active'))",
    order: "created_at DESC, device_uuid DESC",
};

fn is_some<S: Serializer>(value: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bool(value.is_some())
}

/// A registration's answer: the device, and whether this call created it.
#[derive(Serialize, ToSchema)]
struct DeviceRegistered {
    #[serde(flatten)]
    device: Device,
    created: bool,
}

/// A hub-issued challenge as its device is told it.
#[derive(Debug, FromRow, Serialize, ToSchema)]
struct AttestationChallenge {
    device_uuid: Id,
    /// To sign in the attestation envelope; usable once, for 300 seconds.
    challenge: String,
    expires_at: Timestamp,
}

/// An attestation as recorded, with the hub's verdict.
#[derive(Debug, FromRow, Serialize, ToSchema)]
struct DeviceAttestation {
    attestation_id: Id,
    device_uuid: Id,
    method: AttestationMethod,
    /// The hub's verdict.
    #[sqlx(try_from = "i64")]
    verified: Flag,
    /// Why the envelope did not verify.
    failure_reason: Option<String>,
    expires_at: Option<Timestamp>,
    created_at: Timestamp,
}

/// A person linked to a device.
#[derive(Debug, FromRow, Serialize, ToSchema)]
struct DevicePersonLink {
    device_uuid: Id,
    person_id: Id,
    status: LinkStatus,
    linked_at: Timestamp,
    updated_at: Timestamp,
}

const LINK_COLUMNS: &str = "device_uuid, person_id, status, linked_at, updated_at";
const LINKS: Listing = Listing {
    table: "platform_device_person",
    columns: LINK_COLUMNS,
    filter: "tenant_id = $1 AND device_uuid = $2 AND ($3 = '' OR status = $3)",
    order: "linked_at, person_id",
};
const ATTESTATION_COLUMNS: &str = "attestation_id, device_uuid, method, verified, failure_reason, expires_at, created_at";
const ATTESTATIONS: Listing = Listing {
    table: "platform_device_attestation",
    columns: ATTESTATION_COLUMNS,
    filter: "tenant_id = $1 AND device_uuid = $2 AND ($3 = '' OR method = $3)",
    order: "created_at DESC, attestation_id DESC",
};

/// The caller's tenant's device (404 otherwise).
async fn find<'e, E>(exec: E, tenant_id: &str, device_uuid: &str) -> ApiResult<Device>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT {COLUMNS} FROM platform_device WHERE tenant_id = $1 AND device_uuid = $2")))
        .bind(tenant_id)
        .bind(device_uuid)
        .fetch_optional(exec)
        .await?
        .ok_or(ApiError::NotFound)
}

/// Whether the caller's tenant has registered this device.
pub async fn registered<'e, E>(exec: E, tenant_id: &str, device_uuid: &str) -> ApiResult<bool>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let found: Option<String> = sqlx::query_scalar("SELECT status FROM platform_device WHERE tenant_id = $1 AND device_uuid = $2")
        .bind(tenant_id)
        .bind(device_uuid)
        .fetch_optional(exec)
        .await?;
    Ok(found.is_some())
}

/// The tenant whose word counts for a device that several tenants may have
/// registered: `tenant_id` when given (if it registered the device), or
/// else the first to register it. `None` when no such tenant has.
pub async fn registrant<'e, E>(exec: E, device_uuid: &str, tenant_id: Option<&str>) -> ApiResult<Option<String>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    Ok(sqlx::query_scalar(
        "SELECT tenant_id FROM platform_device WHERE device_uuid = $1 AND ($2 = '' OR tenant_id = $2) ORDER BY created_at, tenant_id LIMIT 1",
    )
    .bind(device_uuid)
    .bind(tenant_id.unwrap_or_default())
    .fetch_optional(exec)
    .await?)
}

#[derive(Deserialize, ToSchema)]
struct DeviceRegistration {
    #[schema(format = "uuid")]
    device_uuid: String,
    #[schema(inline)]
    platform: DevicePlatform,
    os_version: Option<String>,
    app_version: Option<String>,
    device_key_ref: Option<String>,
}

/// Registers a device of the caller's tenant, or re-registers it.
///
/// On a re-registration os_version, app_version and last_seen_at are
/// updated, an omitted device_key_ref keeps the stored one, and a revoked
/// or stolen device stays so.
#[utoipa::path(post, path = "/api/devices", tag = "sdk-device", request_body = DeviceRegistration,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "device_uuid": "{unique}", "platform": "ios" } }))),
    responses((status = 201, description = "the device, and whether this call created it", body = Data<DeviceRegistered>)))]
async fn register(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<DeviceRegistration>) -> ApiResult<Created<DeviceRegistered>> {
    let body = body.checked()?;
    let device = path_id(&body.device_uuid)?.to_string();
    let platform = body.platform;
    let now = db::now();
    let mut tx = state.db.begin().await?;
    // The first registration inserts the device; any other, concurrent or
    // later, finds it and refreshes what a re-registration updates, so
    // exactly one call answers `created: true`.
    let insert = format!(
        "INSERT INTO platform_device (tenant_id, device_uuid, platform, os_version, app_version, device_key_ref, status, last_seen_at, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, 'active', $7, $7) ON CONFLICT (tenant_id, device_uuid) DO NOTHING RETURNING {COLUMNS}"
    );
    let again = format!(
        "UPDATE platform_device SET os_version = $3, app_version = $4, last_seen_at = $6, device_key_ref = COALESCE($5, device_key_ref) \
         WHERE tenant_id = $1 AND device_uuid = $2 RETURNING {COLUMNS}"
    );
    let (os_version, app_version, key_ref) = (Check::optional(&body.os_version), Check::optional(&body.app_version), Check::optional(&body.device_key_ref));
    let (device, written): (Device, _) = insert_or_read(
        &mut tx,
        sqlx::query_as(sqlx::AssertSqlSafe(insert))
            .bind(&ctx.tenant_id)
            .bind(&device)
            .bind(platform)
            .bind(&os_version)
            .bind(&app_version)
            .bind(&key_ref)
            .bind(&now),
        sqlx::query_as(sqlx::AssertSqlSafe(again)).bind(&ctx.tenant_id).bind(&device).bind(&os_version).bind(&app_version).bind(&key_ref).bind(&now),
    )
    .await?;
    let existed = written == Written::Found;
    let payload = json!({ "device_uuid": device.device_uuid, "platform": platform, "created": !existed });
    audit::record(&mut tx, &ctx, events::DEVICE_REGISTERED, payload).await?;
    tx.commit().await?;
    Ok(created(DeviceRegistered { device, created: !existed }))
}

/// A device of the caller's tenant.
#[utoipa::path(get, path = "/api/devices/{device_uuid}", tag = "sdk-device", params(("device_uuid" = String, Path, description = "the device")),
    responses((status = 200, description = "the device", body = Data<Device>)))]
async fn get_one(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Device>> {
    let id = path_id(&id)?.to_string();
    Ok(ok(find(&state.db.read, &ctx.tenant_id, &id).await?))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct DeviceFilter {
    /// Only devices of this platform.
    #[param(inline)]
    platform: Option<DevicePlatform>,
    /// Only devices in this status.
    #[param(inline)]
    status: Option<DeviceStatus>,
    /// Only devices this person has an active link to.
    #[param(format = "uuid")]
    person_id: Option<String>,
}

/// The caller's tenant's devices, newest first.
#[utoipa::path(get, path = "/api/devices", tag = "sdk-device", params(DeviceFilter, Page),
    responses((status = 200, description = "a page of devices", body = ListOf<Device>)))]
async fn list_devices(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<DeviceFilter>, page: Page) -> ApiResult<ListOf<Device>> {
    let platform = q.platform.map_or("", DevicePlatform::as_str);
    let status = q.status.map_or("", DeviceStatus::as_str);
    let person = q.person_id.as_deref().map(canonical_uuid).unwrap_or_default();
    page.list::<Device>(&state.db.read, &DEVICES, &[&ctx.tenant_id, platform, status, &person]).await
}

/// Issues a single-use attestation challenge for the device to sign.
#[utoipa::path(post, path = "/api/devices/{device_uuid}/challenge", tag = "sdk-device", params(("device_uuid" = String, Path, description = "the device")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "events": 0, "given": [["POST", "/api/devices", { "device_uuid": "{unique}", "platform": "ios" }]] }))),
    responses((status = 201, description = "the challenge", body = Data<AttestationChallenge>)))]
async fn challenge(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Created<AttestationChallenge>> {
    let id = path_id(&id)?.to_string();
    if !registered(&state.db.read, &ctx.tenant_id, &id).await? {
        return Err(ApiError::NotFound);
    }
    let expires_at = db::format_time(chrono::Utc::now() + chrono::Duration::seconds(CHALLENGE_TTL_SECONDS));
    let issued: AttestationChallenge = sqlx::query_as(
        "INSERT INTO platform_device_challenge (challenge, tenant_id, device_uuid, expires_at, created_at) VALUES ($1, $2, $3, $4, $5) \
         RETURNING device_uuid, challenge, expires_at",
    )
    .bind(crypto::random_base62(32))
    .bind(&ctx.tenant_id)
    .bind(&id)
    .bind(&expires_at)
    .bind(db::now())
    .fetch_one(state.db.writer())
    .await?;
    Ok(created(issued))
}

#[derive(Deserialize, ToSchema)]
struct NewDeviceAttestation {
    /// The method the envelope names.
    #[schema(inline)]
    method: AttestationMethod,
    /// The envelope device-core builds, carrying its challenge: an object,
    /// or its JSON text (a string).
    #[schema(value_type = Value)]
    signature_envelope: Value,
    #[schema(format = DateTime)]
    expires_at: Option<String>,
    /// Accepted for compatibility and ignored: the hub decides.
    #[allow(dead_code)]
    verified: Option<Value>,
}

/// Records an attestation of the device, verified by the hub.
///
/// The hub verifies the envelope itself (P-256 signature over a challenge
/// it issued, by the key pinned at the device's first verified
/// attestation); `verified` in the body is ignored. A failed verification
/// is recorded too, with its reason.
#[utoipa::path(post, path = "/api/devices/{device_uuid}/attest", tag = "sdk-device", params(("device_uuid" = String, Path, description = "the device")),
    request_body = NewDeviceAttestation,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [
        ["POST", "/api/devices", { "device_uuid": "{unique}", "platform": "ios" }],
        ["POST", "/api/devices/{device_uuid}/challenge", null]],
        "body": { "method": "secure-enclave", "signature_envelope": { "challenge": "{challenge}" } } }))),
    responses((status = 201, description = "the attestation and the hub's verdict", body = Data<DeviceAttestation>)))]
async fn attest(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    body: Body<NewDeviceAttestation>,
) -> ApiResult<Created<DeviceAttestation>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let pinned = find(&mut *tx, &ctx.tenant_id, &id).await?.attested_public_key;
    let body = body.checked()?;
    let mut check = Check::new();
    let method = body.method;
    let envelope = match &body.signature_envelope {
        Value::String(s) if !s.trim().is_empty() => s.clone(),
        v @ Value::Object(_) => v.to_string(),
        _ => {
            check.fail("signature_envelope is required (the attestation envelope, as an object or JSON text)");
            String::new()
        }
    };
    let expires_at = check.optional_expiry("expires_at", &body.expires_at);
    check.finish()?;
    let claimed_challenge = serde_json::from_str::<Value>(&envelope)
        .ok()
        .and_then(|v| v.get("challenge").and_then(Value::as_str).map(str::to_string))
        .ok_or_else(|| ApiError::invalid("signature_envelope must be an attestation envelope carrying its challenge"))?;
    let outcome = verify(&mut tx, &ctx.tenant_id, &id, method.as_str(), &envelope, &claimed_challenge, pinned.as_deref()).await?;
    let mut outcome = outcome;
    if let (Ok(key), None) = (&outcome, &pinned) {
        // The first verified key is pinned in one guarded statement: of two
        // first attestations at once, the one that pins second is checked
        // against the key the other pinned.
        let pinned_now =
            sqlx::query("UPDATE platform_device SET attested_public_key = $1 WHERE tenant_id = $2 AND device_uuid = $3 AND attested_public_key IS NULL")
                .bind(key)
                .bind(&ctx.tenant_id)
                .bind(&id)
                .execute(&mut *tx)
                .await?;
        if pinned_now.rows_affected() == 0 && find(&mut *tx, &ctx.tenant_id, &id).await?.attested_public_key.as_deref() != Some(key.as_str()) {
            outcome = Err("the envelope is signed by a key other than the device's attested key".into());
        }
    }
    let (verified, reason) = match &outcome {
        Ok(_) => (true, None),
        Err(reason) => (false, Some(reason.clone())),
    };
    let attestation: DeviceAttestation = sqlx::query_as(
        "INSERT INTO platform_device_attestation (attestation_id, tenant_id, device_uuid, method, signature_envelope, verified, failure_reason, expires_at, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
         RETURNING attestation_id, device_uuid, method, verified, failure_reason, expires_at, created_at",
    )
    .bind(db::new_id())
    .bind(&ctx.tenant_id)
    .bind(&id)
    .bind(method)
    .bind(&envelope)
    .bind(i64::from(verified))
    .bind(&reason)
    .bind(&expires_at)
    .bind(db::now())
    .fetch_one(&mut *tx)
    .await?;
    let payload = json!({ "attestation_id": attestation.attestation_id, "device_uuid": id, "method": method, "verified": verified, "failure_reason": reason });
    audit::record(&mut tx, &ctx, events::DEVICE_ATTESTED, payload).await?;
    tx.commit().await?;
    Ok(created(attestation))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct AttestationFilter {
    /// Only attestations by this method.
    #[param(inline)]
    method: Option<AttestationMethod>,
}

/// Every attestation of the device, verified or not (with the reason it
/// failed), newest first; never the envelope.
#[utoipa::path(get, path = "/api/devices/{device_uuid}/attestations", tag = "sdk-device",
    params(("device_uuid" = String, Path, description = "the device"), AttestationFilter, Page),
    responses((status = 200, description = "a page of attestations", body = ListOf<DeviceAttestation>)))]
async fn attestations(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    query: Result<Params<AttestationFilter>, ApiError>,
    page: Page,
) -> ApiResult<ListOf<DeviceAttestation>> {
    // Not found comes first, so another tenant's id is never confirmed.
    let id = path_id(&id)?.to_string();
    if !registered(&state.db.read, &ctx.tenant_id, &id).await? {
        return Err(ApiError::NotFound);
    }
    let Params(q) = query?;
    let method = q.method.map_or("", AttestationMethod::as_str);
    page.list::<DeviceAttestation>(&state.db.read, &ATTESTATIONS, &[&ctx.tenant_id, &id, method]).await
}

/// Checks an envelope: its challenge was issued for this device, is unused
/// and unexpired (it is consumed either way), the signature verifies, the
/// envelope names this device and method, and its key is the pinned one.
/// The outer error is a database failure; the inner one why it failed.
async fn verify(
    tx: &mut Tx,
    tenant_id: &str,
    device: &str,
    method: &str,
    envelope: &str,
    challenge: &str,
    pinned: Option<&str>,
) -> ApiResult<Result<String, String>> {
    // The challenge is consumed in one guarded statement: of two
    // attestations carrying it at once, exactly one uses it.
    let consumed: Option<Timestamp> = sqlx::query_scalar(
        "UPDATE platform_device_challenge SET used_at = $4 WHERE challenge = $1 AND tenant_id = $2 AND device_uuid = $3 AND used_at IS NULL RETURNING expires_at",
    )
    .bind(challenge)
    .bind(tenant_id)
    .bind(device)
    .bind(db::now())
    .fetch_optional(&mut **tx)
    .await?;
    let Some(expires_at) = consumed else {
        let issued: Option<String> =
            sqlx::query_scalar("SELECT expires_at FROM platform_device_challenge WHERE challenge = $1 AND tenant_id = $2 AND device_uuid = $3")
                .bind(challenge)
                .bind(tenant_id)
                .bind(device)
                .fetch_optional(&mut **tx)
                .await?;
        return Ok(Err(if issued.is_some() { "the challenge has already been used" } else { "the challenge was not issued for this device" }.into()));
    };
    if expires_at <= Timestamp::now() {
        return Ok(Err("the challenge has expired".into()));
    }
    let verified = match device_core::attestation::verify_attestation(envelope, challenge) {
        Ok(v) => v,
        Err(e) => return Ok(Err(format!("the signature does not verify: {e}"))),
    };
    if verified.device_uuid != device {
        return Ok(Err("the envelope names another device".into()));
    }
    if verified.method != method {
        return Ok(Err("the envelope's method differs from the request's".into()));
    }
    if pinned.is_some_and(|p| p != verified.public_key) {
        return Ok(Err("the envelope is signed by a key other than the device's attested key".into()));
    }
    Ok(Ok(verified.public_key))
}

#[derive(Deserialize, ToSchema)]
struct NewDevicePersonLink {
    /// A member of the caller's tenant.
    #[schema(format = "uuid")]
    person_id: String,
}

/// Links a person (a member of the caller's tenant) to the device.
///
/// Linking again reactivates the link: 200 instead of 201.
#[utoipa::path(post, path = "/api/devices/{device_uuid}/link-person", tag = "sdk-device", params(("device_uuid" = String, Path, description = "the device")),
    request_body = NewDevicePersonLink,
    extensions(("x-concurrency" = json!({ "outcome": "first-creates", "given": [["POST", "/api/devices", { "device_uuid": "{unique}", "platform": "ios" }]],
        "body": { "person_id": "{person_id}" } }))),
    responses((status = 201, description = "a new link", body = Data<DevicePersonLink>), (status = 200, description = "the link, active again", body = Data<DevicePersonLink>)))]
async fn link_person(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<NewDevicePersonLink>) -> ApiResult<Response> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    if !registered(&mut *tx, &ctx.tenant_id, &id).await? {
        return Err(ApiError::NotFound);
    }
    let person = path_id(&body.checked()?.person_id)?.to_string();
    if hub_identity::tenancy::membership_of(&mut *tx, &ctx.tenant_id, &person).await?.is_none() {
        return Err(ApiError::invalid("person_id does not name a member of this tenant"));
    }
    // The first link inserts it (201); any other, concurrent or later,
    // finds it and makes it active again (200).
    let now = db::now();
    let insert = format!(
        "INSERT INTO platform_device_person (tenant_id, device_uuid, person_id, status, linked_at, updated_at) VALUES ($1, $2, $3, 'active', $4, $4) \
         ON CONFLICT (tenant_id, device_uuid, person_id) DO NOTHING RETURNING {LINK_COLUMNS}"
    );
    let again = format!(
        "UPDATE platform_device_person SET status = 'active', updated_at = $4 WHERE tenant_id = $1 AND device_uuid = $2 AND person_id = $3 RETURNING {LINK_COLUMNS}"
    );
    let (link, written): (DevicePersonLink, _) = insert_or_read(
        &mut tx,
        sqlx::query_as(sqlx::AssertSqlSafe(insert)).bind(&ctx.tenant_id).bind(&id).bind(&person).bind(&now),
        sqlx::query_as(sqlx::AssertSqlSafe(again)).bind(&ctx.tenant_id).bind(&id).bind(&person).bind(&now),
    )
    .await?;
    audit::record(&mut tx, &ctx, events::DEVICE_PERSON_LINKED, json!({ "device_uuid": id, "person_id": person })).await?;
    tx.commit().await?;
    Ok(if written == Written::Found { ok(link).into_response() } else { created(link).into_response() })
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct LinkFilter {
    /// Only links in this status.
    #[param(inline)]
    status: Option<LinkStatus>,
}

/// The persons linked to the device, first linked first, a page at a time.
#[utoipa::path(get, path = "/api/devices/{device_uuid}/persons", tag = "sdk-device",
    params(("device_uuid" = String, Path, description = "the device"), LinkFilter, Page),
    responses((status = 200, description = "a page of links", body = ListOf<DevicePersonLink>)))]
async fn persons(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    query: Result<Params<LinkFilter>, ApiError>,
    page: Page,
) -> ApiResult<ListOf<DevicePersonLink>> {
    let id = path_id(&id)?.to_string();
    if !registered(&state.db.read, &ctx.tenant_id, &id).await? {
        return Err(ApiError::NotFound);
    }
    let Params(q) = query?;
    let status = q.status.map_or("", LinkStatus::as_str);
    page.list::<DevicePersonLink>(&state.db.read, &LINKS, &[&ctx.tenant_id, &id, status]).await
}

/// Moves a person's link to the device to `to`, from the states `from`
/// lists, in one guarded statement, recording `event`. A link already in
/// `to` is answered as it is, without an event; a link in another state
/// is 409; no link is 404.
async fn move_link(
    state: &AppState,
    ctx: &TenantCtx,
    device: &str,
    person: &str,
    to: LinkStatus,
    from: &str,
    event: &'static str,
) -> ApiResult<DevicePersonLink> {
    let device = path_id(device)?.to_string();
    let person = path_id(person)?.to_string();
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "UPDATE platform_device_person SET status = $1, updated_at = $2 WHERE tenant_id = $3 AND device_uuid = $4 AND person_id = $5 AND status IN ({from}) \
         RETURNING {LINK_COLUMNS}"
    );
    let moved: Option<DevicePersonLink> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(to).bind(db::now()).bind(&ctx.tenant_id).bind(&device).bind(&person).fetch_optional(&mut *tx).await?;
    let Some(link) = moved else {
        let sql = format!("SELECT {LINK_COLUMNS} FROM platform_device_person WHERE tenant_id = $1 AND device_uuid = $2 AND person_id = $3");
        let link: DevicePersonLink = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(&ctx.tenant_id)
            .bind(&device)
            .bind(&person)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(ApiError::NotFound)?;
        return if link.status == to { Ok(link) } else { Err(ApiError::Conflict(format!("the link is {}: only an active link can be {to}", link.status))) };
    };
    audit::record(&mut tx, ctx, event, json!({ "device_uuid": device, "person_id": person, "status": to })).await?;
    tx.commit().await?;
    Ok(link)
}

/// Revokes a person's link to the device (active or suspended); linking
/// the person again makes it active. Revoking it again answers the same
/// link without a second event.
#[utoipa::path(post, path = "/api/devices/{device_uuid}/persons/{person_id}/revoke", tag = "sdk-device",
    params(("device_uuid" = String, Path, description = "the device"), ("person_id" = String, Path, description = "a person linked to the device")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [
        ["POST", "/api/devices", { "device_uuid": "{unique}", "platform": "ios" }],
        ["POST", "/api/devices/{device_uuid}/link-person", { "person_id": "{person_id}" }]] }))),
    responses((status = 200, description = "the link, revoked", body = Data<DevicePersonLink>)))]
async fn revoke_link(State(state): State<AppState>, Tenant(ctx): Tenant, Path((device, person)): Path<(String, String)>) -> ApiResult<Data<DevicePersonLink>> {
    Ok(ok(move_link(&state, &ctx, &device, &person, LinkStatus::Revoked, "'active', 'suspended'", events::DEVICE_PERSON_UNLINKED).await?))
}

/// Suspends a person's active link to the device; linking the person again
/// makes it active. Suspending it again answers the same link without a
/// second event; a revoked link is 409.
#[utoipa::path(post, path = "/api/devices/{device_uuid}/persons/{person_id}/suspend", tag = "sdk-device",
    params(("device_uuid" = String, Path, description = "the device"), ("person_id" = String, Path, description = "a person linked to the device")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [
        ["POST", "/api/devices", { "device_uuid": "{unique}", "platform": "ios" }],
        ["POST", "/api/devices/{device_uuid}/link-person", { "person_id": "{person_id}" }]] }))),
    responses((status = 200, description = "the link, suspended", body = Data<DevicePersonLink>)))]
async fn suspend_link(State(state): State<AppState>, Tenant(ctx): Tenant, Path((device, person)): Path<(String, String)>) -> ApiResult<Data<DevicePersonLink>> {
    Ok(ok(move_link(&state, &ctx, &device, &person, LinkStatus::Suspended, "'active'", events::DEVICE_PERSON_SUSPENDED).await?))
}

#[derive(Deserialize, ToSchema)]
struct DeviceRevocation {
    #[schema(inline)]
    reason: DeviceRevocationReason,
}

/// Revokes a device: reason `revoked` or `stolen` becomes its status.
/// Revoking it again with the reason it has changes nothing and records
/// no event.
#[utoipa::path(post, path = "/api/devices/{device_uuid}/revoke", tag = "sdk-device", params(("device_uuid" = String, Path, description = "the device")),
    request_body = DeviceRevocation,
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/devices", { "device_uuid": "{unique}", "platform": "ios" }]],
        "body": { "reason": "stolen" } }))),
    responses((status = 200, description = "the device, revoked", body = Data<Device>)))]
async fn revoke(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<DeviceRevocation>) -> ApiResult<Data<Device>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    if !registered(&mut *tx, &ctx.tenant_id, &id).await? {
        return Err(ApiError::NotFound);
    }
    let reason = body.checked()?.reason;
    // One guarded statement: of two revocations with one reason at once,
    // one changes the status (with the event) and the other finds it so
    // and answers the device as committed.
    let sql = format!("UPDATE platform_device SET status = $1 WHERE tenant_id = $2 AND device_uuid = $3 AND status <> $1 RETURNING {COLUMNS}");
    let moved: Option<Device> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(DeviceStatus::from(reason)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
    let Some(device) = moved else {
        return Ok(ok(find(&mut *tx, &ctx.tenant_id, &id).await?));
    };
    audit::record(&mut tx, &ctx, events::DEVICE_REVOKED, json!({ "device_uuid": id, "reason": reason })).await?;
    tx.commit().await?;
    Ok(ok(device))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enum_values;

    #[test]
    fn the_documented_methods_are_device_cores() {
        assert_eq!(enum_values::<AttestationMethod>(), device_core::attestation::METHODS);
        assert_eq!(AttestationMethod::ALL.iter().map(|m| m.as_str()).collect::<Vec<_>>(), device_core::attestation::METHODS);
    }
}
