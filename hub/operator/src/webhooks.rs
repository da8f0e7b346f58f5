//! The operator's view of webhook endpoints ("Webhooks"): every tenant's,
//! or one tenant's, newest first, at most 200; an unknown tenant is an
//! empty list.

use hub_kernel::gate::Operator;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list))
}

/// Endpoints listed at most.
const LIMIT: i64 = 200;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Filter {
    /// Only this tenant's endpoints.
    #[param(format = "uuid")]
    tenant_id: Option<String>,
}

/// A webhook endpoint as the operator sees it (never its secret).
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = AdminWebhookEndpoint)]
struct Endpoint {
    endpoint_id: Id,
    tenant_id: Id,
    url: String,
    status: EndpointStatus,
    failure_streak: i64,
    last_success_at: Option<Timestamp>,
    last_failure_at: Option<Timestamp>,
    created_at: Timestamp,
}

stored_enum! {
    /// Whether an endpoint is delivered to.
    #[schema(as = AdminWebhookEndpointStatus)]
    enum EndpointStatus { Active = "active", Disabled = "disabled" }
}

const COLUMNS: &str = "endpoint_id, tenant_id, url, status, failure_streak, last_success_at, last_failure_at, created_at";

/// Webhook endpoints across tenants, newest first, at most 200.
#[utoipa::path(get, path = "/admin/webhooks", tag = "admin-webhooks", params(Filter),
    responses((status = 200, description = "the endpoints", body = Data<Vec<Endpoint>>)))]
async fn list(State(state): State<AppState>, _: Operator, Params(q): Params<Filter>) -> ApiResult<Data<Vec<Endpoint>>> {
    let tenant = canonical_uuid_opt(&q.tenant_id);
    // Two statements rather than `($1 IS NULL OR tenant_id = $1)`, so
    // each is served by its index (webhook_endpoint_by_tenant, _newest).
    let rows: Vec<Endpoint> = match tenant {
        Some(t) => {
            let sql = format!("SELECT {COLUMNS} FROM webhook_endpoint WHERE tenant_id = $1 ORDER BY created_at DESC, endpoint_id DESC LIMIT $2");
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(t).bind(LIMIT).fetch_all(&state.db.read).await?
        }
        None => {
            let sql = format!("SELECT {COLUMNS} FROM webhook_endpoint ORDER BY created_at DESC, endpoint_id DESC LIMIT $1");
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(LIMIT).fetch_all(&state.db.read).await?
        }
    };
    Ok(ok(rows))
}
