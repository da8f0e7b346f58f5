//! AI and agents: so far sdk-agent-runtime.

pub mod agent_runtime;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().merge(agent_runtime::routes())
}
