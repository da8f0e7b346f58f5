//! Platform and multi-tenancy: assets with their twins, readings and
//! per-robot credentials (sdk-asset), and robot commands with approval
//! (sdk-command).

pub mod asset;
pub mod command;

use axum::Router;

use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new().merge(asset::routes()).merge(command::routes())
}
