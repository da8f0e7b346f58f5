//! Outreach and communication: sdk-offer-catalog (the tenant's offers,
//! one slug each), sdk-sequence (message templates and sequences of them),
//! sdk-handoff (deals handed between personas), sdk-incident (incidents
//! worked from open to resolved) and sdk-conversation (the compose check
//! over consent, a suppression list and quiet hours).

pub mod conversation;
pub mod handoff;
pub mod incident;
pub mod offer;
pub mod sequence;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().merge(offer::routes()).merge(sequence::routes()).merge(handoff::routes()).merge(incident::routes()).merge(conversation::routes())
}
