//! AI and agents: so far sdk-agent-runtime.

pub mod agent_runtime;

use axum::Router;

use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new().merge(agent_runtime::routes())
}
