//! "Sovereign regions": regions by natural key, their attestations, the
//! bundle releases signed for them, the applications of a release, and
//! leak alerts.
//!
//! A region's `attestation_state` follows its attestations: `in-progress`
//! with none, `attested` while the latest-expiring one has not expired,
//! `expired` after that (computed when read, so no sweeper is needed).
//!
//! A bundle release carries an Ed25519 signature (RFC 8032) by the
//! operator's release key, whose public half the hub is configured with
//! (`HUB_SOVEREIGN_BUNDLE_PUBLIC_KEY`, 64 hex characters). The signed
//! message is the UTF-8 text
//! `hub-sovereign-bundle-v1\n<bundle_artifact_ref>\n<version>`: the
//! prefix keeps the key's signatures from being valid in another
//! protocol. A release whose signature does not verify is refused.

use aws_lc_rs::signature::{ED25519, UnparsedPublicKey};
use hub_kernel::gate::Operator;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_regions, put_region))
        .routes(routes!(attest))
        .routes(routes!(release))
        .routes(routes!(applied))
        .routes(routes!(leak))
}

stored_enum! {
    /// The regulatory regime a sovereign region runs under.
    #[schema(as = SovereignRegime)]
    enum Regime { FedrampHigh = "fedramp-high", Il5 = "il5", Pipl = "pipl", EuSovereign = "eu-sovereign", UaeTrd = "uae-trd" }
}

stored_enum! {
    /// What a leak alert reports.
    #[schema(as = SovereignLeakKind)]
    enum LeakKind { EgressAttempt = "egress-attempt", CrossRegionRoute = "cross-region-route", PolicyViolation = "policy-violation" }
}

stored_enum! {
    /// How bad a leak alert is.
    #[schema(as = SovereignLeakSeverity)]
    enum Severity { Info = "info", Warn = "warn", Critical = "critical" }
}

stored_enum! {
    /// Where a region's attestations leave it: `in-progress` with none,
    /// `attested` until the latest expiry, `expired` after it.
    #[schema(as = SovereignAttestationState)]
    enum AttestationState { InProgress = "in-progress", Attested = "attested", Expired = "expired" }
}

stored_enum! {
    /// Where a bundle release stands: `released`, then `applied`.
    #[schema(as = SovereignReleaseStatus)]
    enum ReleaseStatus { Released = "released", Applied = "applied" }
}

/// The message a bundle release's signature covers.
pub fn bundle_message(bundle_artifact_ref: &str, version: &str) -> String {
    format!("hub-sovereign-bundle-v1\n{bundle_artifact_ref}\n{version}")
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = SovereignRegion)]
struct Region {
    region_id: String,
    regime: Regime,
    operator_partner: String,
    kms_provider: String,
    /// A region that may not federate onward.
    #[sqlx(try_from = "i64")]
    #[schema(value_type = bool)]
    terminal_federation: Flag,
    attestation_state: AttestationState,
    /// The latest expiry among the region's attestations.
    attested_until: Option<Timestamp>,
    operator_id: String,
    created_at: Timestamp,
    updated_at: Timestamp,
}

/// The region columns; `$1` is now.
const REGION_COLUMNS: &str = "region_id, regime, operator_partner, kms_provider, terminal_federation, \
    CASE WHEN attested_until IS NULL THEN 'in-progress' WHEN attested_until > $1 THEN 'attested' ELSE 'expired' END AS attestation_state, \
    attested_until, operator_id, created_at, updated_at";

async fn region<'e, E: sqlx::Executor<'e, Database = sqlx::Any>>(exec: E, region_id: &str) -> ApiResult<Region> {
    let sql = format!("SELECT {REGION_COLUMNS} FROM sovereign_region WHERE region_id = $2");
    let found: Option<Region> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(db::now()).bind(region_id).fetch_optional(exec).await?;
    found.ok_or(ApiError::Missing("region not found"))
}

/// Every sovereign region, by id (unpaginated).
#[utoipa::path(get, path = "/admin/sovereign/regions", tag = "admin-sovereign",
    responses((status = 200, description = "the regions", body = Data<Vec<Region>>)))]
async fn list_regions(State(state): State<AppState>, _: Operator) -> ApiResult<Data<Vec<Region>>> {
    let sql = format!("SELECT {REGION_COLUMNS} FROM sovereign_region ORDER BY region_id");
    let rows: Vec<Region> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(db::now()).fetch_all(&state.db.read).await?;
    Ok(ok(rows))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = SovereignRegionInput)]
struct RegionInput {
    /// 1–64 of `a-z 0-9 -`.
    #[schema(max_length = 64, pattern = r"^[a-z0-9-]{1,64}$")]
    region_id: String,
    regime: Regime,
    #[schema(max_length = 200)]
    operator_partner: String,
    #[schema(max_length = 200)]
    kms_provider: String,
    #[schema(max_length = 200)]
    operator_id: String,
    /// Default false; omitted on a re-post, it keeps its value.
    terminal_federation: Option<bool>,
}

/// Registers a region, or updates it when its id is known (no 409).
#[utoipa::path(post, path = "/admin/sovereign/regions", tag = "admin-sovereign", request_body = RegionInput,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "region_id": "r-{unique}", "regime": "il5", "operator_partner": "race", "kms_provider": "race", "operator_id": "ops-race" } }))),
    responses((status = 200, description = "the region", body = Data<Region>)))]
async fn put_region(State(state): State<AppState>, Operator(who): Operator, body: Body<RegionInput>) -> ApiResult<Data<Region>> {
    let body = body.checked()?;
    static REGION_ID: Pattern = Pattern::of::<RegionInput>("region_id");
    let id = body.region_id.as_str();
    if !REGION_ID.is_match(id) {
        return Err(ApiError::invalid("region_id must be 1 to 64 of a-z, 0-9 or '-'"));
    }
    let regime = body.regime;
    let (partner, kms, operator_id) = (body.operator_partner.trim(), body.kms_provider.trim(), body.operator_id.trim());
    let terminal = body.terminal_federation.map(i64::from);
    let now = db::now();
    let mut tx = state.db.begin().await?;
    sqlx::query(
        "INSERT INTO sovereign_region (region_id, regime, operator_partner, kms_provider, terminal_federation, operator_id, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, COALESCE($5, 0), $6, $7, $7) ON CONFLICT (region_id) DO UPDATE SET regime = excluded.regime, \
         operator_partner = excluded.operator_partner, kms_provider = excluded.kms_provider, \
         terminal_federation = COALESCE($8, sovereign_region.terminal_federation), operator_id = excluded.operator_id, updated_at = excluded.updated_at",
    )
    .bind(id)
    .bind(regime)
    .bind(partner)
    .bind(kms)
    .bind(terminal)
    .bind(operator_id)
    .bind(&now)
    .bind(terminal)
    .execute(&mut *tx)
    .await?;
    let saved = region(&mut *tx, id).await?;
    let payload = json!({ "region_id": id, "regime": regime, "terminal_federation": saved.terminal_federation, "operator_id": operator_id });
    audit::record_operator(&mut tx, &who, events::SOVEREIGN_REGION_REGISTERED, payload).await?;
    tx.commit().await?;
    Ok(ok(saved))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = SovereignAttestation)]
struct Attestation {
    attestation_id: Id,
    region_id: String,
    regime: Regime,
    auditor_id: String,
    issued_at: Timestamp,
    expires_at: Timestamp,
    artifact_ref: String,
    recorded_at: Timestamp,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewSovereignAttestation)]
struct NewAttestation {
    /// The region's regime.
    regime: Regime,
    #[schema(max_length = 200)]
    auditor_id: String,
    #[schema(format = DateTime)]
    issued_at: String,
    /// After `issued_at`.
    #[schema(format = DateTime)]
    expires_at: String,
    #[schema(max_length = 1000)]
    artifact_ref: String,
}

/// Records an attestation of a region; the region is `attested` until
/// the latest expiry of its attestations.
#[utoipa::path(post, path = "/admin/sovereign/regions/{region_id}/attestations", tag = "admin-sovereign", request_body = NewAttestation,
    params(("region_id" = String, Path, description = "the region")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/admin/sovereign/regions", { "region_id": "r-{unique}", "regime": "il5", "operator_partner": "race", "kms_provider": "race", "operator_id": "ops-race" }]], "body": { "regime": "il5", "auditor_id": "race", "issued_at": "2026-01-01T00:00:00Z", "expires_at": "2030-01-01T00:00:00Z", "artifact_ref": "race" } }))),
    responses((status = 201, description = "the attestation", body = Data<Attestation>)))]
async fn attest(
    State(state): State<AppState>,
    Operator(who): Operator,
    Path(region_id): Path<String>,
    body: Body<NewAttestation>,
) -> ApiResult<Created<Attestation>> {
    let mut tx = state.db.begin().await?;
    let target = region(&mut *tx, &region_id).await?;
    let body = body.checked()?;
    let regime = body.regime;
    let (auditor, artifact) = (body.auditor_id.trim(), body.artifact_ref.trim());
    let (issued, expires) = (crate::fields::time("issued_at", &body.issued_at)?, crate::fields::time("expires_at", &body.expires_at)?);
    if expires <= issued {
        return Err(ApiError::invalid("expires_at must be after issued_at"));
    }
    let (issued, expires) = (Timestamp(issued), Timestamp(expires));
    if target.regime != regime {
        return Err(ApiError::invalid(format!("regime must be the region's ({})", target.regime)));
    }
    let now = db::now();
    let made: Attestation = sqlx::query_as(
        "INSERT INTO sovereign_attestation (attestation_id, region_id, regime, auditor_id, issued_at, expires_at, artifact_ref, recorded_by, recorded_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
         RETURNING attestation_id, region_id, regime, auditor_id, issued_at, expires_at, artifact_ref, recorded_at",
    )
    .bind(db::new_id())
    .bind(&region_id)
    .bind(regime)
    .bind(auditor)
    .bind(issued)
    .bind(expires)
    .bind(artifact)
    .bind(&*who)
    .bind(&now)
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE sovereign_region SET attested_until = CASE WHEN attested_until IS NULL OR attested_until < $2 THEN $2 ELSE attested_until END, \
         updated_at = $3 WHERE region_id = $1",
    )
    .bind(&region_id)
    .bind(expires)
    .bind(&now)
    .execute(&mut *tx)
    .await?;
    let payload = json!({ "attestation_id": made.attestation_id, "region_id": region_id, "regime": regime, "auditor_id": auditor, "expires_at": expires });
    audit::record_operator(&mut tx, &who, events::SOVEREIGN_ATTESTATION_RECORDED, payload).await?;
    tx.commit().await?;
    Ok(created(made))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = SovereignBundleRelease)]
struct Release {
    release_id: Id,
    region_id: String,
    version: String,
    bundle_artifact_ref: String,
    /// The verified Ed25519 signature, hex.
    signature: String,
    status: ReleaseStatus,
    released_at: Timestamp,
    applied_at: Option<Timestamp>,
}

const RELEASE_COLUMNS: &str = "release_id, region_id, version, bundle_artifact_ref, signature, status, released_at, applied_at";

#[derive(Deserialize, ToSchema)]
#[schema(as = NewSovereignBundleRelease)]
struct NewRelease {
    /// One release per version and region.
    #[schema(max_length = 64)]
    version: String,
    #[schema(max_length = 1000)]
    bundle_artifact_ref: String,
    /// The Ed25519 signature of the release message: 128 hex characters.
    #[schema(pattern = r"^[0-9A-Fa-f]{128}$")]
    signature_hex: String,
}

/// Releases a signed bundle to a region, once its signature verifies
/// against the configured release key.
#[utoipa::path(post, path = "/admin/sovereign/regions/{region_id}/bundles", tag = "admin-sovereign", request_body = NewRelease,
    params(("region_id" = String, Path, description = "the region")),
    extensions(("x-concurrency" = json!({ "outcome": "exempt", "reason": "a release carries an Ed25519 signature by the operator release key, which the race hub is not configured with (HUB_SOVEREIGN_BUNDLE_PUBLIC_KEY): every release answers 503" }))),
    responses((status = 201, description = "the release", body = Data<Release>),
        (status = 503, description = "Unavailable: no release key is configured (HUB_SOVEREIGN_BUNDLE_PUBLIC_KEY)", body = ErrorBody)))]
async fn release(State(state): State<AppState>, Operator(who): Operator, Path(region_id): Path<String>, body: Body<NewRelease>) -> ApiResult<Created<Release>> {
    let mut tx = state.db.begin().await?;
    region(&mut *tx, &region_id).await?;
    let body = body.checked()?;
    let (version, artifact) = (body.version.trim(), body.bundle_artifact_ref.trim());
    static SIGNATURE_HEX: Pattern = Pattern::of::<NewRelease>("signature_hex");
    let signature = match hex::decode(&body.signature_hex) {
        Ok(bytes) if SIGNATURE_HEX.is_match(&body.signature_hex) => bytes,
        _ => return Err(ApiError::invalid("signature_hex must be 128 hexadecimal characters (an Ed25519 signature)")),
    };
    let key = state
        .config
        .sovereign_bundle_public_key
        .as_deref()
        .and_then(|k| hex::decode(k).ok())
        .ok_or(ApiError::Unavailable("no sovereign bundle release key is configured (HUB_SOVEREIGN_BUNDLE_PUBLIC_KEY)"))?;
    if UnparsedPublicKey::new(&ED25519, &key).verify(bundle_message(artifact, version).as_bytes(), &signature).is_err() {
        return Err(ApiError::invalid("signature_hex does not verify: it must be the release key's Ed25519 signature of the bundle_artifact_ref and version"));
    }
    let sql = format!(
        "INSERT INTO sovereign_release (release_id, region_id, version, bundle_artifact_ref, signature, status, released_by, released_at) \
         VALUES ($1, $2, $3, $4, $5, 'released', $6, $7) ON CONFLICT (region_id, version) DO NOTHING RETURNING {RELEASE_COLUMNS}"
    );
    let made: Option<Release> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&region_id)
        .bind(version)
        .bind(artifact)
        .bind(hex::encode(&signature))
        .bind(&*who)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let made = made.ok_or_else(|| ApiError::Conflict(format!("the region has a release of version {version}")))?;
    let payload = json!({ "release_id": made.release_id, "region_id": region_id, "version": version, "bundle_artifact_ref": artifact });
    audit::record_operator(&mut tx, &who, events::SOVEREIGN_BUNDLE_RELEASED, payload).await?;
    tx.commit().await?;
    Ok(created(made))
}

/// Marks a release applied in its region; a repeat answers the release
/// as it is.
#[utoipa::path(post, path = "/admin/sovereign/bundles/{release_id}/applied", tag = "admin-sovereign",
    params(("release_id" = String, Path, description = "the release")),
    extensions(("x-concurrency" = json!({ "outcome": "exempt", "reason": "it needs a bundle release, which only the signed release route makes, and the race hub has no release key (HUB_SOVEREIGN_BUNDLE_PUBLIC_KEY) to accept one" }))),
    responses((status = 200, description = "the release", body = Data<Release>)))]
async fn applied(State(state): State<AppState>, Operator(who): Operator, Path(id): Path<String>) -> ApiResult<Data<Release>> {
    let id = path_id(&id).map_err(|_| ApiError::Missing("release not found"))?.to_string();
    let mut tx = state.db.begin().await?;
    let sql =
        format!("UPDATE sovereign_release SET status = 'applied', applied_at = $2 WHERE release_id = $1 AND status = 'released' RETURNING {RELEASE_COLUMNS}");
    let moved: Option<Release> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&id).bind(db::now()).fetch_optional(&mut *tx).await?;
    let release = match moved {
        Some(r) => {
            let payload = json!({ "release_id": r.release_id, "region_id": r.region_id, "version": r.version });
            audit::record_operator(&mut tx, &who, events::SOVEREIGN_BUNDLE_APPLIED, payload).await?;
            r
        }
        None => {
            let sql = format!("SELECT {RELEASE_COLUMNS} FROM sovereign_release WHERE release_id = $1");
            let found: Option<Release> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&id).fetch_optional(&mut *tx).await?;
            found.ok_or(ApiError::Missing("release not found"))?
        }
    };
    tx.commit().await?;
    Ok(ok(release))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = SovereignLeakAlert)]
struct Leak {
    alert_id: Id,
    region_id: String,
    kind: LeakKind,
    severity: Severity,
    incident_ref: Option<String>,
    reported_at: Timestamp,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewSovereignLeakAlert)]
struct NewLeak {
    kind: LeakKind,
    severity: Severity,
    /// Null for none.
    #[schema(max_length = 200)]
    incident_ref: Option<String>,
}

/// Raises a leak alert in a region; every call appends one.
#[utoipa::path(post, path = "/admin/sovereign/regions/{region_id}/leaks", tag = "admin-sovereign", request_body = NewLeak,
    params(("region_id" = String, Path, description = "the region")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/admin/sovereign/regions", { "region_id": "r-{unique}", "regime": "il5", "operator_partner": "race", "kms_provider": "race", "operator_id": "ops-race" }]], "body": { "kind": "egress-attempt", "severity": "warn" } }))),
    responses((status = 201, description = "the alert", body = Data<Leak>)))]
async fn leak(State(state): State<AppState>, Operator(who): Operator, Path(region_id): Path<String>, body: Body<NewLeak>) -> ApiResult<Created<Leak>> {
    let mut tx = state.db.begin().await?;
    region(&mut *tx, &region_id).await?;
    let body = body.checked()?;
    let (kind, severity) = (body.kind, body.severity);
    let incident = Check::optional(&body.incident_ref);
    let made: Leak = sqlx::query_as(
        "INSERT INTO sovereign_leak (alert_id, region_id, kind, severity, incident_ref, reported_by, reported_at) VALUES ($1, $2, $3, $4, $5, $6, $7) \
         RETURNING alert_id, region_id, kind, severity, incident_ref, reported_at",
    )
    .bind(db::new_id())
    .bind(&region_id)
    .bind(kind)
    .bind(severity)
    .bind(&incident)
    .bind(&*who)
    .bind(db::now())
    .fetch_one(&mut *tx)
    .await?;
    let payload = json!({ "alert_id": made.alert_id, "region_id": region_id, "kind": kind, "severity": severity, "incident_ref": incident });
    audit::record_operator(&mut tx, &who, events::SOVEREIGN_LEAK_REPORTED, payload).await?;
    tx.commit().await?;
    Ok(created(made))
}
