//! sdk-diagnostic-telemetry: crash reports per device, and device health
//! snapshots with the public latest-health read.
//!
//! Several tenants may register the same `device_uuid`; each tenant's
//! snapshots are its own. The public read speaks for one tenant: the one
//! named by `tenant_id`, or else the one that registered the device first,
//! so a tenant that registers the device later cannot change what the
//! public read shows.

use crate::device;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(report_crash, list_crashes))
        .routes(routes!(get_crash))
        .routes(routes!(record_snapshot, list_snapshots))
        .routes(routes!(latest_health))
}

/// A crash report, answered with its id as `id`.
#[derive(Debug, FromRow, Serialize, ToSchema)]
struct Crash {
    #[serde(rename = "id")]
    crash_id: Id,
    tenant_id: String,
    device_uuid: String,
    person_id: Option<String>,
    app_version: Option<String>,
    os_version: Option<String>,
    occurred_at: Timestamp,
    stack_envelope: String,
    created_at: Timestamp,
}

const CRASH_COLUMNS: &str = "crash_id, tenant_id, device_uuid, person_id, app_version, os_version, occurred_at, stack_envelope, created_at";
const CRASHES: Listing =
    Listing { table: "diagnostic_crash", columns: CRASH_COLUMNS, filter: "tenant_id = $1 AND device_uuid = $2", order: "occurred_at DESC, crash_id DESC" };

/// A health snapshot as its reporter is answered (never its tenant).
#[derive(Debug, FromRow, Serialize, ToSchema)]
struct HealthSnapshot {
    snapshot_id: Id,
    device_uuid: String,
    status: HealthLevel,
    #[sqlx(try_from = "String")]
    metrics: JsonText,
    taken_at: Timestamp,
}

/// What the public read says of a device's health: the status and when it
/// was taken, nothing more.
#[derive(Debug, FromRow, Serialize, ToSchema)]
struct DeviceHealthStatus {
    device_uuid: String,
    /// `unknown` when there is no snapshot.
    status: DeviceHealth,
    /// Null when there is no snapshot.
    taken_at: Option<Timestamp>,
}

#[derive(Deserialize, ToSchema)]
struct NewCrash {
    app_version: Option<String>,
    /// A registered device of the caller's tenant.
    #[schema(format = "uuid")]
    device_uuid: String,
    /// Now when absent; at most 5 minutes ahead.
    #[schema(format = DateTime)]
    occurred_at: Option<String>,
    os_version: Option<String>,
    #[schema(format = "uuid")]
    person_id: Option<String>,
    stack_envelope: String,
}

/// Records a crash of a registered device of the caller's tenant.
#[utoipa::path(post, path = "/api/diagnostic/crash", tag = "sdk-diagnostic-telemetry", request_body = NewCrash,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/devices", { "device_uuid": "{unique}", "platform": "ios" }]],
        "body": { "device_uuid": "{unique}", "stack_envelope": "race stack" } }))),
    responses((status = 201, description = "the crash", body = Data<Crash>)))]
async fn report_crash(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewCrash>) -> ApiResult<Created<Crash>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let device = path_id(&body.device_uuid)?.to_string();
    let stack = body.stack_envelope.trim().to_string();
    let person = check.optional_uuid("person_id", &body.person_id);
    let occurred_at = check.time_or_now("occurred_at", &body.occurred_at);
    check.finish()?;
    let mut tx = state.db.begin().await?;
    if !device::registered(&mut *tx, &ctx.tenant_id, &device).await? {
        return Err(ApiError::invalid("device_uuid does not name a registered device of this tenant"));
    }
    let sql = format!(
        "INSERT INTO diagnostic_crash (crash_id, tenant_id, device_uuid, person_id, app_version, os_version, occurred_at, stack_envelope, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING {CRASH_COLUMNS}"
    );
    let crash: Crash = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&device)
        .bind(person.map(|p| p.to_string()))
        .bind(Check::optional(&body.app_version))
        .bind(Check::optional(&body.os_version))
        .bind(&occurred_at)
        .bind(&stack)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    // The stack itself stays out of the audit chain: it may carry personal data.
    let payload = json!({ "crash_id": crash.crash_id, "device_uuid": device, "app_version": crash.app_version, "occurred_at": occurred_at });
    audit::record(&mut tx, &ctx, events::CRASH_REPORTED, payload).await?;
    tx.commit().await?;
    Ok(created(crash))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct DeviceQuery {
    /// The device whose crashes to list.
    #[param(format = "uuid")]
    device_uuid: String,
}

/// A page of the crashes of one device, newest first.
#[utoipa::path(get, path = "/api/diagnostic/crash", tag = "sdk-diagnostic-telemetry", params(DeviceQuery, Page),
    responses((status = 200, description = "a page of crashes", body = ListOf<Crash>)))]
async fn list_crashes(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<DeviceQuery>, page: Page) -> ApiResult<ListOf<Crash>> {
    let device = canonical_uuid(&q.device_uuid);
    page.list::<Crash>(&state.db.read, &CRASHES, &[&ctx.tenant_id, &device]).await
}

/// One crash of the caller's tenant.
#[utoipa::path(get, path = "/api/diagnostic/crash/{id}", tag = "sdk-diagnostic-telemetry", params(("id" = String, Path, description = "the crash's id")),
    responses((status = 200, description = "the crash", body = Data<Crash>)))]
async fn get_crash(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Crash>> {
    let id = path_id(&id)?.to_string();
    let crash: Crash = sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT {CRASH_COLUMNS} FROM diagnostic_crash WHERE crash_id = $1 AND tenant_id = $2")))
        .bind(&id)
        .bind(&ctx.tenant_id)
        .fetch_optional(&state.db.read)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(ok(crash))
}

#[derive(Deserialize, ToSchema)]
struct NewHealthSnapshot {
    /// A registered device of the caller's tenant.
    #[schema(format = "uuid")]
    device_uuid: String,
    #[schema(inline)]
    status: HealthLevel,
    /// `{}` when absent.
    metrics: Option<serde_json::Map<String, Value>>,
    /// Now when absent; at most 5 minutes ahead.
    #[schema(format = DateTime)]
    taken_at: Option<String>,
}

stored_enum! {
    /// A health snapshot's status.
    #[schema(as = HealthLevel)]
    pub enum HealthLevel { Ok = "ok", Degraded = "degraded", Critical = "critical" }
}

stored_enum! {
    /// A device's latest health as the public read says it: a snapshot's
    /// status, or `unknown` when there is none.
    #[schema(as = DeviceHealth)]
    pub enum DeviceHealth { Ok = "ok", Degraded = "degraded", Critical = "critical", Unknown = "unknown" }
}

/// Records a health snapshot of a registered device of the caller's tenant.
#[utoipa::path(post, path = "/api/diagnostic/snapshots", tag = "sdk-diagnostic-telemetry", request_body = NewHealthSnapshot,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/devices", { "device_uuid": "{unique}", "platform": "ios" }]],
        "body": { "device_uuid": "{unique}", "status": "ok" } }))),
    responses((status = 201, description = "the snapshot", body = Data<HealthSnapshot>)))]
async fn record_snapshot(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewHealthSnapshot>) -> ApiResult<Created<HealthSnapshot>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let device = path_id(&body.device_uuid)?.to_string();
    let status = body.status;
    let metrics = Value::Object(body.metrics.clone().unwrap_or_default());
    let taken_at = check.time_or_now("taken_at", &body.taken_at);
    check.finish()?;
    let mut tx = state.db.begin().await?;
    if !device::registered(&mut *tx, &ctx.tenant_id, &device).await? {
        return Err(ApiError::invalid("device_uuid does not name a registered device of this tenant"));
    }
    let snapshot: HealthSnapshot = sqlx::query_as(
        "INSERT INTO diagnostic_health (snapshot_id, tenant_id, device_uuid, status, metrics, taken_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7) \
         RETURNING snapshot_id, device_uuid, status, metrics, taken_at",
    )
    .bind(db::new_id())
    .bind(&ctx.tenant_id)
    .bind(&device)
    .bind(status)
    .bind(metrics.to_string())
    .bind(&taken_at)
    .bind(db::now())
    .fetch_one(&mut *tx)
    .await?;
    audit::record(&mut tx, &ctx, events::HEALTH_REPORTED, json!({ "device_uuid": device, "status": status, "taken_at": taken_at })).await?;
    tx.commit().await?;
    Ok(created(snapshot))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct SnapshotQuery {
    /// Only this device's.
    #[param(format = "uuid")]
    device_uuid: Option<String>,
    /// Taken at or after.
    #[param(format = DateTime)]
    from: Option<String>,
    /// Taken before.
    #[param(format = DateTime)]
    to: Option<String>,
}

/// A page of the caller's tenant's health snapshots with their metrics,
/// latest taken first.
#[utoipa::path(get, path = "/api/diagnostic/snapshots", tag = "sdk-diagnostic-telemetry", params(SnapshotQuery, Page),
    responses((status = 200, description = "a page of snapshots", body = ListOf<HealthSnapshot>)))]
async fn list_snapshots(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<SnapshotQuery>, page: Page) -> ApiResult<ListOf<HealthSnapshot>> {
    let mut check = Check::new();
    let from = check.optional_expiry("from", &q.from).unwrap_or_default();
    let to = check.optional_expiry("to", &q.to).unwrap_or_default();
    check.finish()?;
    let device = canonical_uuid_opt(&q.device_uuid).unwrap_or_default();
    let listing = Listing {
        table: "diagnostic_health",
        columns: "snapshot_id, device_uuid, status, metrics, taken_at",
        filter: "tenant_id = $1 AND ($2 = '' OR device_uuid = $2) AND ($3 = '' OR taken_at >= $3) AND ($4 = '' OR taken_at < $4)",
        order: "taken_at DESC, snapshot_id DESC",
    };
    page.list::<HealthSnapshot>(&state.db.read, &listing, &[&ctx.tenant_id, &device, &from, &to]).await
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct HealthQuery {
    /// The device.
    #[param(format = "uuid")]
    device_uuid: String,
    /// The registering tenant whose snapshots count; the first to register
    /// the device when absent.
    #[param(format = "uuid")]
    tenant_id: Option<String>,
}

/// The latest health status of a device (public).
///
/// Public (its path ends in /health): the latest status from the snapshots
/// of one tenant that registered the device: the `tenant_id` given, or
/// else the first to register it. It answers without a credential, so it
/// says only the status and when it was taken, never metrics or the
/// tenant.
#[utoipa::path(get, path = "/api/diagnostic/health", tag = "sdk-diagnostic-telemetry", params(HealthQuery),
    responses((status = 200, description = "the latest status, `unknown` when there is none", body = Data<DeviceHealthStatus>)))]
async fn latest_health(State(state): State<AppState>, Params(q): Params<HealthQuery>) -> ApiResult<Data<DeviceHealthStatus>> {
    let device = canonical_uuid(&q.device_uuid);
    let tenant = canonical_uuid_opt(&q.tenant_id);
    let latest: Option<DeviceHealthStatus> = match device::registrant(&state.db.read, &device, tenant.as_deref()).await? {
        None => None,
        Some(owner) => {
            sqlx::query_as(
                "SELECT device_uuid, status, taken_at FROM diagnostic_health WHERE device_uuid = $1 AND tenant_id = $2 \
                 ORDER BY taken_at DESC, snapshot_id DESC LIMIT 1",
            )
            .bind(&device)
            .bind(&owner)
            .fetch_optional(&state.db.read)
            .await?
        }
    };
    Ok(ok(latest.unwrap_or(DeviceHealthStatus { device_uuid: device, status: DeviceHealth::Unknown, taken_at: None })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enum_values;

    #[test]
    fn the_documented_health_statuses_are_the_validated_ones() {
        assert_eq!(enum_values::<HealthLevel>(), HealthLevel::ALL.iter().map(|h| h.as_str()).collect::<Vec<_>>());
    }
}
