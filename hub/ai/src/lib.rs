//! AI and agents: sdk-agent-runtime, sdk-ai-gateway (completions through
//! model routes), sdk-ingest (batches into the crm),
//! sdk-search (full text over the tenant's resources), sdk-mcp-bridge, sdk-taxonomy (extraction schemas) and
//! semantic-service (the cross-domain bridges).

pub mod agent_runtime;
pub mod ai_gateway;
pub mod ingest;
pub mod mcp_bridge;
pub mod redact;
pub mod search;
pub mod semantic;
pub mod taxonomy;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::state::AppState;

/// The agent-run sweep: every `agent_run_sweep_seconds` (not at all when
/// 0) it expires the active runs past their deadline
/// (`agent_runtime::expire_due`).
pub fn spawn_background(state: &AppState) {
    let every = state.config.agent_run_sweep_seconds;
    if every == 0 {
        return;
    }
    let s = state.clone();
    hub_kernel::db::every(std::time::Duration::from_secs(every), move || {
        let s = s.clone();
        async move {
            match agent_runtime::expire_due(&s.db).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(expired = n, "agent run sweep"),
                Err(e) => tracing::warn!(error = %e, "expiring agent runs"),
            }
        }
    });
}

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(agent_runtime::routes())
        .merge(ai_gateway::routes())
        .merge(ingest::routes())
        .merge(search::routes())
        .merge(mcp_bridge::routes())
        .merge(taxonomy::routes())
        .merge(semantic::routes())
}
