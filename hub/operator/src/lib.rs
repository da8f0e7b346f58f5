//! Operator routes under `/admin/*`, one module per section of the operator
//! document. The gate admits only the operator credential here.

pub mod approvals;
pub mod apps;
pub mod audit;
pub mod byok;
pub mod config;
pub mod data_credits;
pub mod feature_flags;
pub mod federation;
mod fields;
pub mod hardcaps;
pub mod invoices;
pub mod lineage;
pub mod multi_region;
pub mod onprem;
pub mod pricing;
pub mod security;
pub mod sovereign;
pub mod storm;
pub mod taxonomy;
pub mod tenants;
pub mod webhooks;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(audit::routes())
        .merge(webhooks::routes())
        .merge(security::routes())
        .merge(tenants::routes())
        .merge(approvals::routes())
        .merge(multi_region::routes())
        .merge(sovereign::routes())
        .merge(onprem::routes())
        .merge(storm::routes())
        .merge(lineage::routes())
        .merge(federation::routes())
        .merge(pricing::routes())
        .merge(invoices::routes())
        .merge(apps::routes())
        .merge(byok::routes())
        .merge(data_credits::routes())
        .merge(hardcaps::routes())
        .merge(taxonomy::routes())
        .merge(feature_flags::routes())
        .merge(config::routes())
}
