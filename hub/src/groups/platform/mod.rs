//! Platform and multi-tenancy groups.

pub mod device;
pub mod diagnostic;

use axum::Router;

use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new().merge(device::routes()).merge(diagnostic::routes())
}
