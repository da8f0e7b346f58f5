//! Governance, consent and security: so far sdk-audit (event types and
//! hash-chained audit entries), sdk-vault (envelope encryption),
//! sdk-secrets (secret references), sdk-consent (purposes, grants and
//! withdrawals), sdk-data-rights (subject requests and executions) and
//! sdk-evidence (captures of encounters), sdk-approval (ordered approval
//! steps and their decisions), sdk-rebac (relationships between personas
//! and the reachability check the gate also asks), sdk-policy (Cedar policy
//! bundles, and the evaluation the gate's ABAC step makes), sdk-trace
//! (signed exports of agent-run traces with their audit entries).

pub mod approval;
pub mod audit;
pub mod consent;
pub mod data_rights;
pub mod evidence;
pub mod policy;
pub mod rebac;
pub mod secrets;
pub mod trace;
pub mod vault;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(audit::routes())
        .merge(vault::routes())
        .merge(secrets::routes())
        .merge(consent::routes())
        .merge(data_rights::routes())
        .merge(evidence::routes())
        .merge(approval::routes())
        .merge(rebac::routes())
        .merge(policy::routes())
        .merge(trace::routes())
}
