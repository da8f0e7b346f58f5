//! "On-prem installs": customer clusters running the platform, the
//! billing reports generated for them (every generation appends one) and
//! the bundles they applied. An application whose signature was verified
//! moves the install's `installed_version`; an unverified one is
//! recorded as evidence and moves nothing.

use chrono::NaiveDate;
use hub_kernel::gate::{Operator, ops_tokens};
use hub_kernel::prelude::*;

use crate::fields::{required_bounded, required_one_of};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create)).routes(routes!(read)).routes(routes!(report)).routes(routes!(bundle))
}

const DISTRIBUTIONS: [&str; 4] = ["vanilla", "openshift", "rancher", "tanzu"];
const AIR_GAP_MODES: [&str; 3] = ["strict", "diode-in", "diode-bidi"];
const BILLING_MODES: [&str; 3] = ["internal-report-only", "flat-fee", "per-incident"];

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = OnpremInstall)]
struct Install {
    install_id: String,
    customer_id: String,
    cluster_name: String,
    k8s_distribution: String,
    installed_version: String,
    air_gap_mode: String,
    billing_mode: String,
    created_at: String,
    updated_at: String,
}

const COLUMNS: &str = "install_id, customer_id, cluster_name, k8s_distribution, installed_version, air_gap_mode, billing_mode, created_at, updated_at";

#[derive(Deserialize, ToSchema)]
#[schema(as = NewOnpremInstall)]
struct NewInstall {
    /// At most 200 characters.
    #[schema(required = true)]
    customer_id: Option<String>,
    /// At most 200 characters.
    #[schema(required = true)]
    cluster_name: Option<String>,
    /// `vanilla`, `openshift`, `rancher` or `tanzu`.
    #[schema(required = true)]
    k8s_distribution: Option<String>,
    /// At most 64 characters.
    #[schema(required = true)]
    installed_version: Option<String>,
    /// `strict` (default), `diode-in` or `diode-bidi`.
    air_gap_mode: Option<String>,
    /// `internal-report-only` (default), `flat-fee` or `per-incident`.
    billing_mode: Option<String>,
}

/// Registers an install; not idempotent.
#[utoipa::path(post, path = "/admin/onprem/installs", tag = "admin-onprem", request_body = NewInstall,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "customer_id": "race", "cluster_name": "race", "k8s_distribution": "vanilla", "installed_version": "1.0.0" } }))),
    responses((status = 201, description = "the install", body = Data<Install>)))]
async fn create(State(state): State<AppState>, Operator(who): Operator, Lenient(body): Lenient<NewInstall>) -> ApiResult<Response> {
    let mut check = Check::new();
    let customer = required_bounded(&mut check, "customer_id", &body.customer_id, 200);
    let cluster = required_bounded(&mut check, "cluster_name", &body.cluster_name, 200);
    let distribution = required_one_of(&mut check, "k8s_distribution", &body.k8s_distribution, &DISTRIBUTIONS);
    let version = required_bounded(&mut check, "installed_version", &body.installed_version, 64);
    let air_gap = Check::optional(&body.air_gap_mode).unwrap_or_else(|| "strict".into());
    check.one_of("air_gap_mode", &air_gap, &AIR_GAP_MODES);
    let billing = Check::optional(&body.billing_mode).unwrap_or_else(|| "internal-report-only".into());
    check.one_of("billing_mode", &billing, &BILLING_MODES);
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO onprem_install (install_id, customer_id, cluster_name, k8s_distribution, installed_version, air_gap_mode, billing_mode, \
         registered_by, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) RETURNING {COLUMNS}"
    );
    let made: Install = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&customer)
        .bind(&cluster)
        .bind(&distribution)
        .bind(&version)
        .bind(&air_gap)
        .bind(&billing)
        .bind(&*who)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "install_id": made.install_id, "customer_id": customer, "cluster_name": cluster, "installed_version": version });
    ops_tokens::record(&mut tx, &who, events::ONPREM_INSTALL_REGISTERED, payload).await?;
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
async fn read(State(state): State<AppState>, _: Operator, Path(id): Path<String>) -> ApiResult<Response> {
    Ok(ok(install(&state.db.read, &id).await?))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = OnpremBillingReport)]
struct Report {
    report_id: String,
    install_id: String,
    period_start: String,
    period_end: String,
    artifact_local_path: String,
    generated_at: String,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewOnpremBillingReport)]
struct NewReport {
    /// `YYYY-MM-DD`.
    #[schema(required = true)]
    period_start: Option<String>,
    /// `YYYY-MM-DD`, on or after `period_start`.
    #[schema(required = true)]
    period_end: Option<String>,
    /// Where the report lies on the customer's cluster (at most 1024
    /// characters).
    #[schema(required = true)]
    artifact_local_path: Option<String>,
}

fn date(check: &mut Check, name: &str, value: &Option<String>) -> Option<NaiveDate> {
    let v = check.required(name, value);
    if v.is_empty() {
        return None;
    }
    let d = NaiveDate::parse_from_str(&v, "%Y-%m-%d").ok();
    if d.is_none() {
        check.fail(format!("{name} must be a date (YYYY-MM-DD)"));
    }
    d
}

/// Records a billing report generated for an install; every generation
/// appends one.
#[utoipa::path(post, path = "/admin/onprem/installs/{install_id}/billing-reports", tag = "admin-onprem", request_body = NewReport,
    params(("install_id" = String, Path, description = "the install")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/admin/onprem/installs", { "customer_id": "race", "cluster_name": "race", "k8s_distribution": "vanilla", "installed_version": "1.0.0" }]], "body": { "period_start": "2026-01-01", "period_end": "2026-01-31", "artifact_local_path": "/var/race/report.json" } }))),
    responses((status = 201, description = "the report", body = Data<Report>)))]
async fn report(State(state): State<AppState>, Operator(who): Operator, Path(id): Path<String>, Lenient(body): Lenient<NewReport>) -> ApiResult<Response> {
    let mut check = Check::new();
    let start = date(&mut check, "period_start", &body.period_start);
    let end = date(&mut check, "period_end", &body.period_end);
    if let (Some(s), Some(e)) = (start, end)
        && e < s
    {
        check.fail("period_end must be on or after period_start");
    }
    let path = required_bounded(&mut check, "artifact_local_path", &body.artifact_local_path, 1024);
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let target = install(&mut *tx, &id).await?;
    let made: Report = sqlx::query_as(
        "INSERT INTO onprem_billing_report (report_id, install_id, period_start, period_end, artifact_local_path, generated_by, generated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING report_id, install_id, period_start, period_end, artifact_local_path, generated_at",
    )
    .bind(db::new_id())
    .bind(&target.install_id)
    .bind(start.expect("checked").to_string())
    .bind(end.expect("checked").to_string())
    .bind(&path)
    .bind(&*who)
    .bind(db::now())
    .fetch_one(&mut *tx)
    .await?;
    let payload = json!({ "report_id": made.report_id, "install_id": made.install_id, "period_start": made.period_start, "period_end": made.period_end });
    ops_tokens::record(&mut tx, &who, events::ONPREM_BILLING_REPORT_GENERATED, payload).await?;
    tx.commit().await?;
    Ok(created(made))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = OnpremBundleApplication)]
struct Application {
    application_id: String,
    install_id: String,
    bundle_version: String,
    #[sqlx(try_from = "i64")]
    #[schema(value_type = bool)]
    signature_verified: Flag,
    /// `{ sdk, filename }` of each migration the bundle applied.
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<Object>)]
    migrations_applied: JsonText,
    applied_at: String,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewOnpremBundleApplication)]
struct NewApplication {
    /// At most 64 characters.
    #[schema(required = true)]
    bundle_version: Option<String>,
    /// A JSON boolean; `false` is accepted.
    #[schema(required = true, value_type = bool)]
    signature_verified: Option<Value>,
    /// At most 1000 `{ sdk, filename }` objects (each 1–200 characters).
    #[schema(value_type = Option<Vec<Object>>)]
    migrations_applied: Option<Value>,
}

fn migrations(check: &mut Check, value: Option<&Value>) -> Value {
    let items = match value {
        None | Some(Value::Null) => return json!([]),
        Some(Value::Array(items)) if items.len() <= 1000 => items,
        Some(_) => {
            check.fail("migrations_applied must be an array of at most 1000 { sdk, filename } objects");
            return json!([]);
        }
    };
    let text = |item: &Value, field: &str| item[field].as_str().map(str::trim).filter(|s| !s.is_empty() && s.chars().count() <= 200).map(str::to_string);
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match (text(item, "sdk"), text(item, "filename")) {
            (Some(sdk), Some(filename)) if item.as_object().is_some_and(|o| o.len() == 2) => out.push(json!({ "sdk": sdk, "filename": filename })),
            _ => {
                check.fail("migrations_applied entries must be objects with exactly sdk and filename, each 1 to 200 characters");
                return json!([]);
            }
        }
    }
    Value::Array(out)
}

/// Records a bundle an install applied.
#[utoipa::path(post, path = "/admin/onprem/installs/{install_id}/bundles", tag = "admin-onprem", request_body = NewApplication,
    params(("install_id" = String, Path, description = "the install")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/admin/onprem/installs", { "customer_id": "race", "cluster_name": "race", "k8s_distribution": "vanilla", "installed_version": "1.0.0" }]], "body": { "bundle_version": "1.1.0", "signature_verified": true } }))),
    responses((status = 201, description = "the application", body = Data<Application>)))]
async fn bundle(State(state): State<AppState>, Operator(who): Operator, Path(id): Path<String>, Lenient(body): Lenient<NewApplication>) -> ApiResult<Response> {
    let mut check = Check::new();
    let version = required_bounded(&mut check, "bundle_version", &body.bundle_version, 64);
    let verified = match body.signature_verified {
        None | Some(Value::Null) => {
            check.fail("signature_verified is required");
            false
        }
        Some(Value::Bool(b)) => b,
        Some(_) => {
            check.fail("signature_verified must be a boolean");
            false
        }
    };
    let applied = migrations(&mut check, body.migrations_applied.as_ref());
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let target = install(&mut *tx, &id).await?;
    let now = db::now();
    let made: Application = sqlx::query_as(
        "INSERT INTO onprem_bundle (application_id, install_id, bundle_version, signature_verified, migrations_applied, applied_by, applied_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING application_id, install_id, bundle_version, signature_verified, migrations_applied, applied_at",
    )
    .bind(db::new_id())
    .bind(&target.install_id)
    .bind(&version)
    .bind(i64::from(verified))
    .bind(applied.to_string())
    .bind(&*who)
    .bind(&now)
    .fetch_one(&mut *tx)
    .await?;
    if verified {
        sqlx::query("UPDATE onprem_install SET installed_version = $2, updated_at = $3 WHERE install_id = $1")
            .bind(&target.install_id)
            .bind(&version)
            .bind(&now)
            .execute(&mut *tx)
            .await?;
    }
    let payload = json!({ "application_id": made.application_id, "install_id": made.install_id, "bundle_version": version, "signature_verified": verified });
    ops_tokens::record(&mut tx, &who, events::ONPREM_BUNDLE_APPLIED, payload).await?;
    tx.commit().await?;
    Ok(created(made))
}
