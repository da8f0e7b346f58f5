//! Governance, consent and security: so far sdk-audit (event types and
//! hash-chained audit entries).

pub mod audit;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().merge(audit::routes())
}
