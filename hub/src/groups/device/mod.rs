//! Native on-device groups (hdk-*): the hub's side of what device-core does
//! on the phone.

pub mod diagnostic;
pub mod idp;
pub mod manifests;
pub mod records;
pub mod sync;

use axum::Router;

use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new().merge(manifests::routes()).merge(diagnostic::routes()).merge(idp::routes()).merge(records::routes()).merge(sync::routes())
}
