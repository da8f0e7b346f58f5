//! Outreach and communication: sdk-offer-catalog (the tenant's offers,
//! one slug each).

pub mod offer;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().merge(offer::routes())
}
