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
use hub_kernel::gate::{Operator, ops_tokens};
use hub_kernel::prelude::*;

use crate::fields::{required_bounded, required_one_of, required_time};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_regions, put_region))
        .routes(routes!(attest))
        .routes(routes!(release))
        .routes(routes!(applied))
        .routes(routes!(leak))
}

const REGIMES: [&str; 5] = ["fedramp-high", "il5", "pipl", "eu-sovereign", "uae-trd"];
const LEAK_KINDS: [&str; 3] = ["egress-attempt", "cross-region-route", "policy-violation"];
const SEVERITIES: [&str; 3] = ["info", "warn", "critical"];

/// The message a bundle release's signature covers.
pub fn bundle_message(bundle_artifact_ref: &str, version: &str) -> String {
    format!("hub-sovereign-bundle-v1\n{bundle_artifact_ref}\n{version}")
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = SovereignRegion)]
struct Region {
    region_id: String,
    regime: String,
    operator_partner: String,
    kms_provider: String,
    /// A region that may not federate onward.
    #[sqlx(try_from = "i64")]
    #[schema(value_type = bool)]
    terminal_federation: Flag,
    /// `in-progress`, `attested` or `expired`.
    attestation_state: String,
    /// The latest expiry among the region's attestations.
    attested_until: Option<String>,
    operator_id: String,
    created_at: String,
    updated_at: String,
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
async fn list_regions(State(state): State<AppState>, _: Operator) -> ApiResult<Response> {
    let sql = format!("SELECT {REGION_COLUMNS} FROM sovereign_region ORDER BY region_id");
    let rows: Vec<Region> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(db::now()).fetch_all(&state.db.read).await?;
    Ok(ok(rows))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = SovereignRegionInput)]
struct RegionInput {
    /// 1–64 of `a-z 0-9 -`.
    #[schema(required = true)]
    region_id: Option<String>,
    /// `fedramp-high`, `il5`, `pipl`, `eu-sovereign` or `uae-trd`.
    #[schema(required = true)]
    regime: Option<String>,
    /// At most 200 characters.
    #[schema(required = true)]
    operator_partner: Option<String>,
    /// At most 200 characters.
    #[schema(required = true)]
    kms_provider: Option<String>,
    /// At most 200 characters.
    #[schema(required = true)]
    operator_id: Option<String>,
    /// Default false; omitted on a re-post, it keeps its value.
    terminal_federation: Option<bool>,
}

/// Registers a region, or updates it when its id is known (no 409).
#[utoipa::path(post, path = "/admin/sovereign/regions", tag = "admin-sovereign", request_body = RegionInput,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "region_id": "r-{unique}", "regime": "il5", "operator_partner": "race", "kms_provider": "race", "operator_id": "ops-race" } }))),
    responses((status = 200, description = "the region", body = Data<Region>)))]
async fn put_region(State(state): State<AppState>, Operator(who): Operator, Lenient(body): Lenient<RegionInput>) -> ApiResult<Response> {
    let mut check = Check::new();
    let id = check.required("region_id", &body.region_id);
    let well_formed = id.len() <= 64 && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !id.is_empty() && !well_formed {
        check.fail("region_id must be 1 to 64 of a-z, 0-9 or '-'");
    }
    let regime = required_one_of(&mut check, "regime", &body.regime, &REGIMES);
    let partner = required_bounded(&mut check, "operator_partner", &body.operator_partner, 200);
    let kms = required_bounded(&mut check, "kms_provider", &body.kms_provider, 200);
    let operator_id = required_bounded(&mut check, "operator_id", &body.operator_id, 200);
    check.finish()?;
    let terminal = body.terminal_federation.map(i64::from);
    let now = db::now();
    let mut tx = state.db.begin().await?;
    sqlx::query(
        "INSERT INTO sovereign_region (region_id, regime, operator_partner, kms_provider, terminal_federation, operator_id, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, COALESCE($5, 0), $6, $7, $7) ON CONFLICT (region_id) DO UPDATE SET regime = excluded.regime, \
         operator_partner = excluded.operator_partner, kms_provider = excluded.kms_provider, \
         terminal_federation = COALESCE($8, sovereign_region.terminal_federation), operator_id = excluded.operator_id, updated_at = excluded.updated_at",
    )
    .bind(&id)
    .bind(&regime)
    .bind(&partner)
    .bind(&kms)
    .bind(terminal)
    .bind(&operator_id)
    .bind(&now)
    .bind(terminal)
    .execute(&mut *tx)
    .await?;
    let saved = region(&mut *tx, &id).await?;
    let payload = json!({ "region_id": id, "regime": regime, "terminal_federation": saved.terminal_federation, "operator_id": operator_id });
    ops_tokens::record(&mut tx, &who, events::SOVEREIGN_REGION_REGISTERED, payload).await?;
    tx.commit().await?;
    Ok(ok(saved))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = SovereignAttestation)]
struct Attestation {
    attestation_id: String,
    region_id: String,
    regime: String,
    auditor_id: String,
    issued_at: String,
    expires_at: String,
    artifact_ref: String,
    recorded_at: String,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewSovereignAttestation)]
struct NewAttestation {
    /// The region's regime.
    #[schema(required = true)]
    regime: Option<String>,
    /// At most 200 characters.
    #[schema(required = true)]
    auditor_id: Option<String>,
    /// RFC 3339.
    #[schema(required = true)]
    issued_at: Option<String>,
    /// RFC 3339, after `issued_at`.
    #[schema(required = true)]
    expires_at: Option<String>,
    /// At most 1000 characters.
    #[schema(required = true)]
    artifact_ref: Option<String>,
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
    Lenient(body): Lenient<NewAttestation>,
) -> ApiResult<Response> {
    let mut check = Check::new();
    let regime = required_one_of(&mut check, "regime", &body.regime, &REGIMES);
    let auditor = required_bounded(&mut check, "auditor_id", &body.auditor_id, 200);
    let issued = required_time(&mut check, "issued_at", &body.issued_at);
    let expires = required_time(&mut check, "expires_at", &body.expires_at);
    if let (Some(i), Some(e)) = (issued, expires)
        && e <= i
    {
        check.fail("expires_at must be after issued_at");
    }
    let artifact = required_bounded(&mut check, "artifact_ref", &body.artifact_ref, 1000);
    check.finish()?;
    let (issued, expires) = (db::format_time(issued.expect("checked")), db::format_time(expires.expect("checked")));
    let mut tx = state.db.begin().await?;
    let target = region(&mut *tx, &region_id).await?;
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
    .bind(&regime)
    .bind(&auditor)
    .bind(&issued)
    .bind(&expires)
    .bind(&artifact)
    .bind(&*who)
    .bind(&now)
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE sovereign_region SET attested_until = CASE WHEN attested_until IS NULL OR attested_until < $2 THEN $2 ELSE attested_until END, \
         updated_at = $3 WHERE region_id = $1",
    )
    .bind(&region_id)
    .bind(&expires)
    .bind(&now)
    .execute(&mut *tx)
    .await?;
    let payload = json!({ "attestation_id": made.attestation_id, "region_id": region_id, "regime": regime, "auditor_id": auditor, "expires_at": expires });
    ops_tokens::record(&mut tx, &who, events::SOVEREIGN_ATTESTATION_RECORDED, payload).await?;
    tx.commit().await?;
    Ok(created(made))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = SovereignBundleRelease)]
struct Release {
    release_id: String,
    region_id: String,
    version: String,
    bundle_artifact_ref: String,
    /// The verified Ed25519 signature, hex.
    signature: String,
    /// `released`, then `applied`.
    status: String,
    released_at: String,
    applied_at: Option<String>,
}

const RELEASE_COLUMNS: &str = "release_id, region_id, version, bundle_artifact_ref, signature, status, released_at, applied_at";

#[derive(Deserialize, ToSchema)]
#[schema(as = NewSovereignBundleRelease)]
struct NewRelease {
    /// At most 64 characters; one release per version and region.
    #[schema(required = true)]
    version: Option<String>,
    /// At most 1000 characters.
    #[schema(required = true)]
    bundle_artifact_ref: Option<String>,
    /// The Ed25519 signature of the release message: 128 hex characters.
    #[schema(required = true)]
    signature_hex: Option<String>,
}

/// Releases a signed bundle to a region, once its signature verifies
/// against the configured release key.
#[utoipa::path(post, path = "/admin/sovereign/regions/{region_id}/bundles", tag = "admin-sovereign", request_body = NewRelease,
    params(("region_id" = String, Path, description = "the region")),
    extensions(("x-concurrency" = json!({ "outcome": "exempt", "reason": "a release carries an Ed25519 signature by the operator release key, which the race hub is not configured with (HUB_SOVEREIGN_BUNDLE_PUBLIC_KEY): every release answers 503" }))),
    responses((status = 201, description = "the release", body = Data<Release>)))]
async fn release(
    State(state): State<AppState>,
    Operator(who): Operator,
    Path(region_id): Path<String>,
    Lenient(body): Lenient<NewRelease>,
) -> ApiResult<Response> {
    let mut check = Check::new();
    let version = required_bounded(&mut check, "version", &body.version, 64);
    let artifact = required_bounded(&mut check, "bundle_artifact_ref", &body.bundle_artifact_ref, 1000);
    let signature_hex = check.required("signature_hex", &body.signature_hex);
    let signature = match hex::decode(&signature_hex) {
        Ok(bytes) if bytes.len() == 64 => bytes,
        _ => {
            if !signature_hex.is_empty() {
                check.fail("signature_hex must be 128 hexadecimal characters (an Ed25519 signature)");
            }
            Vec::new()
        }
    };
    check.finish()?;
    let key = state
        .config
        .sovereign_bundle_public_key
        .as_deref()
        .and_then(|k| hex::decode(k).ok())
        .ok_or(ApiError::Unavailable("no sovereign bundle release key is configured (HUB_SOVEREIGN_BUNDLE_PUBLIC_KEY)"))?;
    let mut tx = state.db.begin().await?;
    region(&mut *tx, &region_id).await?;
    if UnparsedPublicKey::new(&ED25519, &key).verify(bundle_message(&artifact, &version).as_bytes(), &signature).is_err() {
        return Err(ApiError::invalid("signature_hex does not verify: it must be the release key's Ed25519 signature of the bundle_artifact_ref and version"));
    }
    let sql = format!(
        "INSERT INTO sovereign_release (release_id, region_id, version, bundle_artifact_ref, signature, status, released_by, released_at) \
         VALUES ($1, $2, $3, $4, $5, 'released', $6, $7) ON CONFLICT (region_id, version) DO NOTHING RETURNING {RELEASE_COLUMNS}"
    );
    let made: Option<Release> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&region_id)
        .bind(&version)
        .bind(&artifact)
        .bind(hex::encode(&signature))
        .bind(&*who)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let made = made.ok_or_else(|| ApiError::Conflict(format!("the region has a release of version {version}")))?;
    let payload = json!({ "release_id": made.release_id, "region_id": region_id, "version": version, "bundle_artifact_ref": artifact });
    ops_tokens::record(&mut tx, &who, events::SOVEREIGN_BUNDLE_RELEASED, payload).await?;
    tx.commit().await?;
    Ok(created(made))
}

/// Marks a release applied in its region; a repeat answers the release
/// as it is.
#[utoipa::path(post, path = "/admin/sovereign/bundles/{release_id}/applied", tag = "admin-sovereign",
    params(("release_id" = String, Path, description = "the release")),
    extensions(("x-concurrency" = json!({ "outcome": "exempt", "reason": "it needs a bundle release, which only the signed release route makes, and the race hub has no release key (HUB_SOVEREIGN_BUNDLE_PUBLIC_KEY) to accept one" }))),
    responses((status = 200, description = "the release", body = Data<Release>)))]
async fn applied(State(state): State<AppState>, Operator(who): Operator, Path(id): Path<String>) -> ApiResult<Response> {
    let id = path_id(&id).map_err(|_| ApiError::Missing("release not found"))?.to_string();
    let mut tx = state.db.begin().await?;
    let sql =
        format!("UPDATE sovereign_release SET status = 'applied', applied_at = $2 WHERE release_id = $1 AND status = 'released' RETURNING {RELEASE_COLUMNS}");
    let moved: Option<Release> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&id).bind(db::now()).fetch_optional(&mut *tx).await?;
    let release = match moved {
        Some(r) => {
            let payload = json!({ "release_id": r.release_id, "region_id": r.region_id, "version": r.version });
            ops_tokens::record(&mut tx, &who, events::SOVEREIGN_BUNDLE_APPLIED, payload).await?;
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
    alert_id: String,
    region_id: String,
    kind: String,
    severity: String,
    incident_ref: Option<String>,
    reported_at: String,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewSovereignLeakAlert)]
struct NewLeak {
    /// `egress-attempt`, `cross-region-route` or `policy-violation`.
    #[schema(required = true)]
    kind: Option<String>,
    /// `info`, `warn` or `critical`.
    #[schema(required = true)]
    severity: Option<String>,
    /// At most 200 characters; null for none.
    incident_ref: Option<String>,
}

/// Raises a leak alert in a region; every call appends one.
#[utoipa::path(post, path = "/admin/sovereign/regions/{region_id}/leaks", tag = "admin-sovereign", request_body = NewLeak,
    params(("region_id" = String, Path, description = "the region")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/admin/sovereign/regions", { "region_id": "r-{unique}", "regime": "il5", "operator_partner": "race", "kms_provider": "race", "operator_id": "ops-race" }]], "body": { "kind": "egress-attempt", "severity": "warn" } }))),
    responses((status = 201, description = "the alert", body = Data<Leak>)))]
async fn leak(State(state): State<AppState>, Operator(who): Operator, Path(region_id): Path<String>, Lenient(body): Lenient<NewLeak>) -> ApiResult<Response> {
    let mut check = Check::new();
    let kind = required_one_of(&mut check, "kind", &body.kind, &LEAK_KINDS);
    let severity = required_one_of(&mut check, "severity", &body.severity, &SEVERITIES);
    let incident = check.optional_bounded("incident_ref", &body.incident_ref, 200);
    check.finish()?;
    let mut tx = state.db.begin().await?;
    region(&mut *tx, &region_id).await?;
    let made: Leak = sqlx::query_as(
        "INSERT INTO sovereign_leak (alert_id, region_id, kind, severity, incident_ref, reported_by, reported_at) VALUES ($1, $2, $3, $4, $5, $6, $7) \
         RETURNING alert_id, region_id, kind, severity, incident_ref, reported_at",
    )
    .bind(db::new_id())
    .bind(&region_id)
    .bind(&kind)
    .bind(&severity)
    .bind(&incident)
    .bind(&*who)
    .bind(db::now())
    .fetch_one(&mut *tx)
    .await?;
    let payload = json!({ "alert_id": made.alert_id, "region_id": region_id, "kind": kind, "severity": severity, "incident_ref": incident });
    ops_tokens::record(&mut tx, &who, events::SOVEREIGN_LEAK_REPORTED, payload).await?;
    tx.commit().await?;
    Ok(created(made))
}
