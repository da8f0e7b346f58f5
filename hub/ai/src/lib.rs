//! AI and agents: so far sdk-agent-runtime and sdk-mcp-bridge.

pub mod agent_runtime;
pub mod mcp_bridge;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().merge(agent_runtime::routes()).merge(mcp_bridge::routes())
}
