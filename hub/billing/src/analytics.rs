//! sdk-analytics: dataset builds materialised from the tenant's own data
//! and their exports. A build computes its rows when it is made (the meter's
//! daily roll-up, or the tenant's invoices, over a period of UTC days) and
//! keeps them as JSON Lines with their SHA-256; an export writes those very
//! bytes to the object store, so the file hashes to the build's digest.

use hub_kernel::prelude::*;
use object_store::{PutPayload, path::Path as ObjectPath};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_builds, build)).routes(routes!(get_build, delete_build)).routes(routes!(export)).routes(routes!(list_exports))
}

stored_enum! {
    /// What a build computes: `usage_daily`, the meter's daily roll-up;
    /// `invoices`, issued invoices whose period lies within the build's.
    #[schema(as = AnalyticsBuildKind)]
    enum Kind { UsageDaily = "usage_daily", Invoices = "invoices" }
}

stored_enum! {
    /// Where an export is written.
    #[schema(as = AnalyticsExportTarget)]
    enum Target { ObjectStore = "object_store" }
}

const MAX_PERIOD_DAYS: i64 = 366;
/// Rows one build holds at most.
const MAX_ROWS: i64 = 100_000;

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = AnalyticsBuild)]
struct Build {
    build_id: Id,
    kind: Kind,
    /// The first UTC day, inclusive.
    period_start: String,
    /// The last UTC day, inclusive.
    period_end: String,
    row_count: i64,
    /// SHA-256 (hex) of the rows as JSON Lines: the exported file's digest.
    sha256: String,
    created_at: Timestamp,
    /// The rows, as computed when the build was made.
    #[sqlx(skip)]
    #[schema(value_type = Vec<Object>)]
    rows: Vec<Value>,
    #[serde(skip)]
    content: String,
}

const COLUMNS: &str = "build_id, kind, period_start, period_end, row_count, sha256, created_at, content";

impl Build {
    fn with_rows(mut self) -> ApiResult<Self> {
        self.rows = self.content.lines().map(serde_json::from_str).collect::<Result<_, _>>().map_err(|e| ApiError::Internal(e.into()))?;
        Ok(self)
    }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = AnalyticsExport)]
struct Export {
    export_id: Id,
    build_id: Id,
    target: Target,
    /// The file's key in the object store.
    destination_key: String,
    bytes: i64,
    /// SHA-256 (hex) of the file: the build's.
    sha256: String,
    created_at: Timestamp,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewAnalyticsBuild)]
struct NewBuild {
    kind: Kind,
    /// `YYYY-MM-DD`, inclusive.
    #[schema(format = Date)]
    period_start: String,
    /// `YYYY-MM-DD`, inclusive; from `period_start` to 365 days after it.
    #[schema(format = Date)]
    period_end: String,
}

/// The rows of a build of `kind`, one JSON object each.
async fn compute(tx: &mut Tx, tenant_id: &str, kind: Kind, first: &str, last: &str) -> ApiResult<Vec<Value>> {
    let rows: Vec<Value> = if kind == Kind::UsageDaily {
        let usage = crate::meter::daily_usage(tx, tenant_id, first, last, MAX_ROWS + 1).await?;
        usage.into_iter().map(|u| json!(u)).collect()
    } else {
        let invoices = crate::billing::invoices_within(tx, tenant_id, first, last).await?;
        invoices
            .into_iter()
            .map(|i| {
                json!({ "invoice_id": i.invoice_id, "catalog_id": i.catalog_id, "catalog_version": i.catalog_version, "currency": i.currency,
                    "period_start": i.period_start, "period_end": i.period_end, "total": i.total, "unrated_skus": i.unrated_skus.0,
                    "generated_at": i.generated_at })
            })
            .collect()
    };
    if rows.len() as i64 > MAX_ROWS {
        return Err(ApiError::invalid(format!("the build would hold more than {MAX_ROWS} rows: narrow the period")));
    }
    Ok(rows)
}

/// Materialises a dataset build from the tenant's data over a period.
#[utoipa::path(post, path = "/api/analytics/builds", tag = "sdk-analytics", request_body = NewBuild,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "kind": "usage_daily", "period_start": "2025-01-01", "period_end": "2025-01-31" } }))),
    responses((status = 201, description = "the build, with its rows", body = Data<Build>)))]
async fn build(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewBuild>) -> ApiResult<Created<Build>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let kind = body.kind;
    // The days' strict form (two-digit month and day) is checked here.
    let first = crate::meter::parse_day(&mut check, "period_start", &Some(body.period_start));
    let last = crate::meter::parse_day(&mut check, "period_end", &Some(body.period_end));
    if let (Some(f), Some(l)) = (first, last)
        && !(0..MAX_PERIOD_DAYS).contains(&(l - f).num_days())
    {
        check.fail(format!("period_end must be from period_start to {} days after it", MAX_PERIOD_DAYS - 1));
    }
    check.finish()?;
    let (first, last) = (first.unwrap_or_default().to_string(), last.unwrap_or_default().to_string());
    let mut tx = state.db.begin().await?;
    let rows = compute(&mut tx, &ctx.tenant_id, kind, &first, &last).await?;
    let content: String = rows.iter().map(|r| format!("{r}\n")).collect();
    let sha256 = hub_kernel::crypto::sha256_hex(content.as_bytes());
    let sql = format!(
        "INSERT INTO analytics_build (build_id, tenant_id, kind, period_start, period_end, row_count, sha256, content, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING {COLUMNS}"
    );
    let b: Build = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(kind)
        .bind(&first)
        .bind(&last)
        .bind(rows.len() as i64)
        .bind(&sha256)
        .bind(&content)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "build_id": b.build_id, "kind": kind, "period_start": first, "period_end": last, "row_count": b.row_count, "sha256": sha256 });
    audit::record(&mut tx, &ctx, events::ANALYTICS_BUILD_MATERIALISED, payload).await?;
    tx.commit().await?;
    Ok(created(Build { rows, ..b }))
}

async fn find(db: &Db, ctx: &TenantCtx, id: &str) -> ApiResult<Build> {
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM analytics_build WHERE tenant_id = $1 AND build_id = $2");
    let found: Option<Build> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&db.read).await?;
    found.ok_or(ApiError::NotFound)
}

/// A build of the caller's tenant with its rows; another tenant's is 404.
#[utoipa::path(get, path = "/api/analytics/builds/{build_id}", tag = "sdk-analytics", params(("build_id" = String, Path, description = "the build")),
    responses((status = 200, description = "the build", body = Data<Build>)))]
async fn get_build(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Build>> {
    Ok(ok(find(&state.db, &ctx, &id).await?.with_rows()?))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewAnalyticsExport)]
#[allow(dead_code)]
struct NewExport {
    /// The default, also when the body is absent.
    target: Option<Target>,
}

/// Exports a build as a JSON Lines file; the body is optional and `target`
/// defaults to the object store.
#[utoipa::path(post, path = "/api/analytics/builds/{build_id}/export", tag = "sdk-analytics", request_body(content = Option<NewExport>),
    params(("build_id" = String, Path, description = "the build")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "events": 16, "given": [["POST", "/api/analytics/builds", { "kind": "usage_daily", "period_start": "2025-01-01", "period_end": "2025-01-31" }]], "body": {} }))),
    responses((status = 201, description = "the export", body = Data<Export>),
        (status = 503, description = "ServiceUnavailable: the object store cannot serve now; retry after Retry-After seconds", body = ErrorBody, headers(("Retry-After" = u64, description = "seconds to wait before retrying")))))]
async fn export(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, raw: axum::body::Bytes) -> ApiResult<Created<Export>> {
    let b = find(&state.db, &ctx, &id).await?;
    let body: Value = if raw.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(&raw).map_err(|e| ApiError::invalid(format!("request body must be JSON: {e}")))?
    };
    if !body.is_object() {
        return Err(ApiError::invalid("request body must be a JSON object"));
    }
    hub_kernel::nul::check_value(&body)?;
    ctx.check_tenant(body.get("tenant_id").and_then(Value::as_str))?;
    let target = match body.get("target") {
        None | Some(Value::Null) => Target::ObjectStore,
        Some(Value::String(t)) if let Ok(t) = t.parse::<Target>() => t,
        Some(_) => {
            let words: Vec<&str> = Target::ALL.iter().map(|t| t.as_str()).collect();
            return Err(ApiError::invalid(format!("target must be one of: {}", words.join(", "))));
        }
    };
    let key = format!("analytics/{}/{}.jsonl", ctx.tenant_id, b.build_id);
    let bytes = b.content.into_bytes();
    let (size, sha256) = (bytes.len() as i64, hub_kernel::crypto::sha256_hex(&bytes));
    state.media.put(&ObjectPath::from(key.as_str()), PutPayload::from(bytes)).await.map_err(|e| hub_kernel::storage::failure(e, "storing the export"))?;
    let mut tx = state.db.begin().await?;
    let sql = "INSERT INTO analytics_export (export_id, tenant_id, build_id, target, destination_key, bytes, sha256, created_by, created_at) \
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING export_id, build_id, target, destination_key, bytes, sha256, created_at";
    let e: Export = sqlx::query_as(sql)
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(b.build_id)
        .bind(target)
        .bind(&key)
        .bind(size)
        .bind(&sha256)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    // The export runs while the request waits: requested and completed are recorded together.
    audit::record(&mut tx, &ctx, events::ANALYTICS_EXPORT_REQUESTED, json!({ "export_id": e.export_id, "build_id": b.build_id, "target": target })).await?;
    let payload = json!({ "export_id": e.export_id, "build_id": b.build_id, "destination_key": key, "bytes": size, "sha256": sha256 });
    audit::record(&mut tx, &ctx, events::ANALYTICS_EXPORT_COMPLETED, payload).await?;
    tx.commit().await?;
    Ok(created(e))
}

/// A build as a list shows it: without its rows (read the build for them).
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = AnalyticsBuildSummary)]
struct BuildSummary {
    build_id: Id,
    kind: Kind,
    /// The first UTC day, inclusive.
    period_start: String,
    /// The last UTC day, inclusive.
    period_end: String,
    row_count: i64,
    /// SHA-256 (hex) of the rows as JSON Lines.
    sha256: String,
    created_at: Timestamp,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct BuildFilter {
    #[param(inline)]
    kind: Option<Kind>,
}

const BUILDS: Listing = Listing {
    table: "analytics_build",
    columns: "build_id, kind, period_start, period_end, row_count, sha256, created_at",
    filter: "tenant_id = $1 AND ($2 = '' OR kind = $2)",
    order: "created_at DESC, build_id DESC",
};

/// The tenant's builds, newest first, without their rows.
#[utoipa::path(get, path = "/api/analytics/builds", tag = "sdk-analytics", params(BuildFilter, Page),
    responses((status = 200, description = "one page of builds", body = ListOf<BuildSummary>)))]
async fn list_builds(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<BuildFilter>) -> ApiResult<ListOf<BuildSummary>> {
    let kind = q.kind.map_or("", Kind::as_str);
    page.list::<BuildSummary>(&state.db.read, &BUILDS, &[&ctx.tenant_id, kind]).await
}

const EXPORTS: Listing = Listing {
    table: "analytics_export",
    columns: "export_id, build_id, target, destination_key, bytes, sha256, created_at",
    filter: "tenant_id = $1 AND build_id = $2",
    order: "created_at DESC, export_id DESC",
};

/// The exports of one of the tenant's builds, newest first; another
/// tenant's build is 404.
#[utoipa::path(get, path = "/api/analytics/builds/{build_id}/exports", tag = "sdk-analytics", params(("build_id" = String, Path, description = "the build"), Page),
    responses((status = 200, description = "one page of the build's exports", body = ListOf<Export>)))]
async fn list_exports(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, page: Page) -> ApiResult<ListOf<Export>> {
    let id = path_id(&id)?.to_string();
    let found: Option<String> = sqlx::query_scalar("SELECT build_id FROM analytics_build WHERE tenant_id = $1 AND build_id = $2")
        .bind(&ctx.tenant_id)
        .bind(&id)
        .fetch_optional(&state.db.read)
        .await?;
    found.ok_or(ApiError::NotFound)?;
    page.list::<Export>(&state.db.read, &EXPORTS, &[&ctx.tenant_id, &id]).await
}

/// A deleted build.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AnalyticsBuildDeleted)]
struct Deleted {
    build_id: Id,
    /// Always true: the build, its rows and its exports' records are erased.
    deleted: bool,
    /// Whether an exported file was erased from the object store.
    export_erased: bool,
}

/// Deletes a build: its rows, the records of its exports and the exported
/// file (every export of a build writes the same key) are erased; a build
/// is derived from the tenant's data, so a new one can be made at any
/// time. 404 when it is deleted already (of two deletes at once, one
/// deletes it) or another tenant's; 503 while the object store cannot
/// erase the file (the build then stays).
#[utoipa::path(delete, path = "/api/analytics/builds/{build_id}", tag = "sdk-analytics", params(("build_id" = String, Path, description = "the build")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404, "given": [["POST", "/api/analytics/builds", { "kind": "usage_daily", "period_start": "2025-01-01", "period_end": "2025-01-31" }], ["POST", "/api/analytics/builds/{build_id}/export", {}]], "params": { "build_id": "{build_id}" } }))),
    responses((status = 200, description = "the build, deleted", body = Data<Deleted>),
        (status = 503, description = "ServiceUnavailable: the object store cannot serve now; retry after Retry-After seconds", body = ErrorBody, headers(("Retry-After" = u64, description = "seconds to wait before retrying")))))]
async fn delete_build(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Deleted>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // The build is locked first (an export being written meanwhile names
    // it by a foreign key, which this lock makes wait), then its exports'
    // records go, then the build.
    let lock = if db::Backend::of(&tx) == db::Backend::Postgres { " FOR UPDATE" } else { "" };
    let sql = format!("SELECT build_id FROM analytics_build WHERE tenant_id = $1 AND build_id = $2{lock}");
    let found: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
    found.ok_or(ApiError::NotFound)?;
    let keys: Vec<String> = sqlx::query_scalar("DELETE FROM analytics_export WHERE tenant_id = $1 AND build_id = $2 RETURNING destination_key")
        .bind(&ctx.tenant_id)
        .bind(&id)
        .fetch_all(&mut *tx)
        .await?;
    let deleted: Option<(Id, Kind, i64)> =
        sqlx::query_as("DELETE FROM analytics_build WHERE tenant_id = $1 AND build_id = $2 RETURNING build_id, kind, row_count")
            .bind(&ctx.tenant_id)
            .bind(&id)
            .fetch_optional(&mut *tx)
            .await?;
    let (build_id, kind, row_count) = deleted.ok_or(ApiError::NotFound)?;
    let erased: std::collections::BTreeSet<&str> = keys.iter().map(String::as_str).collect();
    let payload = json!({ "build_id": build_id, "kind": kind, "row_count": row_count, "exports": keys.len(), "export_erased": !erased.is_empty() });
    audit::record(&mut tx, &ctx, events::ANALYTICS_BUILD_DELETED, payload).await?;
    // The file goes before the rows do: while the store cannot erase it,
    // the build stays (the transaction rolls back).
    for key in &erased {
        match state.media.delete(&ObjectPath::from(*key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(hub_kernel::storage::failure(e, "erasing the export")),
        }
    }
    tx.commit().await?;
    Ok(ok(Deleted { build_id, deleted: true, export_erased: !erased.is_empty() }))
}
