//! Federation profiles (fields not shown in the documents; decided here):
//! a home region, the peer regions it federates with, the data classes it
//! shares with them, and how failover between them is probed and decided.
//!
//! A region is one of the enumeration's or a registered sovereign region.
//! A sovereign region marked `terminal_federation` may not federate
//! onward: it may be a peer, never a home. The `sovereign` data class is
//! shared only among sovereign regions.

use hub_kernel::gate::{Operator, ops_tokens};
use hub_kernel::prelude::*;

use crate::fields::required_bounded;
use crate::multi_region::REGIONS;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create, list))
}

const CLASSES: [&str; 3] = ["open", "restricted", "sovereign"];
const MODES: [&str; 2] = ["manual", "automatic"];
const LIST_CAP: i64 = 200;

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = FederationProfile)]
struct Profile {
    profile_id: String,
    name: String,
    home_region: String,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<String>)]
    peer_regions: JsonText,
    /// Of `open`, `restricted`, `sovereign`.
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<String>)]
    shared_data_classes: JsonText,
    /// `manual` or `automatic`.
    failover_mode: String,
    probe_interval_seconds: i64,
    /// Failed probes in a row after which a peer counts as down.
    failure_threshold: i64,
    /// `active`.
    status: String,
    created_by: String,
    created_at: String,
    updated_at: String,
}

const COLUMNS: &str = "profile_id, name, home_region, peer_regions, shared_data_classes, failover_mode, probe_interval_seconds, failure_threshold, \
                       status, created_by, created_at, updated_at";

#[derive(Deserialize, ToSchema)]
#[schema(as = NewFederationProfile)]
struct NewProfile {
    /// 1–100 of `a-z 0-9 . _ -`, unique.
    #[schema(required = true)]
    name: Option<String>,
    /// A region of the enumeration or a registered sovereign region that
    /// is not terminal.
    #[schema(required = true)]
    home_region: Option<String>,
    /// 1–20 distinct regions other than the home region.
    #[schema(required = true, value_type = Vec<String>)]
    peer_regions: Option<Value>,
    /// Distinct classes of `open`, `restricted`, `sovereign` (default
    /// `["open"]`).
    #[schema(value_type = Option<Vec<String>>)]
    shared_data_classes: Option<Value>,
    /// `manual` (default) or `automatic`.
    failover_mode: Option<String>,
    /// 5 to 3600 (default 30).
    #[schema(value_type = Option<i64>)]
    probe_interval_seconds: Option<Value>,
    /// 1 to 100 (default 3).
    #[schema(value_type = Option<i64>)]
    failure_threshold: Option<Value>,
}

/// Distinct non-blank strings of at most 64 characters.
fn strings(check: &mut Check, name: &str, value: Option<&Value>, max_items: usize) -> Option<Vec<String>> {
    let items = match value {
        Some(Value::Array(items)) if !items.is_empty() && items.len() <= max_items => items,
        None | Some(Value::Null) => return None,
        Some(_) => {
            check.fail(format!("{name} must be an array of 1 to {max_items} strings"));
            return Some(Vec::new());
        }
    };
    let mut out: Vec<String> = Vec::new();
    for item in items {
        match item.as_str().map(str::trim).filter(|s| !s.is_empty() && s.len() <= 64) {
            Some(s) if !out.iter().any(|o| o == s) => out.push(s.to_string()),
            _ => {
                check.fail(format!("{name} must hold distinct strings of 1 to 64 characters"));
                return Some(Vec::new());
            }
        }
    }
    Some(out)
}

/// Creates a federation profile.
#[utoipa::path(post, path = "/admin/federation/profiles", tag = "admin-federation", request_body = NewProfile,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "body": { "name": "r-{unique}", "home_region": "us-east-1", "peer_regions": ["eu-west-1"] } }))),
    responses((status = 201, description = "the profile", body = Data<Profile>)))]
async fn create(State(state): State<AppState>, Operator(who): Operator, Lenient(body): Lenient<NewProfile>) -> ApiResult<Response> {
    let mut check = Check::new();
    let name = required_bounded(&mut check, "name", &body.name, 100);
    if !name.is_empty() && !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')) {
        check.fail("name must be 1 to 100 of a-z, 0-9, '.', '_' or '-'");
    }
    let home = required_bounded(&mut check, "home_region", &body.home_region, 64);
    let peers = strings(&mut check, "peer_regions", body.peer_regions.as_ref(), 20).unwrap_or_else(|| {
        check.fail("peer_regions is required");
        Vec::new()
    });
    if peers.contains(&home) {
        check.fail("peer_regions must not contain the home_region");
    }
    let classes = strings(&mut check, "shared_data_classes", body.shared_data_classes.as_ref(), 3).unwrap_or_else(|| vec!["open".into()]);
    if classes.iter().any(|c| !CLASSES.contains(&c.as_str())) {
        check.fail(format!("shared_data_classes entries must be one of: {}", CLASSES.join(", ")));
    }
    let mode = Check::optional(&body.failover_mode).unwrap_or_else(|| "manual".into());
    check.one_of("failover_mode", &mode, &MODES);
    let interval = check.optional_int("probe_interval_seconds", body.probe_interval_seconds.as_ref(), 5, 3600).unwrap_or(30);
    let threshold = check.optional_int("failure_threshold", body.failure_threshold.as_ref(), 1, 100).unwrap_or(3);
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
            None if !REGIONS.contains(&region.as_str()) => {
                check.fail(format!("{region} is neither a region ({}) nor a registered sovereign region", REGIONS.join(", ")))
            }
            Some(1) if i == 0 => check.fail(format!("home_region {region} is terminal: it may not federate onward")),
            _ => {}
        }
    }
    if classes.iter().any(|c| c == "sovereign") && !sovereign_everywhere {
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
        .bind(&mode)
        .bind(interval)
        .bind(threshold)
        .bind(&*who)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let made = made.ok_or_else(|| ApiError::Conflict(format!("a federation profile is named {name}")))?;
    let payload = json!({ "profile_id": made.profile_id, "name": name, "home_region": home, "peer_regions": peers, "shared_data_classes": classes });
    ops_tokens::record(&mut tx, &who, events::FEDERATION_PROFILE_CREATED, payload).await?;
    tx.commit().await?;
    Ok(created(made))
}

/// Federation profiles, newest first, at most 200.
#[utoipa::path(get, path = "/admin/federation/profiles", tag = "admin-federation",
    responses((status = 200, description = "the profiles", body = Data<Vec<Profile>>)))]
async fn list(State(state): State<AppState>, _: Operator) -> ApiResult<Response> {
    let sql = format!("SELECT {COLUMNS} FROM federation_profile ORDER BY created_at DESC, profile_id DESC LIMIT $1");
    let rows: Vec<Profile> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(LIST_CAP).fetch_all(&state.db.read).await?;
    Ok(ok(rows))
}
