//! CRM and engagement: sdk-crm (contacts, leads, calls, a contact's
//! timeline, and deals won or lost), sdk-campaign (campaigns and their
//! journeys of opaque steps), sdk-content (items with numbered versions, archived softly),
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
pub mod deals;
pub mod engagement;
pub mod lead_scoring;
pub mod service_request;
pub mod sla;
pub mod social;
pub mod ticket;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::state::AppState;

/// The SLA sweep: every `sla_sweep_seconds` (not at all when 0) it fires
/// the escalation rungs whose time has come (`sla::fire_due`).
pub fn spawn_background(state: &AppState) {
    let every = state.config.sla_sweep_seconds;
    if every == 0 {
        return;
    }
    let s = state.clone();
    hub_kernel::db::every(std::time::Duration::from_secs(every), move || {
        let s = s.clone();
        async move {
            if let Err(e) = sla::fire_due(&s.db).await {
                tracing::warn!(error = %e, "firing SLA rungs");
            }
        }
    });
}

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(crm::routes())
        .merge(deals::routes())
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
