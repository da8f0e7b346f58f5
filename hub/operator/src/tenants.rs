//! Tenant suspension (beyond the documents, as operators of ZITADEL and
//! Supabase expect): a suspended tenant's credentials answer 423 on every
//! replica, and its data stays intact until it is resumed. The standing
//! itself is the identity area's (`tenant_lifecycle`).

use hub_identity::tenant_lifecycle::{self, Suspension};
use hub_kernel::gate::Operator;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(suspend)).routes(routes!(resume))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminTenantSuspend)]
struct Suspend {
    /// Why.
    #[schema(max_length = 500)]
    reason: String,
}

/// Suspends a tenant: its credentials answer 423 until it is resumed.
#[utoipa::path(post, path = "/admin/tenants/{tenant_id}/suspend", tag = "admin-tenants", request_body = Suspend,
    params(("tenant_id" = String, Path, description = "the tenant")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/admin/apps", { "app_id": "r-{unique}", "display_name": "Races" }], ["POST", "/admin/tenants", { "app_id": "r-{unique}", "display_name": "Races", "region": "eu-west-1" }]], "params": { "tenant_id": "{tenant.tenant_id}" }, "body": { "reason": "race" } }))),
    responses((status = 200, description = "the tenant, suspended", body = Data<Suspension>)))]
async fn suspend(State(state): State<AppState>, Operator(who): Operator, Path(tenant_id): Path<String>, body: Body<Suspend>) -> ApiResult<Data<Suspension>> {
    let tenant_id = path_id(&tenant_id)?.to_string();
    if hub_identity::tenancy::find(state.db.writer(), &tenant_id).await?.is_none() {
        return Err(ApiError::NotFound);
    }
    let body = body.checked()?;
    Ok(ok(tenant_lifecycle::suspend(&state, &tenant_id, &who, body.reason.trim()).await?))
}

/// Resumes a suspended tenant.
#[utoipa::path(post, path = "/admin/tenants/{tenant_id}/resume", tag = "admin-tenants", params(("tenant_id" = String, Path, description = "the tenant")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/admin/apps", { "app_id": "r-{unique}", "display_name": "Races" }], ["POST", "/admin/tenants", { "app_id": "r-{unique}", "display_name": "Races", "region": "eu-west-1" }], ["POST", "/admin/tenants/{tenant.tenant_id}/suspend", { "reason": "race" }]], "params": { "tenant_id": "{tenant_id}" } }))),
    responses((status = 200, description = "the tenant, resumed", body = Data<Suspension>)))]
async fn resume(State(state): State<AppState>, Operator(who): Operator, Path(tenant_id): Path<String>) -> ApiResult<Data<Suspension>> {
    let tenant_id = path_id(&tenant_id)?.to_string();
    Ok(ok(tenant_lifecycle::resume(&state, &tenant_id, &who).await?))
}
