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

use hub_kernel::gate::Operator;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create)).routes(routes!(drill)).routes(routes!(read))
}

/// How long a drill waits for the read path to serve the moved profile.
const VISIBILITY_TIMEOUT: Duration = Duration::from_secs(30);

stored_enum! {
    /// How a profile's regions serve traffic.
    #[schema(as = ActiveActiveTier)]
    enum Tier { ActiveActive = "active-active", ActivePassive = "active-passive", SingleRegion = "single-region" }
}

stored_enum! {
    /// Whether an active-active profile is in force.
    #[schema(as = ActiveActiveProfileStatus)]
    enum ProfileStatus { Active = "active" }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ActiveActiveProfile)]
struct Profile {
    profile_id: Id,
    tenant_id: Id,
    /// `active-passive` after a failed drill, `single-region` without a
    /// paired region.
    tier: Tier,
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
    status: ProfileStatus,
    activated_at: Option<Timestamp>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const COLUMNS: &str = "profile_id, tenant_id, tier, home_region, paired_regions, rpo_target_seconds, rto_target_seconds, contract_addendum_ref, \
                       replication_overrides, status, activated_at, created_at, updated_at";

stored_enum! {
    /// A region of the documents' enumeration.
    #[schema(as = ActiveActiveRegion)]
    pub enum Region { UsEast1 = "us-east-1", UsWest2 = "us-west-2", EuWest1 = "eu-west-1", ApSouth1 = "ap-south-1" }
}

stored_enum! {
    /// How a service of an active-active profile replicates.
    #[schema(as = ActiveActiveReplication)]
    enum Replication { Sync = "sync", Async = "async", SingleRegion = "single-region" }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewActiveActiveProfile)]
struct NewProfile {
    /// An existing tenant.
    #[schema(format = "uuid")]
    tenant_id: String,
    home_region: Region,
    /// Distinct regions other than the home region (may be empty).
    paired_regions: Vec<Region>,
    #[schema(max_length = 500)]
    contract_addendum_ref: String,
    /// Whole seconds, at most thirty days.
    #[schema(minimum = 0, maximum = 2_592_000)]
    rpo_target_seconds: Option<i64>,
    /// Whole seconds, at most thirty days.
    #[schema(minimum = 0, maximum = 2_592_000)]
    rto_target_seconds: Option<i64>,
    /// Service name (1–100 characters, at most 100 services) to its
    /// replication.
    replication_overrides: Option<std::collections::BTreeMap<String, Replication>>,
}

/// Creates a tenant's active-active profile (one per tenant).
#[utoipa::path(post, path = "/admin/active-active/profiles", tag = "admin-multi-region", request_body = NewProfile,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/admin/apps", { "app_id": "r-{unique}", "display_name": "Races" }], ["POST", "/admin/tenants", { "app_id": "r-{unique}", "display_name": "Races", "region": "eu-west-1" }]], "body": { "tenant_id": "{tenant.tenant_id}", "home_region": "us-east-1", "paired_regions": ["eu-west-1"], "contract_addendum_ref": "race" } }))),
    responses((status = 201, description = "the profile", body = Data<Profile>)))]
async fn create(State(state): State<AppState>, Operator(who): Operator, body: Body<NewProfile>) -> ApiResult<Created<Profile>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let tenant_id = canonical_uuid(&body.tenant_id);
    let home = body.home_region.as_str();
    let mut paired: Vec<&str> = Vec::new();
    for region in body.paired_regions.iter().map(|r| r.as_str()) {
        if paired.contains(&region) {
            check.fail(format!("paired_regions names {region} twice"));
            break;
        }
        paired.push(region);
    }
    if paired.contains(&home) {
        check.fail("paired_regions must not contain the home_region");
    }
    let addendum = body.contract_addendum_ref.trim();
    let (rpo, rto) = (body.rpo_target_seconds, body.rto_target_seconds);
    let overrides = body.replication_overrides.unwrap_or_default();
    if overrides.len() > 100 {
        check.fail("replication_overrides holds at most 100 services");
    }
    if overrides.keys().any(|k| k.trim().is_empty() || k.chars().count() > 100) {
        check.fail("replication_overrides service names must be 1 to 100 characters");
    }
    check.finish()?;
    let overrides = json!(overrides);
    let tier = if paired.is_empty() { Tier::SingleRegion } else { Tier::ActiveActive };
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
        .bind(home)
        .bind(json!(paired).to_string())
        .bind(rpo)
        .bind(rto)
        .bind(addendum)
        .bind(overrides.to_string())
        .bind(&now)
        .bind(&*who)
        .fetch_optional(&mut *tx)
        .await?;
    let profile = made.ok_or_else(|| ApiError::Conflict("the tenant has an active-active profile".into()))?;
    let payload = json!({ "profile_id": profile.profile_id, "tier": tier, "home_region": home, "paired_regions": paired });
    audit::record_operator_in(&mut tx, &tenant_id, &who, events::ACTIVE_ACTIVE_PROFILE_CREATED, payload).await?;
    tx.commit().await?;
    Ok(created(profile))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = FailoverDrill)]
struct Drill {
    drill_id: Id,
    profile_id: Id,
    from_region: String,
    to_region: String,
    started_at: Timestamp,
    rpo_observed_seconds: f64,
    rto_observed_seconds: f64,
    #[sqlx(try_from = "i64")]
    #[schema(value_type = bool)]
    passed: Flag,
    /// The drill's entry in the tenant's audit chain.
    audit_entry_id: Id,
    #[sqlx(try_from = "i64")]
    #[schema(value_type = bool)]
    tier_downgrade_triggered: Flag,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewFailoverDrill)]
struct NewDrill {
    /// One of the profile's paired regions.
    to_region: Region,
    /// The profile's home region (the default); another is 409.
    from_region: Option<Region>,
}

/// Runs a failover drill: moves the profile's traffic to `to_region`,
/// measures what it observes and records the drill in the tenant's chain.
/// Not idempotent: every call is a new drill.
#[utoipa::path(post, path = "/admin/active-active/profiles/{profile_id}/drills", tag = "admin-multi-region", request_body = NewDrill,
    params(("profile_id" = String, Path, description = "the profile")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/admin/apps", { "app_id": "r-{unique}", "display_name": "Races" }], ["POST", "/admin/tenants", { "app_id": "r-{unique}", "display_name": "Races", "region": "eu-west-1" }], ["POST", "/admin/active-active/profiles", { "tenant_id": "{tenant.tenant_id}", "home_region": "us-east-1", "paired_regions": ["eu-west-1"], "contract_addendum_ref": "race" }]], "body": { "to_region": "eu-west-1", "from_region": "us-east-1" } }))),
    responses((status = 201, description = "the drill", body = Data<Drill>)))]
async fn drill(State(state): State<AppState>, Operator(who): Operator, Path(id): Path<String>, body: Body<NewDrill>) -> ApiResult<Created<Drill>> {
    let id = path_id(&id).map_err(|_| ApiError::Missing("profile not found"))?.to_string();
    let started = Instant::now();
    let started_at = db::now();
    let sql = format!("SELECT {COLUMNS} FROM active_active_profile WHERE profile_id = $1");
    let mut tx = state.db.begin().await?;
    let profile: Profile = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&id).fetch_optional(&mut *tx).await?.ok_or(ApiError::Missing("profile not found"))?;
    let body = body.checked()?;
    let to = body.to_region.as_str().to_string();
    let from = body.from_region.map(Region::as_str);
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
    let downgrade = !passed && profile.tier == Tier::ActiveActive;

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
    let entry = audit::record_operator_in(&mut tx, &profile.tenant_id.to_string(), &who, events::FAILOVER_DRILL_COMPLETED, payload).await?;
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
    mode: Replication,
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
        let services = std::iter::once(("*".to_string(), Replication::Async))
            .chain(overrides.iter().filter_map(|(s, m)| Some((s.clone(), m.as_str()?.parse().ok()?))))
            .filter(|(_, m)| *m != Replication::SingleRegion);
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
async fn read(State(state): State<AppState>, _: Operator, Path(tenant_id): Path<String>) -> ApiResult<Data<View>> {
    let tenant_id = path_id(&tenant_id).map_err(|_| ApiError::Missing("no profile for tenant"))?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM active_active_profile WHERE tenant_id = $1");
    let profile: Profile =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&tenant_id).fetch_optional(&state.db.read).await?.ok_or(ApiError::Missing("no profile for tenant"))?;
    Ok(ok(View { replication_streams: streams(&profile), profile }))
}
