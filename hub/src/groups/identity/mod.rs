//! Identity and access: authentication bootstrap, tenancy spine, personas
//! and roles, applications and API keys.

pub mod api_keys;
pub mod auth;
pub mod personas;
pub mod roles;
pub mod tenancy;

use axum::Router;

use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new().merge(auth::routes()).merge(api_keys::routes()).merge(tenancy::routes()).merge(personas::routes()).merge(roles::routes())
}
