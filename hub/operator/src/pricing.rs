//! "Metering and pricing": the pricing catalogs (versioned; `draft`,
//! `active`, `retired`), their rates per sku, and the hard-cap overrides
//! metering honours. The tables and their rules are the billing area's
//! (`billing::{create_catalog, put_rate, set_catalog_status_in, ..}`,
//! `meter::override_hardcap`); this module is the operator's door to them.
//! RULINGS 1: a duplicate (catalog_id, version) is 409, a status change of
//! an unknown catalog 404 'catalog not found'.

use axum::http::HeaderMap;
use hub_billing::{
    billing::{self, CatalogStatus},
    meter,
};
use hub_kernel::gate::Operator;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_catalogs, create_catalog))
        .routes(routes!(get_catalog))
        .routes(routes!(put_rate))
        .routes(routes!(set_status))
        .routes(routes!(override_hardcap))
}

/// The bare success answer.
#[derive(Serialize, ToSchema)]
#[schema(as = AdminPricingDone)]
struct Done {
    success: bool,
}

/// The catalog of a path, found (404 'catalog not found' before its body
/// is looked at).
async fn catalog_exists(state: &AppState, catalog_id: &str) -> ApiResult<()> {
    if crate::fields::exists(state, "SELECT 1 FROM billing_catalog WHERE catalog_id = $1", catalog_id).await? {
        Ok(())
    } else {
        Err(ApiError::Missing("catalog not found"))
    }
}

/// Every catalog version of every status, by catalog_id then version
/// (unpaginated, as documented).
#[utoipa::path(get, path = "/admin/meter/pricing-catalogs", tag = "admin-meter",
    responses((status = 200, description = "the catalogs", body = Data<Vec<billing::Catalog>>)))]
async fn list_catalogs(State(state): State<AppState>, _: Operator) -> ApiResult<Data<Vec<billing::Catalog>>> {
    Ok(ok(billing::catalogs(&state.db).await?))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminNewPricingCatalog)]
struct NewCatalog {
    /// 1–128 letters, digits or `. _ -`.
    #[schema(max_length = 128, pattern = r"^[A-Za-z0-9._-]{1,128}$")]
    catalog_id: String,
    /// (catalog_id, version) is unique.
    #[schema(minimum = 1, maximum = 2_147_483_647)]
    version: i64,
    /// ISO 4217: three capital letters (default `USD`).
    #[schema(max_length = 3, pattern = r"^[A-Z]{3}$")]
    currency: Option<String>,
    /// Who creates it (kept as `created_by`).
    #[schema(max_length = 200)]
    operator_id: String,
}

/// Creates a catalog version, `draft`; a taken (catalog_id, version) is 409.
#[utoipa::path(post, path = "/admin/meter/pricing-catalogs", tag = "admin-meter", request_body = NewCatalog,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "events": 0, "body": { "catalog_id": "r-{unique}", "version": 1, "operator_id": "ops-race" } }))),
    responses((status = 200, description = "the created version", body = Data<billing::Catalog>)))]
async fn create_catalog(State(state): State<AppState>, _: Operator, body: Body<NewCatalog>) -> ApiResult<Data<billing::Catalog>> {
    let body = body.checked()?;
    // The currency as sent (its pattern, `^[A-Z]{3}$`, is the check
    // `create_catalog` makes, with the other fields' problems): blank or
    // padded is refused, not `USD`.
    let currency = body.currency.clone();
    // The catalog id as sent, too: `create_catalog`'s check is its
    // pattern's.
    let catalog = billing::create_catalog(&state.db, &body.catalog_id, body.version, currency.as_deref(), body.operator_id.trim()).await?;
    Ok(ok(catalog))
}

/// A catalog's latest version with its rates.
#[derive(Serialize, ToSchema)]
#[schema(as = AdminPricingCatalog)]
struct CatalogView {
    catalog: billing::Catalog,
    /// By sku; empty when none.
    rates: Vec<billing::Rate>,
}

/// A catalog (its latest version) and its rates; 404 'catalog not found'.
#[utoipa::path(get, path = "/admin/meter/pricing-catalogs/{catalog_id}", tag = "admin-meter",
    params(("catalog_id" = String, Path, description = "the catalog")),
    responses((status = 200, description = "the catalog and its rates", body = Data<CatalogView>)))]
async fn get_catalog(State(state): State<AppState>, _: Operator, Path(catalog_id): Path<String>) -> ApiResult<Data<CatalogView>> {
    let (catalog, rates) = billing::catalog_with_rates(&state.db, &catalog_id).await?;
    Ok(ok(CatalogView { catalog, rates }))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminPutPricingRate)]
struct PutRate {
    #[serde(flatten)]
    rate: billing::NewRate,
    /// Who sets it (kept as `updated_by`).
    #[schema(max_length = 200)]
    operator_id: String,
}

/// Sets (inserts or replaces) the rate of a sku in the catalog's latest
/// version; idempotent.
#[utoipa::path(put, path = "/admin/meter/pricing-catalogs/{catalog_id}/rates/{sku}", tag = "admin-meter", request_body = PutRate,
    params(("catalog_id" = String, Path, description = "the catalog"), ("sku" = String, Path, description = "the sku")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "events": 0, "given": [["POST", "/admin/meter/pricing-catalogs", { "catalog_id": "r-{unique}", "version": 1, "operator_id": "ops-race" }]], "params": { "sku": "race.calls" }, "body": { "unit": "call", "mode": "flat_per_call", "price": 5, "operator_id": "ops-race" } }))),
    responses((status = 200, description = "the rate", body = Data<billing::Rate>)))]
async fn put_rate(
    State(state): State<AppState>,
    _: Operator,
    Path((catalog_id, sku)): Path<(String, String)>,
    body: Body<PutRate>,
) -> ApiResult<Data<billing::Rate>> {
    catalog_exists(&state, &catalog_id).await?;
    let body = body.checked()?;
    Ok(ok(billing::put_rate(&state.db, &catalog_id, &sku, &body.rate, body.operator_id.trim()).await?))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminPricingCatalogStatus)]
struct NewStatus {
    /// From any status.
    status: CatalogStatus,
    #[schema(max_length = 200)]
    operator_id: String,
}

/// Sets the status of the catalog's latest version: 200 bare `{ success:
/// true }`; 404 'catalog not found'. Activation records
/// `billing.catalog.activated.v1` in the platform chain.
#[utoipa::path(patch, path = "/admin/meter/pricing-catalogs/{catalog_id}/status", tag = "admin-meter", request_body = NewStatus,
    params(("catalog_id" = String, Path, description = "the catalog")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/admin/meter/pricing-catalogs", { "catalog_id": "r-{unique}", "version": 1, "operator_id": "ops-race" }]], "body": { "status": "active", "operator_id": "ops-race" } }))),
    responses((status = 200, description = "set", body = Done)))]
async fn set_status(
    State(state): State<AppState>,
    Operator(who): Operator,
    Path(catalog_id): Path<String>,
    body: Body<NewStatus>,
) -> ApiResult<axum::Json<Done>> {
    catalog_exists(&state, &catalog_id).await?;
    let body = body.checked()?;
    let (status, operator) = (body.status, body.operator_id.trim());
    let mut tx = state.db.begin().await?;
    let catalog = billing::set_catalog_status_in(&mut tx, &catalog_id, status.as_str(), operator).await?;
    if status == CatalogStatus::Active {
        let payload = json!({ "catalog_id": catalog.catalog_id, "version": catalog.version, "operator_id": operator });
        audit::record_operator(&mut tx, &who, events::BILLING_CATALOG_ACTIVATED, payload).await?;
    }
    tx.commit().await?;
    Ok(axum::Json(Done { success: true }))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminHardcapOverride)]
struct NewOverride {
    /// An existing tenant.
    #[schema(format = "uuid")]
    tenant_id: String,
    sku: String,
    /// In the future: the tenant's cap on the sku does not apply until
    /// then.
    #[schema(format = DateTime)]
    until: String,
    #[schema(max_length = 200)]
    operator_id: String,
    #[schema(max_length = 2000)]
    reason: String,
}

/// Lifts a tenant's hard cap on a sku until `until` (metering admits the
/// tenant's usage of it meanwhile). The `x-trace-id` header, when given,
/// is kept with it. Event `billing.hardcap.overridden.v1` in the tenant's
/// chain.
#[utoipa::path(post, path = "/admin/meter/hardcap/override", tag = "admin-meter", request_body = NewOverride,
    params(("x-trace-id" = Option<String>, Header, description = "threaded through to the override")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/admin/apps", { "app_id": "r-{unique}", "display_name": "Races" }], ["POST", "/admin/tenants", { "app_id": "r-{unique}", "display_name": "Races", "region": "eu-west-1" }]], "body": { "tenant_id": "{tenant.tenant_id}", "sku": "race.calls", "until": "2099-01-01T00:00:00Z", "operator_id": "ops-race", "reason": "race" } }))),
    responses((status = 200, description = "the override", body = Data<meter::Override>)))]
async fn override_hardcap(
    State(state): State<AppState>,
    Operator(who): Operator,
    headers: HeaderMap,
    body: Body<NewOverride>,
) -> ApiResult<Data<meter::Override>> {
    let body = body.checked()?;
    let tenant_id = canonical_uuid(&body.tenant_id);
    let (sku, until, operator, reason) = (body.sku.trim(), body.until.trim(), body.operator_id.trim(), body.reason.trim());
    if crate::fields::time("until", until)? <= chrono::Utc::now() {
        return Err(ApiError::invalid("until must be in the future"));
    }
    let trace_id =
        headers.get("x-trace-id").and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty()).map(|v| v.chars().take(200).collect::<String>());
    if hub_identity::tenancy::find(&state.db.read, &tenant_id).await?.is_none() {
        return Err(ApiError::invalid("tenant_id must name an existing tenant"));
    }
    let o = meter::NewOverride { tenant_id: &tenant_id, sku, until, operator_id: operator, reason, trace_id: trace_id.as_deref() };
    Ok(ok(meter::override_hardcap(&state.db, &who, o).await?))
}
