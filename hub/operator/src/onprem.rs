//! "On-prem installs": customer clusters running the platform, the
//! billing reports generated for them (every generation appends one) and
//! the bundles they applied. An application whose signature was verified
//! moves the install's `installed_version`; an unverified one is
//! recorded as evidence and moves nothing.

use chrono::NaiveDate;
use hub_kernel::gate::Operator;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create)).routes(routes!(read)).routes(routes!(report)).routes(routes!(bundle))
}

stored_enum! {
    /// The Kubernetes distribution of an install.
    #[schema(as = OnpremDistribution)]
    enum Distribution { Vanilla = "vanilla", Openshift = "openshift", Rancher = "rancher", Tanzu = "tanzu" }
}

stored_enum! {
    /// How an install is cut off from networks.
    #[schema(as = OnpremAirGapMode)]
    enum AirGap { Strict = "strict", DiodeIn = "diode-in", DiodeBidi = "diode-bidi" }
}

stored_enum! {
    /// How an install is billed.
    #[schema(as = OnpremBillingMode)]
    enum Billing { InternalReportOnly = "internal-report-only", FlatFee = "flat-fee", PerIncident = "per-incident" }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = OnpremInstall)]
struct Install {
    install_id: Id,
    customer_id: String,
    cluster_name: String,
    k8s_distribution: Distribution,
    installed_version: String,
    air_gap_mode: AirGap,
    billing_mode: Billing,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const COLUMNS: &str = "install_id, customer_id, cluster_name, k8s_distribution, installed_version, air_gap_mode, billing_mode, created_at, updated_at";

#[derive(Deserialize, ToSchema)]
#[schema(as = NewOnpremInstall)]
struct NewInstall {
    #[schema(max_length = 200)]
    customer_id: String,
    #[schema(max_length = 200)]
    cluster_name: String,
    k8s_distribution: Distribution,
    #[schema(max_length = 64)]
    installed_version: String,
    /// Default `strict`.
    air_gap_mode: Option<AirGap>,
    /// Default `internal-report-only`.
    billing_mode: Option<Billing>,
}

/// Registers an install; not idempotent.
#[utoipa::path(post, path = "/admin/onprem/installs", tag = "admin-onprem", request_body = NewInstall,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "customer_id": "race", "cluster_name": "race", "k8s_distribution": "vanilla", "installed_version": "1.0.0" } }))),
    responses((status = 201, description = "the install", body = Data<Install>)))]
async fn create(State(state): State<AppState>, Operator(who): Operator, body: Body<NewInstall>) -> ApiResult<Created<Install>> {
    let body = body.checked()?;
    let (customer, cluster, version) = (body.customer_id.trim(), body.cluster_name.trim(), body.installed_version.trim());
    let distribution = body.k8s_distribution;
    let air_gap = body.air_gap_mode.unwrap_or(AirGap::Strict);
    let billing = body.billing_mode.unwrap_or(Billing::InternalReportOnly);
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO onprem_install (install_id, customer_id, cluster_name, k8s_distribution, installed_version, air_gap_mode, billing_mode, \
         registered_by, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) RETURNING {COLUMNS}"
    );
    let made: Install = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(customer)
        .bind(cluster)
        .bind(distribution)
        .bind(version)
        .bind(air_gap)
        .bind(billing)
        .bind(&*who)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "install_id": made.install_id, "customer_id": customer, "cluster_name": cluster, "installed_version": version });
    audit::record_operator(&mut tx, &who, events::ONPREM_INSTALL_REGISTERED, payload).await?;
    tx.commit().await?;
    Ok(created(made))
}

async fn install<'e, E: sqlx::Executor<'e, Database = sqlx::Any>>(exec: E, raw_id: &str) -> ApiResult<Install> {
    let id = path_id(raw_id).map_err(|_| ApiError::Missing("install not found"))?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM onprem_install WHERE install_id = $1");
    let found: Option<Install> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&id).fetch_optional(exec).await?;
    found.ok_or(ApiError::Missing("install not found"))
}

/// One install (the row only).
#[utoipa::path(get, path = "/admin/onprem/installs/{install_id}", tag = "admin-onprem",
    params(("install_id" = String, Path, description = "the install")),
    responses((status = 200, description = "the install", body = Data<Install>)))]
async fn read(State(state): State<AppState>, _: Operator, Path(id): Path<String>) -> ApiResult<Data<Install>> {
    Ok(ok(install(&state.db.read, &id).await?))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = OnpremBillingReport)]
struct Report {
    report_id: Id,
    install_id: Id,
    period_start: String,
    period_end: String,
    artifact_local_path: String,
    generated_at: Timestamp,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewOnpremBillingReport)]
struct NewReport {
    #[schema(format = Date)]
    period_start: String,
    /// On or after `period_start`.
    #[schema(format = Date)]
    period_end: String,
    /// Where the report lies on the customer's cluster.
    #[schema(max_length = 1024)]
    artifact_local_path: String,
}

/// A day its schema checked (`format: date`).
fn date(name: &str, raw: &str) -> ApiResult<NaiveDate> {
    NaiveDate::parse_from_str(raw.trim(), "%Y-%m-%d").map_err(|_| ApiError::invalid(format!("{name} must be a day, YYYY-MM-DD")))
}

/// Records a billing report generated for an install; every generation
/// appends one.
#[utoipa::path(post, path = "/admin/onprem/installs/{install_id}/billing-reports", tag = "admin-onprem", request_body = NewReport,
    params(("install_id" = String, Path, description = "the install")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/admin/onprem/installs", { "customer_id": "race", "cluster_name": "race", "k8s_distribution": "vanilla", "installed_version": "1.0.0" }]], "body": { "period_start": "2026-01-01", "period_end": "2026-01-31", "artifact_local_path": "/var/race/report.json" } }))),
    responses((status = 201, description = "the report", body = Data<Report>)))]
async fn report(State(state): State<AppState>, Operator(who): Operator, Path(id): Path<String>, body: Body<NewReport>) -> ApiResult<Created<Report>> {
    let mut tx = state.db.begin().await?;
    let target = install(&mut *tx, &id).await?;
    let body = body.checked()?;
    let (start, end) = (date("period_start", &body.period_start)?, date("period_end", &body.period_end)?);
    if end < start {
        return Err(ApiError::invalid("period_end must be on or after period_start"));
    }
    let path = body.artifact_local_path.trim();
    let made: Report = sqlx::query_as(
        "INSERT INTO onprem_billing_report (report_id, install_id, period_start, period_end, artifact_local_path, generated_by, generated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING report_id, install_id, period_start, period_end, artifact_local_path, generated_at",
    )
    .bind(db::new_id())
    .bind(target.install_id)
    .bind(start.to_string())
    .bind(end.to_string())
    .bind(path)
    .bind(&*who)
    .bind(db::now())
    .fetch_one(&mut *tx)
    .await?;
    let payload = json!({ "report_id": made.report_id, "install_id": made.install_id, "period_start": made.period_start, "period_end": made.period_end });
    audit::record_operator(&mut tx, &who, events::ONPREM_BILLING_REPORT_GENERATED, payload).await?;
    tx.commit().await?;
    Ok(created(made))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = OnpremBundleApplication)]
struct Application {
    application_id: Id,
    install_id: Id,
    bundle_version: String,
    #[sqlx(try_from = "i64")]
    #[schema(value_type = bool)]
    signature_verified: Flag,
    /// `{ sdk, filename }` of each migration the bundle applied.
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<Object>)]
    migrations_applied: JsonText,
    applied_at: Timestamp,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewOnpremBundleApplication)]
struct NewApplication {
    #[schema(max_length = 64)]
    bundle_version: String,
    /// A JSON boolean; `false` is accepted.
    signature_verified: bool,
    /// The migrations the bundle applied (default none).
    #[schema(max_items = 1000)]
    migrations_applied: Option<Vec<Migration>>,
}

/// A migration a bundle applied; an object with these two fields only.
#[derive(Deserialize, ToSchema)]
#[schema(as = OnpremMigration)]
struct Migration {
    #[schema(max_length = 200)]
    sdk: String,
    #[schema(max_length = 200)]
    filename: String,
}

/// Records a bundle an install applied.
#[utoipa::path(post, path = "/admin/onprem/installs/{install_id}/bundles", tag = "admin-onprem", request_body = NewApplication,
    params(("install_id" = String, Path, description = "the install")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/admin/onprem/installs", { "customer_id": "race", "cluster_name": "race", "k8s_distribution": "vanilla", "installed_version": "1.0.0" }]], "body": { "bundle_version": "1.1.0", "signature_verified": true } }))),
    responses((status = 201, description = "the application", body = Data<Application>)))]
async fn bundle(State(state): State<AppState>, Operator(who): Operator, Path(id): Path<String>, body: Body<NewApplication>) -> ApiResult<Created<Application>> {
    let mut tx = state.db.begin().await?;
    let target = install(&mut *tx, &id).await?;
    let body = body.checked()?;
    let version = body.bundle_version.trim();
    let verified = body.signature_verified;
    let applied: Vec<Value> =
        body.migrations_applied.unwrap_or_default().iter().map(|m| json!({ "sdk": m.sdk.trim(), "filename": m.filename.trim() })).collect();
    let applied = Value::Array(applied);
    let now = db::now();
    let made: Application = sqlx::query_as(
        "INSERT INTO onprem_bundle (application_id, install_id, bundle_version, signature_verified, migrations_applied, applied_by, applied_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING application_id, install_id, bundle_version, signature_verified, migrations_applied, applied_at",
    )
    .bind(db::new_id())
    .bind(target.install_id)
    .bind(version)
    .bind(i64::from(verified))
    .bind(applied.to_string())
    .bind(&*who)
    .bind(&now)
    .fetch_one(&mut *tx)
    .await?;
    if verified {
        sqlx::query("UPDATE onprem_install SET installed_version = $2, updated_at = $3 WHERE install_id = $1")
            .bind(target.install_id)
            .bind(version)
            .bind(&now)
            .execute(&mut *tx)
            .await?;
    }
    let payload = json!({ "application_id": made.application_id, "install_id": made.install_id, "bundle_version": version, "signature_verified": verified });
    audit::record_operator(&mut tx, &who, events::ONPREM_BUNDLE_APPLIED, payload).await?;
    tx.commit().await?;
    Ok(created(made))
}
