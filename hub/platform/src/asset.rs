//! sdk-asset: assets (robots) with their digital twin (desired state set by
//! the tenant, reported state sent by the edge agent), sensor readings
//! aggregated per time bucket, and per-robot credentials.
//!
//! A per-robot credential is an opaque bearer secret bound to one asset,
//! shown once and stored only as a SHA-256 hash. It authenticates that
//! asset's command stream (SSE and QUIC) and its command acks, nothing else.

use crate::{
    command,
    robots::{CREDENTIAL_PREFIX, RobotCredential},
};
use hub_kernel::prelude::*;
use hub_kernel::{bus, crypto, validate};

use command::{CommandState, CommandView};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list_assets))
        .routes(routes!(get_asset, update_asset))
        .routes(routes!(retire))
        .routes(routes!(twin, set_desired))
        .routes(routes!(readings))
        .routes(routes!(issue_credential, list_credentials))
        .routes(routes!(revoke_credential))
        .routes(routes!(list_commands))
}

/// A robot credential request; every field is optional.
#[derive(Deserialize, ToSchema)]
struct NewRobotCredential {
    /// Uses a minute (HTTP acks, SSE stream opens, QUIC connections).
    #[schema(minimum = 1)]
    rate_limit_rpm: Option<i64>,
    /// In the future.
    #[schema(format = DateTime)]
    expires_at: Option<String>,
}

stored_enum! {
    /// Whether an asset is in service: `retired` once decommissioned (its
    /// robot credentials revoked, no new command taken).
    #[schema(as = AssetStatus)]
    pub enum AssetStatus { Active = "active", Retired = "retired" }
}

/// An asset as its tenant sees it (the twin is read on its own route).
#[derive(Debug, FromRow, Serialize, ToSchema)]
pub struct Asset {
    asset_id: Id,
    tenant_id: String,
    bu_id: Option<String>,
    display_name: String,
    model: Option<String>,
    device_uuid: Option<Id>,
    #[sqlx(try_from = "String")]
    components: JsonText,
    status: AssetStatus,
    retired_at: Option<Timestamp>,
    created_at: Timestamp,
}

const ASSET_COLUMNS: &str = "asset_id, tenant_id, bu_id, display_name, model, device_uuid, components, status, retired_at, created_at";

/// The asset as guarded writes name it.
const ASSET: Stateful = Stateful { noun: "asset", table: "asset_asset", key: "asset_id", state: "status" };

impl Asset {
    /// The component ids the asset declares: plain strings, or objects
    /// carrying `component_id`.
    pub fn component_ids(&self) -> Vec<String> {
        let items = self.components.0.as_array().map(Vec::as_slice).unwrap_or_default();
        items.iter().filter_map(|c| c.as_str().or_else(|| c.get("component_id").and_then(Value::as_str)).map(str::to_string)).collect()
    }

    /// Whether the asset is decommissioned.
    pub fn retired(&self) -> bool {
        self.status == AssetStatus::Retired
    }
}

/// Whether every item names a component: a string, or an object carrying
/// a string `component_id`.
fn valid_components(items: &[Value]) -> bool {
    items.iter().all(|c| c.is_string() || c.get("component_id").is_some_and(Value::is_string))
}

const COMPONENTS_RULE: &str = "components must be an array of component ids or of objects with a string component_id";

/// The digital twin: the desired state the tenant sets and the state the
/// edge agent last reported.
#[derive(Debug, FromRow, Serialize, ToSchema)]
struct Twin {
    asset_id: Id,
    #[sqlx(rename = "desired_state", try_from = "String")]
    desired: JsonText,
    desired_at: Timestamp,
    #[sqlx(rename = "reported_state", try_from = "String")]
    reported: JsonText,
    reported_at: Option<Timestamp>,
}

const TWIN_COLUMNS: &str = "asset_id, desired_state, desired_at, reported_state, reported_at";

#[derive(Deserialize, ToSchema)]
struct NewAsset {
    bu_id: Option<String>,
    display_name: String,
    model: Option<String>,
    #[schema(format = "uuid")]
    device_uuid: Option<String>,
    /// Each item a component id (a string) or an object carrying a string
    /// `component_id`.
    components: Option<Vec<Value>>,
    /// The twin's initial desired state; `{}` when absent.
    desired_state: Option<serde_json::Map<String, Value>>,
}

/// `columns` of the caller's tenant's asset with this path id (404
/// otherwise).
async fn by_path<'e, E, T>(exec: E, columns: &str, tenant_id: &str, asset_id: &str) -> ApiResult<T>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
    T: for<'r> FromRow<'r, sqlx::any::AnyRow> + Send + Unpin,
{
    let id = path_id(asset_id)?;
    sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT {columns} FROM asset_asset WHERE asset_id = $1 AND tenant_id = $2")))
        .bind(id.to_string())
        .bind(tenant_id)
        .fetch_optional(exec)
        .await?
        .ok_or(ApiError::NotFound)
}

/// The caller's tenant's asset with this path id (404 otherwise).
pub async fn find<'e, E>(exec: E, tenant_id: &str, asset_id: &str) -> ApiResult<Asset>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    by_path(exec, ASSET_COLUMNS, tenant_id, asset_id).await
}

/// One of a tenant's assets with the stream position just taken for it.
#[derive(FromRow)]
pub struct Positioned {
    #[sqlx(flatten)]
    pub asset: Asset,
    pub queue_seq: i64,
}

/// Takes the next stream position of the caller's tenant's asset with
/// this path id (404 when there is none), answering the asset with it:
/// the lookup and the position in one statement. The row stays locked to
/// the transaction, so positions are handed out in commit order. Without
/// `advance` the position stays as it is: the row is only locked, so a
/// retirement cannot pass between the caller's look at the asset and its
/// commit.
pub async fn take_position(tx: &mut Tx, tenant_id: &str, asset_id: &str, advance: bool) -> ApiResult<Positioned> {
    let id = path_id(asset_id)?;
    let sql = format!("UPDATE asset_asset SET queue_seq = queue_seq + $3 WHERE asset_id = $1 AND tenant_id = $2 RETURNING {ASSET_COLUMNS}, queue_seq");
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(id.to_string())
        .bind(tenant_id)
        .bind(i64::from(advance))
        .fetch_optional(&mut **tx)
        .await?
        .ok_or(ApiError::NotFound)
}

/// Registers an asset (a robot) with its twin.
#[utoipa::path(post, path = "/api/assets", tag = "sdk-asset", request_body = NewAsset,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "display_name": "race robot" } }))),
    responses((status = 201, description = "the asset", body = Data<Asset>)))]
async fn create(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewAsset>) -> ApiResult<Created<Asset>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let display_name = body.display_name.trim().to_string();
    let items = body.components.clone().unwrap_or_default();
    if !valid_components(&items) {
        check.fail(COMPONENTS_RULE);
    }
    let components = Value::Array(items);
    let desired = Value::Object(body.desired_state.clone().unwrap_or_default());
    let device_uuid = canonical_uuid_opt(&body.device_uuid);
    check.finish()?;
    let now = db::now();
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO asset_asset (asset_id, tenant_id, bu_id, display_name, model, device_uuid, components, \
         desired_state, desired_at, reported_state, reported_at, queue_seq, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, '{{}}', NULL, 0, $9) RETURNING {ASSET_COLUMNS}"
    );
    let asset: Asset = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(Check::optional(&body.bu_id))
        .bind(&display_name)
        .bind(Check::optional(&body.model))
        .bind(&device_uuid)
        .bind(components.to_string())
        .bind(desired.to_string())
        .bind(&now)
        .fetch_one(&mut *tx)
        .await?;
    audit::record(
        &mut tx,
        &ctx,
        events::ASSET_REGISTERED,
        json!({
            "asset_id": asset.asset_id, "display_name": display_name, "device_uuid": asset.device_uuid, "components": components,
        }),
    )
    .await?;
    tx.commit().await?;
    Ok(created(asset))
}

/// An asset of the caller's tenant.
#[utoipa::path(get, path = "/api/assets/{asset_id}", tag = "sdk-asset", params(("asset_id" = String, Path, description = "the asset")),
    responses((status = 200, description = "the asset", body = Data<Asset>)))]
async fn get_asset(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Asset>> {
    Ok(ok(find(&state.db.read, &ctx.tenant_id, &id).await?))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct AssetFilter {
    /// Only assets of this model.
    model: Option<String>,
    /// Only the assets bound to this device.
    #[param(format = "uuid")]
    device_uuid: Option<String>,
    /// Only assets of this business unit.
    bu_id: Option<String>,
    /// Only assets in this status.
    #[param(inline)]
    status: Option<AssetStatus>,
}

const ASSETS: Listing = Listing {
    table: "asset_asset",
    columns: ASSET_COLUMNS,
    filter: "tenant_id = $1 AND ($2 = '' OR model = $2) AND ($3 = '' OR device_uuid = $3) AND ($4 = '' OR bu_id = $4) AND ($5 = '' OR status = $5)",
    order: "created_at DESC, asset_id DESC",
};

/// The caller's tenant's assets (its fleet), newest first.
#[utoipa::path(get, path = "/api/assets", tag = "sdk-asset", params(AssetFilter, Page),
    responses((status = 200, description = "a page of assets", body = ListOf<Asset>)))]
async fn list_assets(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<AssetFilter>, page: Page) -> ApiResult<ListOf<Asset>> {
    let model = Check::optional(&q.model).unwrap_or_default();
    let device = q.device_uuid.as_deref().map(canonical_uuid).unwrap_or_default();
    let bu = Check::optional(&q.bu_id).unwrap_or_default();
    let status = q.status.map_or("", AssetStatus::as_str);
    page.list::<Asset>(&state.db.read, &ASSETS, &[&ctx.tenant_id, &model, &device, &bu, status]).await
}

/// A change of an asset: what is absent stays as it is.
#[derive(Deserialize, ToSchema)]
#[schema(as = AssetUpdate)]
struct AssetUpdate {
    /// Not blank.
    #[schema(max_length = 200)]
    display_name: Option<String>,
    #[schema(max_length = 200)]
    model: Option<String>,
    #[schema(max_length = 200)]
    bu_id: Option<String>,
    #[schema(format = "uuid")]
    device_uuid: Option<String>,
    /// Replaces the list: each item a component id (a string) or an object
    /// carrying a string `component_id`.
    #[schema(max_items = 1000)]
    components: Option<Vec<Value>>,
}

/// Changes an active asset's display name, model, business unit, device or
/// components (at least one; what is absent stays). A retired asset is
/// not changed (409).
#[utoipa::path(patch, path = "/api/assets/{asset_id}", tag = "sdk-asset", params(("asset_id" = String, Path, description = "the asset")),
    request_body = AssetUpdate,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/assets", { "display_name": "race robot" }]],
        "body": { "model": "R-race" } }))),
    responses((status = 200, description = "the asset", body = Data<Asset>)))]
async fn update_asset(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<AssetUpdate>) -> ApiResult<Data<Asset>> {
    // Not found comes first, so another tenant's id is never confirmed.
    let asset_id = find(&state.db.read, &ctx.tenant_id, &id).await?.asset_id.to_string();
    let body = body.checked()?;
    let mut check = Check::new();
    let display_name = body.display_name.as_ref().map(|n| n.trim().to_string());
    if display_name.as_ref().is_some_and(String::is_empty) {
        check.fail("display_name must not be blank");
    }
    let (model, bu_id) = (Check::optional(&body.model), Check::optional(&body.bu_id));
    let device_uuid = canonical_uuid_opt(&body.device_uuid);
    let components = body.components.as_ref().map(|items| {
        if !valid_components(items) {
            check.fail(COMPONENTS_RULE);
        }
        Value::Array(items.clone())
    });
    if display_name.is_none() && body.model.is_none() && body.bu_id.is_none() && device_uuid.is_none() && components.is_none() {
        check.fail("give at least one of display_name, model, bu_id, device_uuid, components");
    }
    check.finish()?;
    let mut tx = state.db.begin().await?;
    // One guarded statement: a retired asset is never changed.
    let sql = format!(
        "UPDATE asset_asset SET display_name = COALESCE($1, display_name), model = COALESCE($2, model), bu_id = COALESCE($3, bu_id), \
         device_uuid = COALESCE($4, device_uuid), components = COALESCE($5, components) \
         WHERE tenant_id = $6 AND asset_id = $7 AND status = 'active' RETURNING {ASSET_COLUMNS}"
    );
    let changed: Option<Asset> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&display_name)
        .bind(&model)
        .bind(&bu_id)
        .bind(&device_uuid)
        .bind(components.as_ref().map(Value::to_string))
        .bind(&ctx.tenant_id)
        .bind(&asset_id)
        .fetch_optional(&mut *tx)
        .await?;
    let asset = ASSET.settle(&mut tx, &ctx.tenant_id, &asset_id, changed, "only an active asset can be changed").await?;
    let payload = json!({
        "asset_id": asset_id, "display_name": display_name, "model": model, "bu_id": bu_id, "device_uuid": device_uuid, "components": components,
    });
    audit::record(&mut tx, &ctx, events::ASSET_UPDATED, payload).await?;
    tx.commit().await?;
    Ok(ok(asset))
}

/// Retires (decommissions) an asset: in one transaction its robot
/// credentials are revoked (their open streams close) and its commands
/// still waiting for approval or delivery are cancelled; it takes no new
/// command (409) and cannot be changed. Assets are never removed: their
/// commands and readings stay readable. Retiring it again answers the same
/// asset without a second event.
#[utoipa::path(post, path = "/api/assets/{asset_id}/retire", tag = "sdk-asset", params(("asset_id" = String, Path, description = "the asset")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "events": 2, "given": [
        ["POST", "/api/assets", { "display_name": "race robot" }],
        ["POST", "/api/assets/{asset_id}/credentials", {}]] }))),
    responses((status = 200, description = "the asset, retired", body = Data<Asset>)))]
async fn retire(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Asset>> {
    let asset_id = path_id(&id)?.to_string();
    let now = db::now();
    let mut tx = state.db.begin().await?;
    // One guarded statement: of two retirements at once, one retires the
    // asset (and revokes and cancels below, under its row lock) and the
    // other finds it retired.
    let sql = format!(
        "UPDATE asset_asset SET status = 'retired', retired_at = $1 WHERE tenant_id = $2 AND asset_id = $3 AND status = 'active' RETURNING {ASSET_COLUMNS}"
    );
    let retired: Option<Asset> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&now).bind(&ctx.tenant_id).bind(&asset_id).fetch_optional(&mut *tx).await?;
    let Some(asset) = retired else {
        // Retired already (the same answer), or not the tenant's (404).
        return Ok(ok(find(&mut *tx, &ctx.tenant_id, &asset_id).await?));
    };
    let revoked: Vec<String> = sqlx::query_scalar(
        "UPDATE asset_credential SET status = 'revoked', revoked_at = $1 WHERE asset_id = $2 AND status <> 'revoked' RETURNING credential_id",
    )
    .bind(&now)
    .bind(&asset_id)
    .fetch_all(&mut *tx)
    .await?;
    for credential_id in &revoked {
        let payload = json!({ "credential_id": credential_id, "asset_id": asset_id, "revoked_at": now, "reason": "asset_retired" });
        audit::record(&mut tx, &ctx, events::ASSET_CREDENTIAL_REVOKED, payload).await?;
    }
    let cancelled = command::cancel_for_retired_asset(&mut tx, &ctx, &asset_id, &now).await?;
    audit::record(&mut tx, &ctx, events::ASSET_RETIRED, json!({ "asset_id": asset_id, "credentials_revoked": revoked, "commands_cancelled": cancelled }))
        .await?;
    bus::notify(&state, &mut tx, &asset_id).await?;
    tx.commit().await?;
    state.streams.wake(&asset_id);
    if !cancelled.is_empty() {
        bus::command_changed(&state, &ctx.tenant_id).await;
    }
    Ok(ok(asset))
}

/// The asset's digital twin: the desired and the last reported state.
#[utoipa::path(get, path = "/api/assets/{asset_id}/twin", tag = "sdk-asset", params(("asset_id" = String, Path, description = "the asset")),
    responses((status = 200, description = "the twin", body = Data<Twin>)))]
async fn twin(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Twin>> {
    Ok(ok(by_path::<_, Twin>(&state.db.read, TWIN_COLUMNS, &ctx.tenant_id, &id).await?))
}

#[derive(Deserialize, ToSchema)]
struct NewDesired {
    /// The desired state.
    desired: serde_json::Map<String, Value>,
}

/// Replaces the desired state of the asset's twin.
///
/// A supporting route: the document names the twin's read only, but a twin
/// nobody can set is of no use.
#[utoipa::path(put, path = "/api/assets/{asset_id}/twin", tag = "sdk-asset", params(("asset_id" = String, Path, description = "the asset")),
    request_body = NewDesired,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/assets", { "display_name": "race robot" }]],
        "body": { "desired": { "speed": 1 } } }))),
    responses((status = 200, description = "the twin", body = Data<Twin>)))]
async fn set_desired(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<NewDesired>) -> ApiResult<Data<Twin>> {
    let mut tx = state.db.begin().await?;
    let id = find(&mut *tx, &ctx.tenant_id, &id).await?.asset_id;
    let desired = Value::Object(body.checked()?.desired);
    let sql = format!("UPDATE asset_asset SET desired_state = $1, desired_at = $2 WHERE asset_id = $3 AND tenant_id = $4 RETURNING {TWIN_COLUMNS}");
    let twin: Twin = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(desired.to_string())
        .bind(db::now())
        .bind(id)
        .bind(&ctx.tenant_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(ApiError::NotFound)?;
    audit::record(&mut tx, &ctx, events::ASSET_UPDATED, json!({ "asset_id": twin.asset_id, "desired": desired })).await?;
    tx.commit().await?;
    Ok(ok(twin))
}

/// Stores the agent's latest reported state (the hub keeps only the latest).
pub async fn record_state(state: &AppState, asset_id: &str, reported: &Value) -> ApiResult<()> {
    if !reported.is_object() {
        return Err(ApiError::invalid("reported state must be an object"));
    }
    sqlx::query("UPDATE asset_asset SET reported_state = $1, reported_at = $2 WHERE asset_id = $3")
        .bind(reported.to_string())
        .bind(db::now())
        .bind(asset_id)
        .execute(state.db.writer())
        .await?;
    Ok(())
}

/// Stores a batch of readings in one transaction.
pub async fn record_readings(state: &AppState, asset_id: &str, readings: &[protocol::command::Reading]) -> ApiResult<usize> {
    let mut check = Check::new();
    let now = chrono::Utc::now();
    let mut rows = Vec::with_capacity(readings.len());
    for (i, r) in readings.iter().enumerate() {
        if r.sensor_id.trim().is_empty() {
            check.fail(format!("readings[{i}].sensor_id is required"));
        }
        // Readings also come in QUIC frames, which no JSON extractor sees.
        if r.sensor_id.contains('\0') {
            check.fail(hub_kernel::nul::refusal(&format!("readings[{i}].sensor_id")));
        }
        if !r.value.is_finite() {
            check.fail(format!("readings[{i}].value must be a finite number"));
        }
        let at = match r.recorded_at.as_deref() {
            None => now,
            Some(s) => validate::observed_time(&format!("readings[{i}].recorded_at"), s).unwrap_or_else(|e| {
                check.fail(e);
                now
            }),
        };
        rows.push((r.sensor_id.trim().to_string(), r.value, db::format_time(at)));
    }
    check.finish()?;
    let received = db::format_time(now);
    let mut tx = state.db.begin().await?;
    for (sensor, value, at) in &rows {
        sqlx::query("INSERT INTO asset_reading (reading_id, asset_id, sensor_id, value, recorded_at, received_at) VALUES ($1, $2, $3, $4, $5, $6)")
            .bind(db::new_id())
            .bind(asset_id)
            .bind(sensor)
            .bind(*value)
            .bind(at)
            .bind(&received)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(rows.len())
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ReadingsQuery {
    /// The bucket size.
    #[param(inline)]
    bucket: ReadingBucket,
    /// Only this sensor's readings.
    sensor_id: Option<String>,
    /// RFC 3339: readings recorded at or after.
    #[param(inline)]
    from: Option<Timestamp>,
    /// RFC 3339: readings recorded before.
    #[param(inline)]
    to: Option<Timestamp>,
    /// Rows at most (one per sensor and bucket): default 500, clamped to 1..5000.
    limit: Option<i64>,
}

stored_enum! {
    /// The time bucket the readings are aggregated by.
    #[schema(as = ReadingBucket)]
    enum ReadingBucket { Second = "second", Minute = "minute", Hour = "hour", Day = "day" }
}

impl ReadingBucket {
    /// Buckets by truncating the stored RFC 3339 text
    /// (`2026-11-21T19:59:07.123456Z`): the prefix length of each bucket,
    /// and the suffix that completes it to a time.
    fn shape(self) -> (usize, &'static str) {
        match self {
            ReadingBucket::Second => (19, "Z"),
            ReadingBucket::Minute => (16, ":00Z"),
            ReadingBucket::Hour => (13, ":00:00Z"),
            ReadingBucket::Day => (10, "T00:00:00Z"),
        }
    }
}

/// One sensor's readings in one bucket.
#[derive(Debug, FromRow, Serialize, ToSchema)]
struct ReadingAggregate {
    sensor_id: String,
    bucket_start: String,
    #[sqlx(rename = "n")]
    count: i64,
    #[sqlx(rename = "min_v")]
    min: f64,
    #[sqlx(rename = "max_v")]
    max: f64,
    #[sqlx(rename = "avg_v")]
    avg: f64,
}

/// An aggregate as answered: with the bucket size asked for.
#[derive(Serialize, ToSchema)]
struct BucketedReadings {
    #[serde(flatten)]
    aggregate: ReadingAggregate,
    bucket: ReadingBucket,
}

/// The asset's readings aggregated per sensor and time bucket.
#[utoipa::path(get, path = "/api/assets/{asset_id}/readings", tag = "sdk-asset", params(("asset_id" = String, Path, description = "the asset"), ReadingsQuery),
    responses((status = 200, description = "count, min, max and avg per sensor and bucket, by sensor then bucket", body = Data<Vec<BucketedReadings>>)))]
async fn readings(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    query: Result<Params<ReadingsQuery>, ApiError>,
) -> ApiResult<Data<Vec<BucketedReadings>>> {
    // Not found comes first, so another tenant's id is never confirmed.
    let asset = find(&state.db.read, &ctx.tenant_id, &id).await?;
    let Params(q) = query?;
    let (from, to) = (q.from.map(|t| t.to_string()), q.to.map(|t| t.to_string()));
    let limit = q.limit.unwrap_or(500).clamp(1, 5000);
    let bucket = q.bucket;
    let (len, suffix) = bucket.shape();
    // `len` and `suffix` are constants of `ReadingBucket::shape`, never caller
    // text, so formatting them into the SQL is safe; binding `len` would
    // give it a different integer type on each backend.
    let sql = format!(
        "SELECT sensor_id, substr(recorded_at, 1, {len}) || '{suffix}' AS bucket_start, COUNT(*) AS n, MIN(value) AS min_v, MAX(value) AS max_v, \
         AVG(value) AS avg_v FROM asset_reading \
         WHERE asset_id = $1 AND ($2 = '' OR sensor_id = $2) AND ($3 = '' OR recorded_at >= $3) AND ($4 = '' OR recorded_at < $4) \
         GROUP BY sensor_id, substr(recorded_at, 1, {len}) ORDER BY sensor_id, bucket_start LIMIT $5"
    );
    let rows: Vec<ReadingAggregate> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(asset.asset_id)
        .bind(Check::optional(&q.sensor_id).unwrap_or_default())
        .bind(from.unwrap_or_default())
        .bind(to.unwrap_or_default())
        .bind(limit)
        .fetch_all(&state.db.read)
        .await?;
    Ok(ok(rows.into_iter().map(|aggregate| BucketedReadings { aggregate, bucket }).collect()))
}

/// Takes the asset's next command-stream position (the command group's
/// enqueue; the position lives on the asset row).
pub async fn next_queue_seq(tx: &mut Tx, asset_id: &str) -> ApiResult<i64> {
    Ok(sqlx::query_scalar("UPDATE asset_asset SET queue_seq = queue_seq + 1 WHERE asset_id = $1 RETURNING queue_seq")
        .bind(asset_id)
        .fetch_one(&mut **tx)
        .await?)
}

stored_enum! {
    /// Whether a robot credential still authenticates its asset.
    #[schema(as = RobotCredentialStatus)]
    pub enum CredentialStatus { Active = "active", Revoked = "revoked" }
}

/// A robot credential as the gate reads it, hash included.
#[derive(FromRow)]
struct StoredCredential {
    credential_id: String,
    asset_id: String,
    tenant_id: String,
    secret_hash: String,
    rate_limit_rpm: Option<i64>,
    expires_at: Option<Timestamp>,
    status: CredentialStatus,
}

impl From<StoredCredential> for RobotCredential {
    fn from(c: StoredCredential) -> Self {
        RobotCredential {
            credential_id: c.credential_id,
            asset_id: c.asset_id,
            tenant_id: c.tenant_id,
            secret_hash: c.secret_hash,
            rate_limit_rpm: c.rate_limit_rpm,
            expires_at: c.expires_at.map(|t| t.0),
            status: c.status.to_string(),
        }
    }
}

/// The credential whose secret hashes to `secret_hash` (the gate's lookup).
pub async fn credential_by_hash(db: &Db, secret_hash: &str) -> ApiResult<Option<RobotCredential>> {
    credential_where(db, "secret_hash", secret_hash).await
}

/// The credential `credential_id` as it stands (the gate's re-check of an
/// open stream).
pub async fn credential_by_id(db: &Db, credential_id: &str) -> ApiResult<Option<RobotCredential>> {
    credential_where(db, "credential_id", credential_id).await
}

async fn credential_where(db: &Db, column: &'static str, value: &str) -> ApiResult<Option<RobotCredential>> {
    let sql = format!("SELECT credential_id, asset_id, tenant_id, secret_hash, rate_limit_rpm, expires_at, status FROM asset_credential WHERE {column} = $1");
    let found: Option<StoredCredential> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(value).fetch_optional(&db.read).await?;
    Ok(found.map(RobotCredential::from))
}

/// A robot credential as its tenant sees it: never the secret, nor its hash.
#[derive(Debug, FromRow, Serialize, ToSchema)]
struct RobotCredentialRow {
    credential_id: Id,
    asset_id: Id,
    last4: String,
    rate_limit_rpm: Option<i64>,
    expires_at: Option<Timestamp>,
    status: CredentialStatus,
    created_at: Timestamp,
    revoked_at: Option<Timestamp>,
}

const CREDENTIAL_COLUMNS: &str = "credential_id, asset_id, last4, rate_limit_rpm, expires_at, status, created_at, revoked_at";
const CREDENTIALS: Listing = Listing {
    table: "asset_credential",
    columns: CREDENTIAL_COLUMNS,
    filter: "asset_id = $1 AND tenant_id = $2",
    order: "created_at DESC, credential_id DESC",
};

/// A credential just issued: what the row says of it and, this once, the
/// secret.
#[derive(Debug, FromRow, Serialize, ToSchema)]
struct IssuedRobotCredentialRow {
    credential_id: Id,
    asset_id: Id,
    rate_limit_rpm: Option<i64>,
    expires_at: Option<Timestamp>,
    status: CredentialStatus,
    created_at: Timestamp,
}

/// An issued credential with its secret.
#[derive(Serialize, ToSchema)]
struct IssuedRobotCredential {
    #[serde(flatten)]
    row: IssuedRobotCredentialRow,
    /// The bearer secret (`rc_…`), shown this once.
    credential: String,
}

/// Issues a per-robot credential for the asset; its secret is shown this once.
/// A retired asset takes none (409).
#[utoipa::path(post, path = "/api/assets/{asset_id}/credentials", tag = "sdk-asset", params(("asset_id" = String, Path, description = "the asset")),
    request_body = NewRobotCredential,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/assets", { "display_name": "race robot" }]], "body": {} }))),
    responses((status = 201, description = "the credential and its secret", body = Data<IssuedRobotCredential>)))]
async fn issue_credential(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    body: Body<NewRobotCredential>,
) -> ApiResult<Created<IssuedRobotCredential>> {
    let mut tx = state.db.begin().await?;
    // The asset's row is locked, so a retirement either comes first (409)
    // or finds this credential to revoke.
    let asset = take_position(&mut tx, &ctx.tenant_id, &id, false).await?.asset;
    let body = body.checked()?;
    if asset.retired() {
        return Err(ApiError::Conflict("the asset is retired: it takes no new credential".into()));
    }
    let mut check = Check::new();
    let rate_limit_rpm = body.rate_limit_rpm;
    let expires_at = check.optional_future_time("expires_at", body.expires_at.map(Value::String).as_ref());
    check.finish()?;
    let secret = format!("{CREDENTIAL_PREFIX}{}", crypto::random_base62(32));
    let row: IssuedRobotCredentialRow = sqlx::query_as(
        "INSERT INTO asset_credential (credential_id, asset_id, tenant_id, secret_hash, last4, rate_limit_rpm, expires_at, status, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'active', $8) RETURNING credential_id, asset_id, rate_limit_rpm, expires_at, status, created_at",
    )
    .bind(db::new_id())
    .bind(asset.asset_id)
    .bind(&ctx.tenant_id)
    .bind(crypto::sha256_hex(secret.as_bytes()))
    .bind(&secret[secret.len() - 4..])
    .bind(rate_limit_rpm)
    .bind(&expires_at)
    .bind(db::now())
    .fetch_one(&mut *tx)
    .await?;
    audit::record(
        &mut tx,
        &ctx,
        events::ASSET_CREDENTIAL_ISSUED,
        json!({
            "credential_id": row.credential_id, "asset_id": row.asset_id, "rate_limit_rpm": row.rate_limit_rpm, "expires_at": row.expires_at,
        }),
    )
    .await?;
    tx.commit().await?;
    Ok(created(IssuedRobotCredential { row, credential: secret }))
}

/// The asset's robot credentials, newest first.
#[utoipa::path(get, path = "/api/assets/{asset_id}/credentials", tag = "sdk-asset", params(("asset_id" = String, Path, description = "the asset"), Page),
    responses((status = 200, description = "a page of credentials", body = ListOf<RobotCredentialRow>)))]
async fn list_credentials(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, page: Page) -> ApiResult<ListOf<RobotCredentialRow>> {
    let asset_id = find(&state.db.read, &ctx.tenant_id, &id).await?.asset_id.to_string();
    page.list::<RobotCredentialRow>(&state.db.read, &CREDENTIALS, &[&asset_id, &ctx.tenant_id]).await
}

/// Revokes a robot credential of the asset.
///
/// Its open streams on every replica are woken and, finding it revoked,
/// close at once; a second revoke answers the same body without a second
/// event.
#[utoipa::path(post, path = "/api/assets/{asset_id}/credentials/{credential_id}/revoke", tag = "sdk-asset",
    params(("asset_id" = String, Path, description = "the asset"), ("credential_id" = String, Path, description = "the credential")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [
        ["POST", "/api/assets", { "display_name": "race robot" }],
        ["POST", "/api/assets/{asset_id}/credentials", {}]] }))),
    responses((status = 200, description = "the credential, revoked", body = Data<RobotCredentialRow>)))]
async fn revoke_credential(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path((asset, credential)): Path<(String, String)>,
) -> ApiResult<Data<RobotCredentialRow>> {
    let mut tx = state.db.begin().await?;
    let asset_id = find(&mut *tx, &ctx.tenant_id, &asset).await?.asset_id.to_string();
    let credential_id = path_id(&credential)?.to_string();
    let sql = format!(
        "UPDATE asset_credential SET status = 'revoked', revoked_at = $1 WHERE credential_id = $2 AND asset_id = $3 AND status <> 'revoked' \
         RETURNING {CREDENTIAL_COLUMNS}"
    );
    let revoked: Option<RobotCredentialRow> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(db::now()).bind(&credential_id).bind(&asset_id).fetch_optional(&mut *tx).await?;
    let Some(cred) = revoked else {
        // Already revoked, or not a credential of this asset.
        let sql = format!("SELECT {CREDENTIAL_COLUMNS} FROM asset_credential WHERE credential_id = $1 AND asset_id = $2");
        let cred: RobotCredentialRow =
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&credential_id).bind(&asset_id).fetch_optional(&mut *tx).await?.ok_or(ApiError::NotFound)?;
        return Ok(ok(cred));
    };
    audit::record(
        &mut tx,
        &ctx,
        events::ASSET_CREDENTIAL_REVOKED,
        json!({ "credential_id": credential_id, "asset_id": asset_id, "revoked_at": cred.revoked_at }),
    )
    .await?;
    bus::notify(&state, &mut tx, &asset_id).await?;
    tx.commit().await?;
    state.streams.wake(&asset_id);
    Ok(ok(cred))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Only commands in this state.
    #[param(inline)]
    status: Option<CommandState>,
}

/// The asset's commands, newest first, optionally of one status.
#[utoipa::path(get, path = "/api/assets/{asset_id}/commands", tag = "sdk-asset", params(("asset_id" = String, Path, description = "the asset"), ListQuery, Page),
    responses((status = 200, description = "a page of commands", body = ListOf<CommandView>)))]
async fn list_commands(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    query: Result<Params<ListQuery>, ApiError>,
    page: Page,
) -> ApiResult<ListOf<CommandView>> {
    // Not found comes first, so another tenant's id is never confirmed.
    let asset_id = find(&state.db.read, &ctx.tenant_id, &id).await?.asset_id.to_string();
    let Params(q) = query?;
    command::list_for_asset(&state, &ctx.tenant_id, &asset_id, q.status, page).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enum_values;

    #[test]
    fn the_documented_buckets_are_the_validated_ones() {
        assert_eq!(enum_values::<ReadingBucket>(), ReadingBucket::ALL.iter().map(|b| b.as_str()).collect::<Vec<_>>());
    }
}
