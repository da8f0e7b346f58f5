//! "Multi-region": a tenant's active-active profile (one per tenant) and
//! the failover drills run against it.
//!
//! A drill moves the profile's traffic: its home region becomes
//! `to_region` and the old home joins the paired regions. What it
//! observes is measured, not assumed: `rto_observed_seconds` is the time
//! from the drill's start until the hub's read path serves the moved
//! profile, `rpo_observed_seconds` the read path's lag behind the commit
//! of the move (how much written data a reader in the new home could
//! miss). A drill passes when both are within the profile's targets (an
//! absent target passes); a failed drill of an `active-active` profile
//! downgrades it to `active-passive`. Every drill is an entry of the
//! tenant's audit chain, whose id the drill carries.

use std::time::{Duration, Instant};

use hub_kernel::gate::{Operator, ops_tokens};
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create)).routes(routes!(drill)).routes(routes!(read))
}

/// The regions of the documents' enumeration.
pub const REGIONS: [&str; 4] = ["us-east-1", "us-west-2", "eu-west-1", "ap-south-1"];
const MODES: [&str; 3] = ["sync", "async", "single-region"];
/// The longest target a profile takes: thirty days.
const MAX_TARGET_SECONDS: i64 = 30 * 24 * 3600;
/// How long a drill waits for the read path to serve the moved profile.
const VISIBILITY_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ActiveActiveProfile)]
struct Profile {
    profile_id: String,
    tenant_id: String,
    /// `active-active`, `active-passive` (after a failed drill) or
    /// `single-region` (no paired region).
    tier: String,
    home_region: String,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<String>)]
    paired_regions: JsonText,
    rpo_target_seconds: Option<i64>,
    rto_target_seconds: Option<i64>,
    contract_addendum_ref: String,
    /// Service name to `sync`, `async` or `single-region`.
    #[sqlx(try_from = "String")]
    #[schema(value_type = Object)]
    replication_overrides: JsonText,
    /// `active`.
    status: String,
    activated_at: Option<String>,
    created_at: String,
    updated_at: String,
}

const COLUMNS: &str = "profile_id, tenant_id, tier, home_region, paired_regions, rpo_target_seconds, rto_target_seconds, contract_addendum_ref, \
                       replication_overrides, status, activated_at, created_at, updated_at";

/// An array of distinct regions of the enumeration; `None` (reported)
/// when it is not one.
pub(crate) fn regions(check: &mut Check, name: &str, value: Option<&Value>) -> Option<Vec<String>> {
    let Some(Value::Array(items)) = value else {
        check.fail(if value.is_none_or(Value::is_null) { format!("{name} is required") } else { format!("{name} must be an array") });
        return None;
    };
    let mut out: Vec<String> = Vec::new();
    for item in items {
        match item.as_str() {
            Some(r) if REGIONS.contains(&r) => {
                if out.iter().any(|o| o == r) {
                    check.fail(format!("{name} names {r} twice"));
                    return None;
                }
                out.push(r.to_string());
            }
            _ => {
                check.fail(format!("{name} entries must be one of: {}", REGIONS.join(", ")));
                return None;
            }
        }
    }
    Some(out)
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewActiveActiveProfile)]
struct NewProfile {
    #[schema(required = true, format = "uuid")]
    tenant_id: Option<String>,
    /// One of `us-east-1`, `us-west-2`, `eu-west-1`, `ap-south-1`.
    #[schema(required = true)]
    home_region: Option<String>,
    /// Distinct regions other than the home region (may be empty).
    #[schema(required = true, value_type = Vec<String>)]
    paired_regions: Option<Value>,
    /// At most 500 characters.
    #[schema(required = true)]
    contract_addendum_ref: Option<String>,
    /// Whole seconds, 0 to 2592000.
    #[schema(value_type = Option<i64>)]
    rpo_target_seconds: Option<Value>,
    /// Whole seconds, 0 to 2592000.
    #[schema(value_type = Option<i64>)]
    rto_target_seconds: Option<Value>,
    /// Service name (1–100 characters, at most 100 services) to `sync`,
    /// `async` or `single-region`.
    #[schema(value_type = Option<Object>)]
    replication_overrides: Option<Value>,
}

/// Creates a tenant's active-active profile (one per tenant).
#[utoipa::path(post, path = "/admin/active-active/profiles", tag = "admin-multi-region", request_body = NewProfile,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/admin/apps", { "app_id": "r-{unique}", "display_name": "Races" }], ["POST", "/admin/tenants", { "app_id": "r-{unique}", "display_name": "Races", "region": "eu-west-1" }]], "body": { "tenant_id": "{tenant.tenant_id}", "home_region": "us-east-1", "paired_regions": ["eu-west-1"], "contract_addendum_ref": "race" } }))),
    responses((status = 201, description = "the profile", body = Data<Profile>)))]
async fn create(State(state): State<AppState>, Operator(who): Operator, Lenient(body): Lenient<NewProfile>) -> ApiResult<Response> {
    let mut check = Check::new();
    let tenant_id = check.required_uuid("tenant_id", &body.tenant_id).map(|u| u.to_string());
    let home = check.required("home_region", &body.home_region);
    check.one_of("home_region", &home, &REGIONS);
    let paired = regions(&mut check, "paired_regions", body.paired_regions.as_ref()).unwrap_or_default();
    if paired.contains(&home) {
        check.fail("paired_regions must not contain the home_region");
    }
    let addendum = check.required("contract_addendum_ref", &body.contract_addendum_ref);
    if addendum.chars().count() > 500 {
        check.fail("contract_addendum_ref must be at most 500 characters");
    }
    let rpo = check.optional_int("rpo_target_seconds", body.rpo_target_seconds.as_ref(), 0, MAX_TARGET_SECONDS);
    let rto = check.optional_int("rto_target_seconds", body.rto_target_seconds.as_ref(), 0, MAX_TARGET_SECONDS);
    let overrides = check.optional_object("replication_overrides", body.replication_overrides.as_ref());
    if let Value::Object(map) = &overrides {
        if map.len() > 100 {
            check.fail("replication_overrides holds at most 100 services");
        }
        if map.keys().any(|k| k.trim().is_empty() || k.chars().count() > 100) {
            check.fail("replication_overrides service names must be 1 to 100 characters");
        }
        if map.values().any(|m| !m.as_str().is_some_and(|m| MODES.contains(&m))) {
            check.fail(format!("replication_overrides values must be one of: {}", MODES.join(", ")));
        }
    }
    check.finish()?;
    let tenant_id = tenant_id.expect("checked");
    let tier = if paired.is_empty() { "single-region" } else { "active-active" };
    let now = db::now();
    let mut tx = state.db.begin().await?;
    let known: Option<i64> = sqlx::query_scalar("SELECT 1 FROM tenant_tenant WHERE tenant_id = $1").bind(&tenant_id).fetch_optional(&mut *tx).await?;
    if known.is_none() {
        return Err(ApiError::invalid("tenant_id names no tenant"));
    }
    let sql = format!(
        "INSERT INTO active_active_profile (profile_id, tenant_id, tier, home_region, paired_regions, rpo_target_seconds, rto_target_seconds, \
         contract_addendum_ref, replication_overrides, status, activated_at, created_by, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'active', $10, $11, $10, $10) ON CONFLICT (tenant_id) DO NOTHING RETURNING {COLUMNS}"
    );
    let made: Option<Profile> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&tenant_id)
        .bind(tier)
        .bind(&home)
        .bind(json!(paired).to_string())
        .bind(rpo)
        .bind(rto)
        .bind(&addendum)
        .bind(overrides.to_string())
        .bind(&now)
        .bind(&*who)
        .fetch_optional(&mut *tx)
        .await?;
    let profile = made.ok_or_else(|| ApiError::Conflict("the tenant has an active-active profile".into()))?;
    let payload = json!({ "profile_id": profile.profile_id, "tier": tier, "home_region": home, "paired_regions": paired });
    ops_tokens::record_in(&mut tx, &tenant_id, &who, events::ACTIVE_ACTIVE_PROFILE_CREATED, payload).await?;
    tx.commit().await?;
    Ok(created(profile))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = FailoverDrill)]
struct Drill {
    drill_id: String,
    profile_id: String,
    from_region: String,
    to_region: String,
    started_at: String,
    rpo_observed_seconds: f64,
    rto_observed_seconds: f64,
    #[sqlx(try_from = "i64")]
    #[schema(value_type = bool)]
    passed: Flag,
    /// The drill's entry in the tenant's audit chain.
    audit_entry_id: String,
    #[sqlx(try_from = "i64")]
    #[schema(value_type = bool)]
    tier_downgrade_triggered: Flag,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewFailoverDrill)]
struct NewDrill {
    /// One of the profile's paired regions.
    #[schema(required = true)]
    to_region: Option<String>,
    /// The profile's home region (the default); another is 409.
    from_region: Option<String>,
}

/// Runs a failover drill: moves the profile's traffic to `to_region`,
/// measures what it observes and records the drill in the tenant's chain.
/// Not idempotent: every call is a new drill.
#[utoipa::path(post, path = "/admin/active-active/profiles/{profile_id}/drills", tag = "admin-multi-region", request_body = NewDrill,
    params(("profile_id" = String, Path, description = "the profile")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/admin/apps", { "app_id": "r-{unique}", "display_name": "Races" }], ["POST", "/admin/tenants", { "app_id": "r-{unique}", "display_name": "Races", "region": "eu-west-1" }], ["POST", "/admin/active-active/profiles", { "tenant_id": "{tenant.tenant_id}", "home_region": "us-east-1", "paired_regions": ["eu-west-1"], "contract_addendum_ref": "race" }]], "body": { "to_region": "eu-west-1", "from_region": "us-east-1" } }))),
    responses((status = 201, description = "the drill", body = Data<Drill>)))]
async fn drill(State(state): State<AppState>, Operator(who): Operator, Path(id): Path<String>, Lenient(body): Lenient<NewDrill>) -> ApiResult<Response> {
    let id = path_id(&id).map_err(|_| ApiError::Missing("profile not found"))?.to_string();
    let mut check = Check::new();
    let to = check.required("to_region", &body.to_region);
    check.one_of("to_region", &to, &REGIONS);
    let from = Check::optional(&body.from_region);
    if let Some(f) = &from {
        check.one_of("from_region", f, &REGIONS);
    }
    check.finish()?;
    let started = Instant::now();
    let started_at = db::now();
    let sql = format!("SELECT {COLUMNS} FROM active_active_profile WHERE profile_id = $1");
    let mut tx = state.db.begin().await?;
    let profile: Profile = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&id).fetch_optional(&mut *tx).await?.ok_or(ApiError::Missing("profile not found"))?;
    let home = profile.home_region.clone();
    if from.as_ref().is_some_and(|f| *f != home) {
        return Err(ApiError::Conflict(format!("the profile's home region is {home}")));
    }
    let mut paired: Vec<String> = serde_json::from_value(profile.paired_regions.0.clone()).unwrap_or_default();
    if !paired.contains(&to) {
        return Err(ApiError::invalid(format!("to_region must be one of the profile's paired regions ({})", paired.join(", "))));
    }
    // The move: the target becomes home, the old home a paired region.
    paired.retain(|r| *r != to);
    paired.push(home.clone());
    // The move is made only from the home region it was computed from: of
    // two drills at once, one moves the profile and the other is told the
    // home region the winner left.
    let moved: Option<String> = sqlx::query_scalar(
        "UPDATE active_active_profile SET home_region = $2, paired_regions = $3, updated_at = $4 WHERE profile_id = $1 AND home_region = $5 RETURNING profile_id",
    )
    .bind(&id)
    .bind(&to)
    .bind(json!(paired).to_string())
    .bind(db::now())
    .bind(&home)
    .fetch_optional(&mut *tx)
    .await?;
    if moved.is_none() {
        let now_home: String = sqlx::query_scalar("SELECT home_region FROM active_active_profile WHERE profile_id = $1").bind(&id).fetch_one(&mut *tx).await?;
        return Err(ApiError::Conflict(format!("the profile's home region is {now_home}")));
    }
    tx.commit().await?;
    let committed = Instant::now();
    // The read path serves the moved profile: traffic has moved.
    loop {
        let seen: Option<String> =
            sqlx::query_scalar("SELECT home_region FROM active_active_profile WHERE profile_id = $1").bind(&id).fetch_optional(&state.db.read).await?;
        if seen.as_deref() == Some(to.as_str()) || committed.elapsed() > VISIBILITY_TIMEOUT {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let rto = started.elapsed().as_secs_f64();
    let rpo = committed.elapsed().as_secs_f64();
    let passed = profile.rpo_target_seconds.is_none_or(|t| rpo <= t as f64) && profile.rto_target_seconds.is_none_or(|t| rto <= t as f64);
    let downgrade = !passed && profile.tier == "active-active";

    let mut tx = state.db.begin().await?;
    if downgrade {
        sqlx::query("UPDATE active_active_profile SET tier = 'active-passive', updated_at = $2 WHERE profile_id = $1")
            .bind(&id)
            .bind(db::now())
            .execute(&mut *tx)
            .await?;
    }
    let drill_id = db::new_id();
    let payload = json!({
        "drill_id": drill_id, "profile_id": id, "from_region": home, "to_region": to,
        "rpo_observed_seconds": rpo, "rto_observed_seconds": rto, "passed": passed, "tier_downgrade_triggered": downgrade,
    });
    let entry = ops_tokens::record_in(&mut tx, &profile.tenant_id, &who, events::FAILOVER_DRILL_COMPLETED, payload).await?;
    let drill: Drill = sqlx::query_as(
        "INSERT INTO active_active_drill (drill_id, profile_id, from_region, to_region, started_at, rpo_observed_seconds, rto_observed_seconds, \
         passed, audit_entry_id, tier_downgrade_triggered, run_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
         RETURNING drill_id, profile_id, from_region, to_region, started_at, rpo_observed_seconds, rto_observed_seconds, passed, audit_entry_id, \
         tier_downgrade_triggered",
    )
    .bind(&drill_id)
    .bind(&id)
    .bind(&home)
    .bind(&to)
    .bind(&started_at)
    .bind(rpo)
    .bind(rto)
    .bind(i64::from(passed))
    .bind(&entry.entry_id)
    .bind(i64::from(downgrade))
    .bind(&*who)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(created(drill))
}

/// A replication stream the profile implies: from the home region to a
/// paired one, for every service (`*`, asynchronous unless overridden)
/// and each service the overrides replicate.
#[derive(Serialize, ToSchema)]
#[schema(as = ActiveActiveReplicationStream)]
struct Stream {
    service: String,
    source_region: String,
    target_region: String,
    /// `sync` or `async`.
    mode: String,
}

#[derive(Serialize, ToSchema)]
#[schema(as = ActiveActiveProfileView)]
struct View {
    profile: Profile,
    replication_streams: Vec<Stream>,
}

fn streams(profile: &Profile) -> Vec<Stream> {
    let paired: Vec<String> = serde_json::from_value(profile.paired_regions.0.clone()).unwrap_or_default();
    let overrides = profile.replication_overrides.0.as_object().cloned().unwrap_or_default();
    let mut out = Vec::new();
    for target in &paired {
        let services = std::iter::once(("*".to_string(), "async".to_string()))
            .chain(overrides.iter().filter_map(|(s, m)| Some((s.clone(), m.as_str()?.to_string()))))
            .filter(|(_, m)| m != "single-region");
        for (service, mode) in services {
            out.push(Stream { service, source_region: profile.home_region.clone(), target_region: target.clone(), mode });
        }
    }
    out
}

/// A tenant's profile and the replication streams it implies (none
/// without a paired region).
#[utoipa::path(get, path = "/admin/active-active/profiles/{tenant_id}", tag = "admin-multi-region",
    params(("tenant_id" = String, Path, description = "the tenant")),
    responses((status = 200, description = "the profile", body = Data<View>)))]
async fn read(State(state): State<AppState>, _: Operator, Path(tenant_id): Path<String>) -> ApiResult<Response> {
    let tenant_id = path_id(&tenant_id).map_err(|_| ApiError::Missing("no profile for tenant"))?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM active_active_profile WHERE tenant_id = $1");
    let profile: Profile =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&tenant_id).fetch_optional(&state.db.read).await?.ok_or(ApiError::Missing("no profile for tenant"))?;
    Ok(ok(View { replication_streams: streams(&profile), profile }))
}
