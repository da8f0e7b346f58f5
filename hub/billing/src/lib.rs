//! Billing, metering and analytics: sdk-meter (usage events rolled up per
//! day and sku, monthly hard caps and the operator's overrides),
//! sdk-billing (pricing catalogs and rates, invoices rated from the daily
//! roll-up in integer minor units), sdk-data-credits (prepaid credits:
//! quotes, holds that never overdraw, settlement), sdk-payment (stored
//! payment methods, charges through a provider, sandbox by default) and
//! sdk-analytics (dataset builds of the tenant's data, exported to the
//! object store).

pub mod analytics;
pub mod billing;
pub mod data_credits;
pub mod meter;
pub mod payment;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().merge(meter::routes()).merge(billing::routes()).merge(data_credits::routes()).merge(payment::routes()).merge(analytics::routes())
}
