//! Federation profiles (fields not shown in the documents; decided here):
//! a home region, the peer regions it federates with, the data classes it
//! shares with them, and how failover between them is probed and decided.
//!
//! A region is one of the enumeration's or a registered sovereign region.
//! A sovereign region marked `terminal_federation` may not federate
//! onward: it may be a peer, never a home. The `sovereign` data class is
//! shared only among sovereign regions.

use hub_kernel::gate::Operator;
use hub_kernel::prelude::*;

use crate::multi_region::Region;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create, list))
}

const LIST_CAP: i64 = 200;

stored_enum! {
    /// A class of data a federation shares.
    #[schema(as = FederationDataClass)]
    enum Class { Open = "open", Restricted = "restricted", Sovereign = "sovereign" }
}

stored_enum! {
    /// How failover between a profile's regions is decided.
    #[schema(as = FederationFailoverMode)]
    enum Mode { Manual = "manual", Automatic = "automatic" }
}

stored_enum! {
    /// Whether a federation profile is in force.
    #[schema(as = FederationProfileStatus)]
    enum ProfileStatus { Active = "active" }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = FederationProfile)]
struct Profile {
    profile_id: Id,
    name: String,
    home_region: String,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<String>)]
    peer_regions: JsonText,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<Class>)]
    shared_data_classes: JsonText,
    failover_mode: Mode,
    probe_interval_seconds: i64,
    /// Failed probes in a row after which a peer counts as down.
    failure_threshold: i64,
    status: ProfileStatus,
    created_by: String,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const COLUMNS: &str = "profile_id, name, home_region, peer_regions, shared_data_classes, failover_mode, probe_interval_seconds, failure_threshold, \
                       status, created_by, created_at, updated_at";

#[derive(Deserialize, ToSchema)]
#[schema(as = NewFederationProfile)]
struct NewProfile {
    /// 1–100 of `a-z 0-9 . _ -`, unique.
    #[schema(max_length = 100)]
    name: String,
    /// A region of the enumeration or a registered sovereign region that
    /// is not terminal.
    #[schema(max_length = 64)]
    home_region: String,
    /// Distinct regions (1 to 64 characters each) other than the home
    /// region.
    #[schema(min_items = 1, max_items = 20)]
    peer_regions: Vec<String>,
    /// Distinct classes (default `["open"]`).
    #[schema(min_items = 1, max_items = 3)]
    shared_data_classes: Option<Vec<Class>>,
    /// Default `manual`.
    failover_mode: Option<Mode>,
    /// Default 30.
    #[schema(minimum = 5, maximum = 3600)]
    probe_interval_seconds: Option<i64>,
    /// Default 3.
    #[schema(minimum = 1, maximum = 100)]
    failure_threshold: Option<i64>,
}

/// Creates a federation profile.
#[utoipa::path(post, path = "/admin/federation/profiles", tag = "admin-federation", request_body = NewProfile,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "body": { "name": "r-{unique}", "home_region": "us-east-1", "peer_regions": ["eu-west-1"] } }))),
    responses((status = 201, description = "the profile", body = Data<Profile>)))]
async fn create(State(state): State<AppState>, Operator(who): Operator, body: Body<NewProfile>) -> ApiResult<Created<Profile>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let name = body.name.trim().to_string();
    if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')) {
        check.fail("name must be 1 to 100 of a-z, 0-9, '.', '_' or '-'");
    }
    let home = body.home_region.trim().to_string();
    let mut peers: Vec<String> = Vec::new();
    for peer in body.peer_regions.iter().map(|p| p.trim()) {
        if peer.is_empty() || peer.len() > 64 || peers.iter().any(|p| p == peer) {
            check.fail("peer_regions must hold distinct strings of 1 to 64 characters");
            peers.clear();
            break;
        }
        peers.push(peer.to_string());
    }
    if peers.contains(&home) {
        check.fail("peer_regions must not contain the home_region");
    }
    let mut classes: Vec<Class> = Vec::new();
    for class in body.shared_data_classes.unwrap_or_else(|| vec![Class::Open]) {
        if classes.contains(&class) {
            check.fail("shared_data_classes must hold distinct classes");
            break;
        }
        classes.push(class);
    }
    let mode = body.failover_mode.unwrap_or(Mode::Manual);
    let interval = body.probe_interval_seconds.unwrap_or(30);
    let threshold = body.failure_threshold.unwrap_or(3);
    check.finish()?;

    let mut tx = state.db.begin().await?;
    // Every region named: the enumeration's, or a sovereign region (whose
    // terminal flag is read).
    let mut check = Check::new();
    let mut sovereign_everywhere = true;
    for (i, region) in std::iter::once(&home).chain(&peers).enumerate() {
        let terminal: Option<i64> =
            sqlx::query_scalar("SELECT terminal_federation FROM sovereign_region WHERE region_id = $1").bind(region).fetch_optional(&mut *tx).await?;
        sovereign_everywhere &= terminal.is_some();
        match terminal {
            None if region.parse::<Region>().is_err() => {
                let regions: Vec<&str> = Region::ALL.iter().map(|r| r.as_str()).collect();
                check.fail(format!("{region} is neither a region ({}) nor a registered sovereign region", regions.join(", ")))
            }
            Some(1) if i == 0 => check.fail(format!("home_region {region} is terminal: it may not federate onward")),
            _ => {}
        }
    }
    if classes.contains(&Class::Sovereign) && !sovereign_everywhere {
        check.fail("the sovereign data class is shared only among sovereign regions");
    }
    check.finish()?;
    let sql = format!(
        "INSERT INTO federation_profile (profile_id, name, home_region, peer_regions, shared_data_classes, failover_mode, probe_interval_seconds, \
         failure_threshold, status, created_by, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'active', $9, $10, $10) \
         ON CONFLICT (name) DO NOTHING RETURNING {COLUMNS}"
    );
    let made: Option<Profile> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&name)
        .bind(&home)
        .bind(json!(peers).to_string())
        .bind(json!(classes).to_string())
        .bind(mode)
        .bind(interval)
        .bind(threshold)
        .bind(&*who)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let made = made.ok_or_else(|| ApiError::Conflict(format!("a federation profile is named {name}")))?;
    let payload = json!({ "profile_id": made.profile_id, "name": name, "home_region": home, "peer_regions": peers, "shared_data_classes": classes });
    audit::record_operator(&mut tx, &who, events::FEDERATION_PROFILE_CREATED, payload).await?;
    tx.commit().await?;
    Ok(created(made))
}

/// Federation profiles, newest first, at most 200.
#[utoipa::path(get, path = "/admin/federation/profiles", tag = "admin-federation",
    responses((status = 200, description = "the profiles", body = Data<Vec<Profile>>)))]
async fn list(State(state): State<AppState>, _: Operator) -> ApiResult<Data<Vec<Profile>>> {
    let sql = format!("SELECT {COLUMNS} FROM federation_profile ORDER BY created_at DESC, profile_id DESC LIMIT $1");
    let rows: Vec<Profile> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(LIST_CAP).fetch_all(&state.db.read).await?;
    Ok(ok(rows))
}
