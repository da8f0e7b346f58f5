//! Outreach and communication: sdk-offer-catalog (the tenant's offers, one
//! slug each) and sdk-sequence (message templates and sequences of them).

pub mod offer;
pub mod sequence;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().merge(offer::routes()).merge(sequence::routes())
}
