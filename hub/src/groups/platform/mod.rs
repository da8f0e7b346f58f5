//! Platform and multi-tenancy: assets with their twins, readings and
//! per-robot credentials (sdk-asset), robot commands with approval
//! (sdk-command), devices (sdk-device) and diagnostics
//! (sdk-diagnostic-telemetry).

pub mod asset;
pub mod command;
pub mod device;
pub mod diagnostic;

use axum::Router;

use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new().merge(asset::routes()).merge(command::routes()).merge(device::routes()).merge(diagnostic::routes())
}
