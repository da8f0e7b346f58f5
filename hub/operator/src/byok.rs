//! "Key management and security", the BYOK half: a tenant's binding to a
//! customer-managed key, its revocation (`active` → `revoking` →
//! `revoked`; from then on the tenant's vault and data keys do not open)
//! and its rotation (the tenant's data keys re-wrapped under the new
//! tenant key; a repeat is 409 `UndecryptableError`). The keys and their
//! wrapping are the kernel's (`crypto::byok`).

use hub_kernel::crypto::byok::{self, Binding, NewBinding, Rotation};
use hub_kernel::gate::Operator;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(bind)).routes(routes!(revoke)).routes(routes!(rotate)).routes(routes!(of_tenant))
}

/// The propagation SLA when none is given, in seconds.
const DEFAULT_SLA: i64 = 60;

stored_enum! {
    /// Where a customer-managed key lives.
    #[schema(as = AdminByokProvider)]
    enum Provider { AwsKms = "aws-kms", GcpKms = "gcp-kms", HsmPkcs11 = "hsm-pkcs11" }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminNewByokBinding)]
struct NewBindingBody {
    /// An existing tenant.
    #[schema(format = "uuid")]
    tenant_id: String,
    provider: Provider,
    #[schema(max_length = 2048)]
    customer_kms_key_arn: String,
    /// The tenant key under the customer's key (never used before).
    #[schema(max_length = 256)]
    tenant_key_id: String,
    #[schema(max_length = 200)]
    operator_id: String,
    /// Default 60.
    #[schema(minimum = 1, maximum = 86_400)]
    sla_revoke_propagation_seconds: Option<i64>,
    /// An `https://` URL without user information (`user:password@`).
    #[schema(max_length = 2048)]
    siem_forwarder_endpoint: Option<String>,
}

/// Binds a tenant to a customer-managed key: the tenant's data keys are
/// wrapped under it from now on (200). Key reachability at the provider is
/// not verified. 409 when the tenant has a binding in force or the tenant
/// key was used before.
#[utoipa::path(post, path = "/admin/byok/bindings", tag = "admin-byok", request_body = NewBindingBody,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/admin/apps", { "app_id": "r-{unique}", "display_name": "Races" }], ["POST", "/admin/tenants", { "app_id": "r-{unique}", "display_name": "Races", "region": "eu-west-1" }]], "body": { "tenant_id": "{tenant.tenant_id}", "provider": "aws-kms", "customer_kms_key_arn": "arn:aws:kms:eu-west-1:1:key/race", "tenant_key_id": "tk-{unique}", "operator_id": "ops-race" } }))),
    responses((status = 200, description = "the binding", body = Data<Binding>)))]
async fn bind(State(state): State<AppState>, Operator(who): Operator, body: Body<NewBindingBody>) -> ApiResult<Data<Binding>> {
    let body = body.checked()?;
    let tenant_id = canonical_uuid(&body.tenant_id);
    let provider = body.provider.as_str();
    let (arn, tenant_key_id, operator_id) = (body.customer_kms_key_arn.trim(), body.tenant_key_id.trim(), body.operator_id.trim());
    let sla = body.sla_revoke_propagation_seconds.unwrap_or(DEFAULT_SLA);
    let siem = Check::optional(&body.siem_forwarder_endpoint);
    let mut check = Check::new();
    if siem.as_deref().is_some_and(|u| !u.starts_with("https://") || u.len() <= "https://".len()) {
        check.fail("siem_forwarder_endpoint must be an https:// URL");
    } else if let Some(Err(why)) = siem.as_deref().map(|u| hub_kernel::outbound::no_userinfo("siem_forwarder_endpoint", u)) {
        check.fail(why);
    }
    check.finish()?;
    if hub_identity::tenancy::find(&state.db.read, &tenant_id).await?.is_none() {
        return Err(ApiError::invalid("tenant_id must name an existing tenant"));
    }
    let new = NewBinding {
        tenant_id: &tenant_id,
        provider,
        customer_kms_key_arn: arn,
        tenant_key_id,
        operator_id,
        sla_revoke_propagation_seconds: sla,
        siem_forwarder_endpoint: siem.as_deref(),
    };
    Ok(ok(hub_kernel::security::bind_byok(&state.db, &state.master, &who, new).await?))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminByokRevoke)]
struct RevokeBody {
    #[schema(max_length = 2000)]
    reason: String,
    #[schema(max_length = 200)]
    operator_id: String,
}

/// Revokes a binding's grant; answers it `revoked` with `revoked_at` once
/// no replica can unwrap the tenant's keys. 404 'binding not found', 409
/// already revoked. Event `security.byok.revoked.v1` in the tenant's chain.
#[utoipa::path(post, path = "/admin/byok/bindings/{binding_id}/revoke", tag = "admin-byok", request_body = RevokeBody,
    params(("binding_id" = String, Path, description = "the binding")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/admin/apps", { "app_id": "r-{unique}", "display_name": "Races" }], ["POST", "/admin/tenants", { "app_id": "r-{unique}", "display_name": "Races", "region": "eu-west-1" }], ["POST", "/admin/byok/bindings", { "tenant_id": "{tenant.tenant_id}", "provider": "aws-kms", "customer_kms_key_arn": "arn:aws:kms:eu-west-1:1:key/race", "tenant_key_id": "tk-{unique}", "operator_id": "ops-race" }]], "body": { "reason": "race", "operator_id": "ops-race" } }))),
    responses((status = 200, description = "the binding, revoked", body = Data<Binding>)))]
async fn revoke(State(state): State<AppState>, Operator(who): Operator, Path(id): Path<String>, body: Body<RevokeBody>) -> ApiResult<Data<Binding>> {
    let id = binding(&state, &id).await?;
    let body = body.checked()?;
    Ok(ok(hub_kernel::security::revoke_byok(&state.db, &who, &id, body.reason.trim(), body.operator_id.trim()).await?))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminByokRotate)]
struct RotateBody {
    /// The binding's current tenant key.
    #[schema(max_length = 256)]
    previous_tenant_key_id: String,
    /// A tenant key never used before, other than the previous one.
    #[schema(max_length = 256)]
    new_tenant_key_id: String,
    #[schema(max_length = 200)]
    operator_id: String,
}

/// Rotates a binding's tenant key: every data key of the tenant is
/// re-wrapped under the new one (200 the rotation). Not idempotent: a
/// repeat (the keys are no longer under `previous_tenant_key_id`) or a
/// revoked binding is 409 `UndecryptableError`; a new key used before 409
/// `Conflict`; 404 'binding not found'.
#[utoipa::path(post, path = "/admin/byok/bindings/{binding_id}/rotate", tag = "admin-byok", request_body = RotateBody,
    params(("binding_id" = String, Path, description = "the binding")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "loser_error": "UndecryptableError", "given": [["POST", "/admin/apps", { "app_id": "r-{unique}", "display_name": "Races" }], ["POST", "/admin/tenants", { "app_id": "r-{unique}", "display_name": "Races", "region": "eu-west-1" }], ["POST", "/admin/byok/bindings", { "tenant_id": "{tenant.tenant_id}", "provider": "aws-kms", "customer_kms_key_arn": "arn:aws:kms:eu-west-1:1:key/race", "tenant_key_id": "tk-{unique}", "operator_id": "ops-race" }]], "body": { "previous_tenant_key_id": "tk-{unique}", "new_tenant_key_id": "tk2-{unique}", "operator_id": "ops-race" } }))),
    responses((status = 200, description = "the rotation", body = Data<Rotation>)))]
async fn rotate(State(state): State<AppState>, Operator(who): Operator, Path(id): Path<String>, body: Body<RotateBody>) -> ApiResult<Data<Rotation>> {
    let id = binding(&state, &id).await?;
    let body = body.checked()?;
    let (previous, new) = (body.previous_tenant_key_id.trim(), body.new_tenant_key_id.trim());
    if new == previous {
        return Err(ApiError::invalid("new_tenant_key_id must differ from previous_tenant_key_id"));
    }
    Ok(ok(hub_kernel::security::rotate_byok(&state.db, &state.master, &who, &id, previous, new, body.operator_id.trim()).await?))
}

/// The id of the binding of a path, found (404 'binding not found'
/// before its body is looked at).
async fn binding(state: &AppState, raw: &str) -> ApiResult<String> {
    let id = path_id(raw).map_err(|_| ApiError::Missing("binding not found"))?.to_string();
    if !crate::fields::exists(state, "SELECT 1 FROM crypto_byok_binding WHERE binding_id = $1", &id).await? {
        return Err(ApiError::Missing("binding not found"));
    }
    Ok(id)
}

/// The tenant's binding (its latest); 404 'no binding for tenant'.
#[utoipa::path(get, path = "/admin/byok/bindings/tenant/{tenant_id}", tag = "admin-byok", params(("tenant_id" = String, Path, description = "the tenant")),
    responses((status = 200, description = "the binding", body = Data<Binding>)))]
async fn of_tenant(State(state): State<AppState>, _: Operator, Path(tenant_id): Path<String>) -> ApiResult<Data<Binding>> {
    let missing = || ApiError::Missing("no binding for tenant");
    let tenant_id = path_id(&tenant_id).map_err(|_| missing())?.to_string();
    Ok(ok(byok::binding_of_tenant(&state.db, &tenant_id).await?.ok_or_else(missing)?))
}
