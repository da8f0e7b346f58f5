//! sdk-billing: the operator's pricing catalogs (versioned; `draft`,
//! `active`, `retired`) and their rates per sku, and the tenant's invoices:
//! its usage over a closed period of whole UTC days, read from the meter's
//! daily roll-up, rated against the named catalog's active version in
//! integer minor units. The same (tenant, catalog, period) is invoiced once.

use std::collections::BTreeMap;

use chrono::Utc;
use hub_kernel::prelude::*;

use crate::meter;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_invoices, generate)).routes(routes!(get_invoice)).routes(routes!(active_catalog))
}

/// The words of [`CatalogStatus`], in its order.
pub const STATUSES: [&str; 3] = ["draft", "active", "retired"];

stored_enum! {
    /// Where a pricing catalog version is in its life.
    #[schema(as = BillingCatalogStatus)]
    pub enum CatalogStatus { Draft = "draft", Active = "active", Retired = "retired" }
}

stored_enum! {
    /// How a rate prices a sku's usage.
    #[schema(as = BillingRateMode)]
    pub enum RateMode {
        FlatPerCall = "flat_per_call",
        TieredPerCall = "tiered_per_call",
        PassthroughPlusMargin = "passthrough_plus_margin",
        PerUnit = "per_unit",
        BundledSubscription = "bundled_subscription",
        FreeInternal = "free_internal",
    }
}

stored_enum! {
    /// Where an invoice is in its life: every invoice is issued.
    #[schema(as = BillingInvoiceStatus)]
    pub enum InvoiceStatus { Issued = "issued" }
}
/// The longest period an invoice covers, in days.
const MAX_PERIOD_DAYS: i64 = 366;
const MAX_TIERS: usize = 20;

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = BillingCatalog)]
pub struct Catalog {
    pub catalog_id: String,
    pub version: i64,
    pub status: CatalogStatus,
    /// ISO 4217: the currency of every amount rated against it.
    pub currency: String,
    pub created_by: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

const CATALOG_COLUMNS: &str = "catalog_id, version, status, currency, created_by, created_at, updated_at";

/// A tier of a `tiered_per_call` rate: calls up to `up_to` (cumulative,
/// inclusive; null for the open-ended last tier) cost `unit_price` each.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = BillingTier)]
pub struct Tier {
    #[schema(minimum = 1)]
    pub up_to: Option<i64>,
    #[schema(minimum = 0)]
    pub unit_price: i64,
}

fn pct<S: serde::Serializer>(bp: &Option<i64>, s: S) -> Result<S::Ok, S::Error> {
    match bp {
        Some(bp) => s.serialize_f64(*bp as f64 / 100.0),
        None => s.serialize_none(),
    }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = BillingRate)]
pub struct Rate {
    pub catalog_id: String,
    pub version: i64,
    pub sku: String,
    pub unit: String,
    pub mode: RateMode,
    /// Minor units: per call, per unit, the pass-through unit cost, or the
    /// subscription's fee, by mode.
    pub price: Option<i64>,
    #[serde(rename = "margin_pct", serialize_with = "pct")]
    #[schema(value_type = Option<f64>)]
    pub margin_bp: Option<i64>,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Option<Vec<Tier>>)]
    pub tiers: JsonText,
    pub updated_by: String,
    pub updated_at: Timestamp,
}

const RATE_COLUMNS: &str = "catalog_id, version, sku, unit, mode, price, margin_bp, tiers, updated_by, updated_at";

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = BillingInvoiceLine)]
pub struct Line {
    pub sku: String,
    pub unit: String,
    pub mode: RateMode,
    pub units: i64,
    /// Usage events counted.
    pub calls: i64,
    pub price: Option<i64>,
    #[serde(rename = "margin_pct", serialize_with = "pct")]
    #[schema(value_type = Option<f64>)]
    pub margin_bp: Option<i64>,
    /// Minor units of the invoice's currency.
    pub amount: i64,
}

const LINE_COLUMNS: &str = "sku, unit, mode, units, calls, price, margin_bp, amount";

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = BillingInvoice)]
pub struct Invoice {
    pub invoice_id: Id,
    pub tenant_id: String,
    pub catalog_id: String,
    pub catalog_version: i64,
    pub currency: String,
    /// The first UTC day, inclusive.
    pub period_start: String,
    /// The last UTC day, inclusive.
    pub period_end: String,
    pub status: InvoiceStatus,
    /// Minor units: the sum of the line items.
    pub total: i64,
    /// Skus used in the period that the catalog has no rate for.
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<String>)]
    pub unrated_skus: JsonText,
    pub generated_by: String,
    pub generated_at: Timestamp,
    /// Ordered by sku.
    #[sqlx(skip)]
    pub line_items: Vec<Line>,
}

const INVOICE_COLUMNS: &str =
    "invoice_id, tenant_id, catalog_id, catalog_version, currency, period_start, period_end, status, total, unrated_skus, generated_by, generated_at";

fn valid_name(s: &str) -> bool {
    (1..=128).contains(&s.len()) && s.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// A percentage with at most two decimals, as basis points (12.5 is 1250):
/// read from the JSON number's text, so no binary fraction creeps in.
fn basis_points(n: &serde_json::Number) -> Option<i64> {
    let text = n.to_string();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.as_str()),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let numeric = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || int.len() > 6 || frac.len() > 2 || !numeric(int) || !numeric(frac) {
        return None;
    }
    let bp = int.parse::<i64>().ok()? * 100 + format!("{frac:0<2}").parse::<i64>().ok()?;
    Some(if negative { -bp } else { bp })
}

/// Creates a catalog version, `draft` (the operator's `POST
/// /admin/meter/pricing-catalogs`); a taken (catalog_id, version) is 409.
pub async fn create_catalog(db: &Db, catalog_id: &str, version: i64, currency: Option<&str>, operator_id: &str) -> ApiResult<Catalog> {
    let mut check = Check::new();
    if !valid_name(catalog_id) {
        check.fail("catalog_id must be 1 to 128 letters, digits or . _ -");
    }
    if version < 1 {
        check.fail("version must be a positive integer");
    }
    let currency = currency.unwrap_or("USD");
    if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_uppercase()) {
        check.fail("currency must be an ISO 4217 code (three capital letters)");
    }
    if operator_id.trim().is_empty() {
        check.fail("operator_id is required");
    }
    check.finish()?;
    let now = db::now();
    let sql = format!(
        "INSERT INTO billing_catalog (catalog_id, version, status, currency, created_by, created_at, updated_at) VALUES ($1, $2, 'draft', $3, $4, $5, $5) \
         RETURNING {CATALOG_COLUMNS}"
    );
    let mut tx = db.begin().await?;
    let catalog: Catalog =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(catalog_id).bind(version).bind(currency).bind(operator_id).bind(&now).fetch_one(&mut *tx).await?;
    tx.commit().await?;
    Ok(catalog)
}

/// The latest version of a catalog, locked for the change to come.
async fn latest(tx: &mut Tx, catalog_id: &str) -> ApiResult<Catalog> {
    let sql = format!("SELECT {CATALOG_COLUMNS} FROM billing_catalog WHERE catalog_id = $1 ORDER BY version DESC LIMIT 1");
    let found: Option<Catalog> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(catalog_id).fetch_optional(&mut **tx).await?;
    found.ok_or(ApiError::Missing("catalog not found"))
}

/// Every version of every catalog, by catalog_id then version.
pub async fn catalogs(db: &Db) -> ApiResult<Vec<Catalog>> {
    let sql = format!("SELECT {CATALOG_COLUMNS} FROM billing_catalog ORDER BY catalog_id, version");
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).fetch_all(&db.read).await?)
}

/// The latest version of a catalog and its rates by sku (404 'catalog not
/// found').
pub async fn catalog_with_rates(db: &Db, catalog_id: &str) -> ApiResult<(Catalog, Vec<Rate>)> {
    let mut tx = db.read.begin().await?;
    let catalog = latest(&mut tx, catalog_id).await?;
    let sql = format!("SELECT {RATE_COLUMNS} FROM billing_rate WHERE catalog_id = $1 AND version = $2 ORDER BY sku");
    let rates = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(catalog_id).bind(catalog.version).fetch_all(&mut *tx).await?;
    tx.commit().await?;
    Ok((catalog, rates))
}

/// Sets the status of a catalog's latest version (the operator's `PATCH
/// …/pricing-catalogs/{catalog_id}/status`): any of the three from any
/// state; an unknown catalog is 404.
pub async fn set_catalog_status(db: &Db, catalog_id: &str, status: &str, operator_id: &str) -> ApiResult<Catalog> {
    let mut tx = db.begin().await?;
    let catalog = set_catalog_status_in(&mut tx, catalog_id, status, operator_id).await?;
    tx.commit().await?;
    Ok(catalog)
}

/// [`set_catalog_status`] inside the caller's transaction (which records
/// the operator's event with it).
pub async fn set_catalog_status_in(tx: &mut Tx, catalog_id: &str, status: &str, operator_id: &str) -> ApiResult<Catalog> {
    let mut check = Check::new();
    if status.is_empty() {
        check.fail("status is required");
    }
    check.one_of("status", status, &STATUSES);
    if operator_id.trim().is_empty() {
        check.fail("operator_id is required");
    }
    check.finish()?;
    let current = latest(tx, catalog_id).await?;
    let sql = format!("UPDATE billing_catalog SET status = $3, updated_at = $4 WHERE catalog_id = $1 AND version = $2 RETURNING {CATALOG_COLUMNS}");
    let catalog: Catalog =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(catalog_id).bind(current.version).bind(status).bind(db::now()).fetch_one(&mut **tx).await?;
    tracing::info!(catalog_id, version = catalog.version, status, operator_id, "pricing catalog status set");
    Ok(catalog)
}

/// A rate as the operator's `PUT …/rates/{sku}` body gives it.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = NewBillingRate)]
pub struct NewRate {
    /// What a unit of the sku is (`call`, `token`, ...).
    #[schema(max_length = 64)]
    pub unit: String,
    pub mode: RateMode,
    /// Integer minor units; required except for `tiered_per_call` and
    /// `free_internal`.
    #[schema(minimum = 0, maximum = 1_000_000_000_000_i64)]
    pub price: Option<i64>,
    /// A percentage with at most two decimals (-100 to 1000); required for
    /// `passthrough_plus_margin`.
    #[schema(value_type = Option<f64>, minimum = -100, maximum = 1000)]
    pub margin_pct: Option<serde_json::Number>,
    /// Required for `tiered_per_call`: 1 to 20 tiers, `up_to` increasing,
    /// the last open-ended (null).
    #[schema(min_items = 1, max_items = 20)]
    pub tiers: Option<Vec<Tier>>,
}

fn check_tiers(check: &mut Check, t: &[Tier]) {
    let bounds: Vec<Option<i64>> = t.iter().map(|t| t.up_to).collect();
    let ok = (1..=MAX_TIERS).contains(&t.len())
        && t.iter().all(|t| t.unit_price >= 0)
        && bounds.last() == Some(&None)
        && bounds[..bounds.len() - 1].iter().all(Option::is_some)
        && bounds.windows(2).all(|w| matches!(w, [Some(a), Some(b)] if a < b) || w[1].is_none())
        && bounds.first().is_some_and(|b| b.is_none_or(|b| b >= 1));
    if !ok {
        check.fail(format!(
            "tiers must be 1 to {MAX_TIERS} objects {{ up_to, unit_price }}: up_to increasing integers from 1, the last tier open-ended (up_to null), unit_price integers of 0 or more"
        ));
    }
}

/// Sets (inserts or replaces) the rate of a sku in a catalog's latest
/// version (the operator's `PUT …/pricing-catalogs/{catalog_id}/rates/{sku}`).
pub async fn put_rate(db: &Db, catalog_id: &str, sku: &str, body: &NewRate, operator_id: &str) -> ApiResult<Rate> {
    let mut check = Check::new();
    meter::check_sku(&mut check, sku);
    let unit = body.unit.trim();
    if unit.is_empty() {
        check.fail("unit is required");
    } else if unit.chars().count() > 64 {
        check.fail("unit must be at most 64 characters");
    }
    let mode = body.mode;
    let price = body.price;
    if price.is_some_and(|p| !(0..=1_000_000_000_000).contains(&p)) {
        check.fail("price must be an integer from 0 to 1000000000000");
    }
    let margin = body.margin_pct.as_ref().and_then(|n| {
        let bp = basis_points(n).filter(|bp| (-10_000..=100_000).contains(bp));
        if bp.is_none() {
            check.fail("margin_pct must be a number from -100 to 1000 with at most two decimals");
        }
        bp
    });
    let tiers = body.tiers.as_deref();
    if let Some(t) = tiers {
        check_tiers(&mut check, t);
    }
    let needs_price = matches!(mode, RateMode::FlatPerCall | RateMode::PerUnit | RateMode::PassthroughPlusMargin | RateMode::BundledSubscription);
    if needs_price && price.is_none() {
        check.fail(format!("price is required for mode {mode}"));
    }
    if mode == RateMode::PassthroughPlusMargin && body.margin_pct.is_none() {
        check.fail("margin_pct is required for mode passthrough_plus_margin");
    }
    if mode == RateMode::TieredPerCall && tiers.is_none() {
        check.fail("tiers are required for mode tiered_per_call");
    }
    if operator_id.trim().is_empty() {
        check.fail("operator_id is required");
    }
    check.finish()?;
    let mut tx = db.begin().await?;
    let catalog = latest(&mut tx, catalog_id).await?;
    let sql = format!(
        "INSERT INTO billing_rate (catalog_id, version, sku, unit, mode, price, margin_bp, tiers, updated_by, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (catalog_id, version, sku) DO UPDATE SET unit = excluded.unit, mode = excluded.mode, \
         price = excluded.price, margin_bp = excluded.margin_bp, tiers = excluded.tiers, updated_by = excluded.updated_by, updated_at = excluded.updated_at \
         RETURNING {RATE_COLUMNS}"
    );
    let rate: Rate = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(catalog_id)
        .bind(catalog.version)
        .bind(sku)
        .bind(unit)
        .bind(mode)
        .bind(price)
        .bind(margin)
        .bind(json!(tiers).to_string())
        .bind(operator_id)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(rate)
}

/// The amount of a line in minor units, in 128-bit integers: calls or
/// units times the price; tiers graduated (each call at its tier's price);
/// a margin on the line's whole cost, rounded half up to a minor unit once;
/// a subscription's fee whatever the usage; nothing for `free_internal`.
/// `None` when it does not fit 64 bits.
pub fn amount(rate: &Rate, units: i64, calls: i64) -> Option<i64> {
    let price = i128::from(rate.price.unwrap_or(0));
    let total: i128 = match rate.mode {
        RateMode::FlatPerCall => i128::from(calls) * price,
        RateMode::PerUnit => i128::from(units) * price,
        RateMode::PassthroughPlusMargin => (i128::from(units) * price * (10_000 + i128::from(rate.margin_bp.unwrap_or(0))) + 5_000) / 10_000,
        RateMode::BundledSubscription => price,
        RateMode::TieredPerCall => {
            let tiers: Vec<Tier> = serde_json::from_value(rate.tiers.0.clone()).unwrap_or_default();
            let (mut left, mut floor, mut sum) = (i128::from(calls), 0i128, 0i128);
            for t in tiers {
                let n = t.up_to.map_or(left, |up| left.min(i128::from(up) - floor));
                sum += n * i128::from(t.unit_price);
                left -= n;
                floor = t.up_to.map_or(floor, i128::from);
            }
            sum
        }
        RateMode::FreeInternal => 0,
    };
    i64::try_from(total).ok()
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewBillingInvoice)]
struct NewInvoice {
    /// The pricing catalog's name (catalog_id): its active version rates.
    catalog: String,
    /// The first UTC day, `YYYY-MM-DD`.
    #[schema(format = Date)]
    period_start: String,
    /// The last UTC day (inclusive), before today: the period is closed.
    #[schema(format = Date)]
    period_end: String,
}

async fn find(tx: &mut Tx, filter: &str, args: &[&str]) -> ApiResult<Option<Invoice>> {
    let sql = format!("SELECT {INVOICE_COLUMNS} FROM billing_invoice WHERE {filter}");
    let mut q = sqlx::query_as::<_, Invoice>(sqlx::AssertSqlSafe(sql));
    for a in args {
        q = q.bind(*a);
    }
    let Some(mut invoice) = q.fetch_optional(&mut **tx).await? else { return Ok(None) };
    let sql = format!("SELECT {LINE_COLUMNS} FROM billing_invoice_line WHERE invoice_id = $1 ORDER BY sku");
    invoice.line_items = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(invoice.invoice_id).fetch_all(&mut **tx).await?;
    Ok(Some(invoice))
}

const BY_PERIOD: &str = "tenant_id = $1 AND catalog_id = $2 AND period_start = $3 AND period_end = $4";

/// Rates the caller's tenant's usage over a closed period against a named
/// catalog: 201 with the invoice and its line items; the same catalog and
/// period again answers the first invoice (200).
#[utoipa::path(post, path = "/api/billing/invoices", tag = "sdk-billing", request_body = NewInvoice,
    extensions(("x-concurrency" = json!({ "outcome": "first-creates", "events": 1, "given": [["POST", "/admin/meter/pricing-catalogs", { "catalog_id": "c-{unique}", "version": 1, "currency": "EUR", "operator_id": "races" }], ["PATCH", "/admin/meter/pricing-catalogs/c-{unique}/status", { "status": "active", "operator_id": "races" }]], "body": { "catalog": "c-{unique}", "period_start": "2025-01-01", "period_end": "2025-01-31" } }))),
    responses((status = 201, description = "the invoice with its line items", body = Data<Invoice>),
        (status = 200, description = "the invoice generated before for this catalog and period", body = Data<Invoice>)))]
async fn generate(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewInvoice>) -> ApiResult<Response> {
    use axum::response::IntoResponse;
    let body = body.checked()?;
    let mut check = Check::new();
    let catalog = body.catalog.trim().to_string();
    // The days' strict form (two-digit month and day) is checked here.
    let start = meter::parse_day(&mut check, "period_start", &Some(body.period_start));
    let end = meter::parse_day(&mut check, "period_end", &Some(body.period_end));
    if let (Some(s), Some(e)) = (start, end) {
        if s > e {
            check.fail("period_start must not be after period_end");
        } else if (e - s).num_days() >= MAX_PERIOD_DAYS {
            check.fail(format!("a period is at most {MAX_PERIOD_DAYS} days"));
        }
        if e >= Utc::now().date_naive() {
            check.fail("period_end must be a day before today (UTC): the period must be closed");
        }
    }
    check.finish()?;
    let (start, end) = (start.unwrap_or_default().to_string(), end.unwrap_or_default().to_string());
    let tenant = ctx.tenant_id.as_str();
    let mut tx = state.db.begin().await?;
    if let Some(first) = find(&mut tx, BY_PERIOD, &[tenant, &catalog, &start, &end]).await? {
        return Ok(ok(first).into_response());
    }
    let active: Option<(i64, String)> =
        sqlx::query_as("SELECT version, currency FROM billing_catalog WHERE catalog_id = $1 AND status = 'active' ORDER BY version DESC LIMIT 1")
            .bind(&catalog)
            .fetch_optional(&mut *tx)
            .await?;
    let (version, currency) = active.ok_or_else(|| ApiError::invalid("catalog must name a pricing catalog with an active version"))?;
    let sql = format!("SELECT {RATE_COLUMNS} FROM billing_rate WHERE catalog_id = $1 AND version = $2");
    let rates: Vec<Rate> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&catalog).bind(version).fetch_all(&mut *tx).await?;
    let rates: BTreeMap<&str, &Rate> = rates.iter().map(|r| (r.sku.as_str(), r)).collect();
    let usage: BTreeMap<String, (i64, i64)> =
        meter::usage_by_sku(&mut tx, tenant, &start, &end).await?.into_iter().map(|u| (u.sku, (u.units, u.events))).collect();
    // Skus used, and every subscription of the catalog, in sku order.
    let mut lines = Vec::new();
    let mut unrated = Vec::new();
    let skus: std::collections::BTreeSet<&str> =
        usage.keys().map(String::as_str).chain(rates.values().filter(|r| r.mode == RateMode::BundledSubscription).map(|r| r.sku.as_str())).collect();
    for sku in skus {
        let (units, calls) = usage.get(sku).copied().unwrap_or((0, 0));
        let Some(rate) = rates.get(sku) else {
            unrated.push(sku.to_string());
            continue;
        };
        let amount = amount(rate, units, calls).ok_or_else(|| ApiError::Internal(anyhow::anyhow!("the amount of {sku} overflows")))?;
        lines.push(Line { sku: sku.to_string(), unit: rate.unit.clone(), mode: rate.mode, units, calls, price: rate.price, margin_bp: rate.margin_bp, amount });
    }
    let total = lines.iter().try_fold(0i64, |t, l| t.checked_add(l.amount)).ok_or_else(|| ApiError::Internal(anyhow::anyhow!("the total overflows")))?;
    let sql = format!(
        "INSERT INTO billing_invoice (invoice_id, tenant_id, catalog_id, catalog_version, currency, period_start, period_end, status, total, unrated_skus, \
         generated_by, generated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 'issued', $8, $9, $10, $11) \
         ON CONFLICT (tenant_id, catalog_id, period_start, period_end) DO NOTHING RETURNING {INVOICE_COLUMNS}"
    );
    let inserted: Option<Invoice> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(tenant)
        .bind(&catalog)
        .bind(version)
        .bind(&currency)
        .bind(&start)
        .bind(&end)
        .bind(total)
        .bind(json!(unrated).to_string())
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let Some(mut invoice) = inserted else {
        // Generated meanwhile by a concurrent request: that one stands.
        tx.rollback().await?;
        let mut tx = state.db.read.begin().await?;
        let first = find(&mut tx, BY_PERIOD, &[tenant, &catalog, &start, &end]).await?.ok_or(ApiError::NotFound)?;
        return Ok(ok(first).into_response());
    };
    for l in &lines {
        sqlx::query(
            "INSERT INTO billing_invoice_line (invoice_id, sku, unit, mode, units, calls, price, margin_bp, amount) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(invoice.invoice_id)
        .bind(&l.sku)
        .bind(&l.unit)
        .bind(l.mode)
        .bind(l.units)
        .bind(l.calls)
        .bind(l.price)
        .bind(l.margin_bp)
        .bind(l.amount)
        .execute(&mut *tx)
        .await?;
    }
    let payload = json!({ "invoice_id": invoice.invoice_id, "catalog_id": catalog, "catalog_version": version, "period_start": start,
        "period_end": end, "currency": currency, "total": total });
    audit::record(&mut tx, &ctx, events::BILLING_INVOICE_GENERATED, payload).await?;
    tx.commit().await?;
    invoice.line_items = lines;
    Ok(created(invoice).into_response())
}

/// An invoice of the caller's tenant, with its line items.
#[utoipa::path(get, path = "/api/billing/invoices/{invoice_id}", tag = "sdk-billing", params(("invoice_id" = String, Path, description = "the invoice")),
    responses((status = 200, description = "the invoice", body = Data<Invoice>)))]
async fn get_invoice(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Invoice>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.read.begin().await?;
    let invoice = find(&mut tx, "tenant_id = $1 AND invoice_id = $2", &[&ctx.tenant_id, &id]).await?.ok_or(ApiError::NotFound)?;
    tx.commit().await?;
    Ok(ok(invoice))
}

/// An invoice as a list shows it: without its line items (read the
/// invoice for them).
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = BillingInvoiceSummary)]
struct InvoiceSummary {
    invoice_id: Id,
    catalog_id: String,
    catalog_version: i64,
    currency: String,
    /// The first UTC day, inclusive.
    period_start: String,
    /// The last UTC day, inclusive.
    period_end: String,
    status: InvoiceStatus,
    /// Minor units: the sum of the line items.
    total: i64,
    /// Skus used in the period that the catalog has no rate for.
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<String>)]
    unrated_skus: JsonText,
    generated_by: String,
    generated_at: Timestamp,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct InvoiceFilter {
    /// Invoices whose period ends on or after this UTC day, `YYYY-MM-DD`.
    from: Option<String>,
    /// Invoices whose period starts on or before this UTC day, `YYYY-MM-DD`.
    to: Option<String>,
    /// Only invoices rated against this pricing catalog (its catalog_id).
    #[param(max_length = 128)]
    catalog: Option<String>,
}

const INVOICES: Listing = Listing {
    table: "billing_invoice",
    columns: "invoice_id, catalog_id, catalog_version, currency, period_start, period_end, status, total, unrated_skus, generated_by, generated_at",
    filter: "tenant_id = $1 AND ($2 = '' OR period_end >= $2) AND ($3 = '' OR period_start <= $3) AND ($4 = '' OR catalog_id = $4)",
    order: "generated_at DESC, invoice_id DESC",
};

/// The tenant's invoices, newest first, without their line items: those
/// whose period meets `from`..`to` (UTC days, inclusive), of one catalog.
#[utoipa::path(get, path = "/api/billing/invoices", tag = "sdk-billing", params(InvoiceFilter, Page),
    responses((status = 200, description = "one page of invoices", body = ListOf<InvoiceSummary>)))]
async fn list_invoices(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<InvoiceFilter>) -> ApiResult<ListOf<InvoiceSummary>> {
    let mut check = Check::new();
    let from = meter::parse_day(&mut check, "from", &q.from);
    let to = meter::parse_day(&mut check, "to", &q.to);
    if let (Some(f), Some(t)) = (from, to)
        && f > t
    {
        check.fail("from must be on or before to");
    }
    let catalog = q.catalog.as_deref().map(str::trim).unwrap_or("");
    if !catalog.is_empty() && !valid_name(catalog) {
        check.fail("catalog must be 1 to 128 letters, digits or . _ -");
    }
    check.finish()?;
    let (from, to) = (from.map(|d| d.to_string()).unwrap_or_default(), to.map(|d| d.to_string()).unwrap_or_default());
    page.list::<InvoiceSummary>(&state.db.read, &INVOICES, &[&ctx.tenant_id, &from, &to, catalog]).await
}

/// The version of a pricing catalog an invoice rates against now, as a
/// tenant reads it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = BillingActiveCatalog)]
struct ActiveCatalog {
    catalog_id: String,
    /// The highest active version: the one `POST /api/billing/invoices` uses.
    version: i64,
    /// ISO 4217: the currency of every amount rated against it.
    currency: String,
    /// When the version last changed status.
    updated_at: Timestamp,
    /// By sku; a sku without a rate is invoiced as unrated.
    rates: Vec<Rate>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct CatalogQuery {
    /// The pricing catalog's name, as an invoice names it.
    #[param(max_length = 128, pattern = r"^[A-Za-z0-9._-]{1,128}$")]
    catalog_id: String,
}

/// The active version of a pricing catalog and its rates: what an invoice
/// generated now rates the tenant's usage with. 404 when the catalog has
/// no active version (an invoice naming it is 400). Catalogs are the
/// platform's, the same for every tenant, so the catalog is named in the
/// query, not the path.
#[utoipa::path(get, path = "/api/billing/catalogs/active", tag = "sdk-billing", params(CatalogQuery),
    responses((status = 200, description = "the active version and its rates", body = Data<ActiveCatalog>),
        (status = 404, description = "NotFound: the catalog has no active version", body = ErrorBody)))]
async fn active_catalog(State(state): State<AppState>, _: Tenant, Params(q): Params<CatalogQuery>) -> ApiResult<Data<ActiveCatalog>> {
    static CATALOG_ID: Pattern = Pattern::query::<CatalogQuery>("catalog_id");
    let catalog_id = q.catalog_id.as_str();
    if !CATALOG_ID.is_match(catalog_id) {
        return Err(ApiError::invalid("catalog_id must be 1 to 128 letters, digits or . _ -"));
    }
    let mut tx = state.db.read.begin().await?;
    let sql = format!("SELECT {CATALOG_COLUMNS} FROM billing_catalog WHERE catalog_id = $1 AND status = 'active' ORDER BY version DESC LIMIT 1");
    let found: Option<Catalog> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(catalog_id).fetch_optional(&mut *tx).await?;
    let catalog = found.ok_or(ApiError::NotFound)?;
    let sql = format!("SELECT {RATE_COLUMNS} FROM billing_rate WHERE catalog_id = $1 AND version = $2 ORDER BY sku");
    let rates: Vec<Rate> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(catalog_id).bind(catalog.version).fetch_all(&mut *tx).await?;
    tx.commit().await?;
    Ok(ok(ActiveCatalog { catalog_id: catalog.catalog_id, version: catalog.version, currency: catalog.currency, updated_at: catalog.updated_at, rates }))
}

/// Invoices of every tenant (or of `tenant_id`) whose period meets the
/// range (`period_end` on or after `from`, `period_start` on or before
/// `to`, both UTC days, inclusive), newest `generated_at` first, at most
/// `limit`, without their line items (the operator's `GET /admin/invoices`).
pub async fn invoices_across(db: &Db, tenant_id: Option<&str>, from: Option<&str>, to: Option<&str>, limit: i64) -> ApiResult<Vec<Invoice>> {
    let sql = format!(
        "SELECT {INVOICE_COLUMNS} FROM billing_invoice WHERE ($1 IS NULL OR tenant_id = $1) AND ($2 IS NULL OR period_end >= $2) \
         AND ($3 IS NULL OR period_start <= $3) ORDER BY generated_at DESC, invoice_id DESC LIMIT $4"
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(from).bind(to).bind(limit).fetch_all(&db.read).await?)
}

/// Any tenant's invoice with its line items (by sku), for the operator.
pub async fn invoice_by_id(db: &Db, invoice_id: &str) -> ApiResult<Option<Invoice>> {
    let mut tx = db.read.begin().await?;
    let invoice = find(&mut tx, "invoice_id = $1", &[invoice_id]).await?;
    tx.commit().await?;
    Ok(invoice)
}

/// The tenant's invoices whose period lies within `first` to `last` (UTC
/// days, both inclusive), without their line items, by period then
/// catalog (sdk-analytics reads them).
pub async fn invoices_within(tx: &mut Tx, tenant_id: &str, first: &str, last: &str) -> ApiResult<Vec<Invoice>> {
    let sql = format!(
        "SELECT {INVOICE_COLUMNS} FROM billing_invoice WHERE tenant_id = $1 AND period_start >= $2 AND period_end <= $3 \
         ORDER BY period_start, period_end, catalog_id"
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(first).bind(last).fetch_all(&mut **tx).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(mode: &str, price: Option<i64>, margin_bp: Option<i64>, tiers: Value) -> Rate {
        let (catalog_id, sku, unit, updated_by) = Default::default();
        let mode = mode.parse().unwrap();
        Rate { catalog_id, version: 1, sku, unit, mode, price, margin_bp, tiers: JsonText(tiers), updated_by, updated_at: Timestamp::now() }
    }

    #[test]
    fn amounts_are_integers_with_margins_rounded_half_up_once_a_line() {
        let margin = rate("passthrough_plus_margin", Some(1), Some(5_000), Value::Null);
        assert_eq!((amount(&margin, 1, 1), amount(&margin, 3, 1), amount(&margin, 0, 0)), (Some(2), Some(5), Some(0)));
        let discount = rate("passthrough_plus_margin", Some(10), Some(-2_550), Value::Null);
        assert_eq!(amount(&discount, 1, 1), Some(7), "7.45 rounds to 7");
        let tiers = json!([{ "up_to": 2, "unit_price": 10 }, { "up_to": 4, "unit_price": 7 }, { "up_to": null, "unit_price": 1 }]);
        let tiered = rate("tiered_per_call", None, None, tiers);
        assert_eq!((amount(&tiered, 0, 0), amount(&tiered, 0, 3), amount(&tiered, 0, 5), amount(&tiered, 0, 105)), (Some(0), Some(27), Some(35), Some(135)));
        assert_eq!(amount(&rate("per_unit", Some(i64::MAX), None, Value::Null), 2, 1), None, "an overflow is never wrapped");
        assert_eq!(amount(&rate("bundled_subscription", Some(900), None, Value::Null), 0, 0), Some(900));
        assert_eq!(amount(&rate("free_internal", Some(900), None, Value::Null), 50, 5), Some(0));
    }

    #[test]
    fn margins_are_read_as_decimal_text() {
        let bp = |v: Value| v.as_number().and_then(basis_points);
        assert_eq!((bp(json!(12.5)), bp(json!(7)), bp(json!(-0.01)), bp(json!(0.07))), (Some(1250), Some(700), Some(-1), Some(7)));
        assert_eq!((bp(json!(1.005)), bp(json!("5")), bp(json!(1e300))), (None, None, None));
    }
}
