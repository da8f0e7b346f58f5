//! Platform and multi-tenancy: assets with their twins, readings and
//! per-robot credentials (sdk-asset), robot commands with approval
//! (sdk-command) and their two transports to the robots (`sse`, `quic`),
//! devices (sdk-device), diagnostics (sdk-diagnostic-telemetry), and the
//! workflow, geo, config, feature-flag, residency, dispatch, assignment,
//! media and webhook groups; and the per-robot credentials of the stream
//! and ack routes and of the QUIC endpoint (`robots`).

pub mod asset;
pub mod assignment;
pub mod command;
pub mod config;
pub mod device;
pub mod diagnostic;
pub mod dispatch;
pub mod feature_flags;
pub mod feed;
pub mod geo;
pub mod layer;
pub mod media;
pub mod quic;
pub mod residency;
pub mod robots;
pub mod sse;
pub mod watch;
pub mod webhook;
pub mod workflow;

use std::time::Duration;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::{db, state::AppState};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(asset::routes())
        .merge(command::routes())
        .merge(device::routes())
        .merge(diagnostic::routes())
        .merge(workflow::routes())
        .merge(geo::routes())
        .merge(config::routes())
        .merge(feature_flags::routes())
        .merge(residency::routes())
        .merge(dispatch::routes())
        .merge(assignment::routes())
        .merge(media::routes())
        .merge(webhook::routes())
}

/// The values a documentation enum of a request field lists (its tests
/// compare them with the values the handler accepts).
#[cfg(test)]
pub(crate) fn enum_values<T: utoipa::PartialSchema>() -> Vec<String> {
    let schema = serde_json::to_value(T::schema()).expect("schemas serialise");
    schema["enum"].as_array().expect("an enum").iter().map(|v| v.as_str().expect("a string").to_string()).collect()
}

/// The expiry sweeper of commands (a command past its deadline becomes
/// `expired` within a second) and the webhook delivery worker.
pub fn spawn_background(state: &AppState) {
    if state.config.webhook_worker {
        webhook::worker::spawn(state);
    }
    let s = state.clone();
    db::every(Duration::from_secs(1), move || {
        let s = s.clone();
        async move {
            if let Err(e) = command::sweep_expired(&s).await {
                tracing::warn!(error = %e, "sweeping expired commands");
            }
        }
    });
}
