//! Operator routes under `/admin/*`, one module per section of the operator
//! document. The gate admits only the operator credential here.

pub mod audit;

use axum::Router;

use hub_kernel::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new().merge(audit::routes())
}
