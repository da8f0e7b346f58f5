//! AI and agents: so far sdk-agent-runtime, sdk-mcp-bridge, sdk-taxonomy
//! (extraction schemas) and semantic-service (the cross-domain bridges).

pub mod agent_runtime;
pub mod mcp_bridge;
pub mod semantic;
pub mod taxonomy;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().merge(agent_runtime::routes()).merge(mcp_bridge::routes()).merge(taxonomy::routes()).merge(semantic::routes())
}
