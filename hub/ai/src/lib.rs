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
