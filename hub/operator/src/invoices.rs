//! "Audit and invoices", the invoice half: every tenant's invoices (or one
//! tenant's) whose period meets a range of days, newest generated first,
//! at most 200; and one invoice with its line items by sku. The invoices
//! are the billing area's (`billing::{invoices_across, invoice_by_id}`).

use hub_billing::{billing, meter};
use hub_kernel::gate::Operator;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list)).routes(routes!(detail))
}

/// Invoices listed at most.
const LIMIT: i64 = 200;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Filter {
    /// Only this tenant's invoices (an unknown tenant lists none).
    #[param(format = "uuid")]
    tenant_id: Option<String>,
    /// `YYYY-MM-DD`: invoices whose `period_end` is on or after it.
    #[param(format = Date)]
    from: Option<String>,
    /// `YYYY-MM-DD`: invoices whose `period_start` is on or before it.
    #[param(format = Date)]
    to: Option<String>,
}

/// An invoice without its line items: a row of the list, and the
/// invoice of the detail (whose line items come beside it).
#[derive(Serialize, ToSchema)]
#[schema(as = AdminInvoiceSummary)]
struct Summary {
    invoice_id: Id,
    tenant_id: String,
    catalog_id: String,
    catalog_version: i64,
    currency: String,
    /// The first UTC day, inclusive.
    period_start: String,
    /// The last UTC day, inclusive.
    period_end: String,
    status: billing::InvoiceStatus,
    /// Minor units: the sum of the line items.
    total: i64,
    /// Skus used in the period that the catalog has no rate for.
    #[schema(value_type = Vec<String>)]
    unrated_skus: JsonText,
    generated_by: String,
    generated_at: Timestamp,
}

impl From<billing::Invoice> for Summary {
    fn from(i: billing::Invoice) -> Self {
        Summary {
            invoice_id: i.invoice_id,
            tenant_id: i.tenant_id,
            catalog_id: i.catalog_id,
            catalog_version: i.catalog_version,
            currency: i.currency,
            period_start: i.period_start,
            period_end: i.period_end,
            status: i.status,
            total: i.total,
            unrated_skus: i.unrated_skus,
            generated_by: i.generated_by,
            generated_at: i.generated_at,
        }
    }
}

/// Invoices across tenants, newest `generated_at` first, at most 200.
#[utoipa::path(get, path = "/admin/invoices", tag = "admin-invoices", params(Filter),
    responses((status = 200, description = "the invoices, without their line items", body = Data<Vec<Summary>>)))]
async fn list(State(state): State<AppState>, _: Operator, Params(q): Params<Filter>) -> ApiResult<Data<Vec<Summary>>> {
    let tenant = canonical_uuid_opt(&q.tenant_id);
    let mut check = Check::new();
    let from = meter::parse_day(&mut check, "from", &q.from);
    let to = meter::parse_day(&mut check, "to", &q.to);
    if let (Some(f), Some(t)) = (from, to)
        && f > t
    {
        check.fail("from must not be after to");
    }
    check.finish()?;
    let (from, to) = (from.map(|d| d.to_string()), to.map(|d| d.to_string()));
    let rows = billing::invoices_across(&state.db, tenant.as_deref(), from.as_deref(), to.as_deref(), LIMIT).await?;
    Ok(ok(rows.into_iter().map(Summary::from).collect()))
}

/// An invoice and its line items.
#[derive(Serialize, ToSchema)]
#[schema(as = AdminInvoice)]
struct Detail {
    invoice: Summary,
    /// By sku.
    line_items: Vec<billing::Line>,
}

/// Any tenant's invoice with its line items; 404 'invoice not found'
/// (a non-UUID id too).
#[utoipa::path(get, path = "/admin/invoices/{invoice_id}", tag = "admin-invoices", params(("invoice_id" = String, Path, description = "the invoice")),
    responses((status = 200, description = "the invoice and its line items", body = Data<Detail>)))]
async fn detail(State(state): State<AppState>, _: Operator, Path(id): Path<String>) -> ApiResult<Data<Detail>> {
    let missing = || ApiError::Missing("invoice not found");
    let id = path_id(&id).map_err(|_| missing())?.to_string();
    let mut invoice = billing::invoice_by_id(&state.db, &id).await?.ok_or_else(missing)?;
    let line_items = std::mem::take(&mut invoice.line_items);
    Ok(ok(Detail { invoice: invoice.into(), line_items }))
}
