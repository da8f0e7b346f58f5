//! Governance, consent and security: so far sdk-audit (event types and
//! hash-chained audit entries) sdk-vault (envelope encryption) and sdk-secrets (secret references).

pub mod audit;
pub mod secrets;
pub mod vault;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().merge(audit::routes()).merge(vault::routes()).merge(secrets::routes())
}
