//! sdk-mcp-bridge: the group's liveness probe (public).

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(health))
}

/// The group's liveness answer.
#[derive(Serialize, ToSchema)]
#[schema(as = McpBridgeHealth)]
struct Health {
    sdk: &'static str,
    status: &'static str,
}

/// Liveness of the group (public).
#[utoipa::path(get, path = "/api/mcp-bridge/health", tag = "sdk-mcp-bridge", responses((status = 200, description = "up", body = Health)))]
async fn health() -> axum::Json<Health> {
    axum::Json(Health { sdk: "sdk-mcp-bridge", status: "ok" })
}
