//! Governance, consent and security: so far sdk-audit (event types and
//! hash-chained audit entries).

pub mod audit;

use axum::Router;

use hub_kernel::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new().merge(audit::routes())
}
