//! Outreach and communication: sdk-offer-catalog (the tenant's offers,
//! one slug each), sdk-sequence (message templates and sequences of them),
//! sdk-handoff (deals handed between personas), sdk-incident (incidents
//! worked from open to resolved), sdk-conversation (the compose check
//! over consent, a suppression list and quiet hours) and
//! sdk-deliverability (bounces and complaints from signed inbound
//! webhooks), sdk-notification (notifications sent through a provider,
//! and their delivery receipts) and connector-<provider>-voice (call legs
//! from signed inbound webhooks), sdk-scheduling (appointments pushed to
//! CalDAV calendars). It also holds sdk-connectors (sync items,
//! dead letters and replays), which `hub` serves as the area `connectors`.

pub mod connectors;
pub mod conversation;
pub mod deliverability;
pub mod handoff;
pub mod incident;
pub mod notification;
pub mod offer;
pub mod scheduling;
pub mod sequence;
pub mod voice;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::{inbound::Registry, state::AppState};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(offer::routes())
        .merge(sequence::routes())
        .merge(handoff::routes())
        .merge(incident::routes())
        .merge(conversation::routes())
        .merge(deliverability::routes())
        .merge(notification::routes())
        .merge(voice::routes())
        .merge(scheduling::routes())
}

/// Registers the area's handlers of signed inbound webhooks, by kind.
pub fn register_inbound(registry: &Registry) {
    registry.register(deliverability::KIND, deliverability::EmailEvents::new());
    registry.register(notification::KIND, std::sync::Arc::new(notification::Receipts));
    registry.register(voice::KIND, voice::CallLegs::new());
}
