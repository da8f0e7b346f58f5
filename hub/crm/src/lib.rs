//! CRM and engagement: sdk-crm (contacts, leads, calls and a contact's
//! timeline), sdk-campaign (campaigns and their journeys of opaque steps),
//! sdk-content (items with numbered versions, archived softly),
//! sdk-coverage (a primary, a backup and an acceptance window per kind of
//! work; `coverage::rule_for` is the lookup other crates call), sdk-social
//! (authorised handles bound to a persona), sdk-lead-scoring (models per
//! vertical, one active per tenant and vertical), sdk-engagement
//! (encounters opened, closed and sealed, with their retention), sdk-event
//! (events, tickets with a qr_token, check-in once), sdk-service-request
//! (queues and the requests filed into them), sdk-sla (policies with
//! escalation rungs, clocks, and the clocks at risk).

pub mod campaign;
pub mod content;
pub mod coverage;
pub mod crm;
pub mod engagement;
pub mod lead_scoring;
pub mod service_request;
pub mod sla;
pub mod social;
pub mod ticket;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(crm::routes())
        .merge(campaign::routes())
        .merge(content::routes())
        .merge(coverage::routes())
        .merge(social::routes())
        .merge(lead_scoring::routes())
        .merge(engagement::routes())
        .merge(ticket::routes())
        .merge(service_request::routes())
        .merge(sla::routes())
}
