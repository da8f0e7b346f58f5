//! AI and agents: so far sdk-agent-runtime.

pub mod agent_runtime;

use axum::Router;

use hub_kernel::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new().merge(agent_runtime::routes())
}
