//! Governance, consent and security: so far sdk-audit (event types and
//! hash-chained audit entries) and sdk-vault (envelope encryption).

pub mod audit;
pub mod vault;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().merge(audit::routes()).merge(vault::routes())
}
