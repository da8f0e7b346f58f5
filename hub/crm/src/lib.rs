//! CRM and engagement: sdk-crm (contacts, leads, calls and a contact's
//! timeline).

pub mod crm;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().merge(crm::routes())
}
