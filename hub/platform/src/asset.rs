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
        .routes(routes!(create))
        .routes(routes!(get_asset))
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
    created_at: Timestamp,
}

const ASSET_COLUMNS: &str = "asset_id, tenant_id, bu_id, display_name, model, device_uuid, components, created_at";

impl Asset {
    /// The component ids the asset declares: plain strings, or objects
    /// carrying `component_id`.
    pub fn component_ids(&self) -> Vec<String> {
        let items = self.components.0.as_array().map(Vec::as_slice).unwrap_or_default();
        items.iter().filter_map(|c| c.as_str().or_else(|| c.get("component_id").and_then(Value::as_str)).map(str::to_string)).collect()
    }
}

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
/// the transaction, so positions are handed out in commit order.
pub async fn take_position(tx: &mut Tx, tenant_id: &str, asset_id: &str) -> ApiResult<Positioned> {
    let id = path_id(asset_id)?;
    let sql = format!("UPDATE asset_asset SET queue_seq = queue_seq + 1 WHERE asset_id = $1 AND tenant_id = $2 RETURNING {ASSET_COLUMNS}, queue_seq");
    sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(id.to_string()).bind(tenant_id).fetch_optional(&mut **tx).await?.ok_or(ApiError::NotFound)
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
    if items.iter().any(|c| !(c.is_string() || c.get("component_id").is_some_and(Value::is_string))) {
        check.fail("components must be an array of component ids or of objects with a string component_id");
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
    let asset = find(&mut *tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
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
