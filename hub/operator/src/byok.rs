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

/// The propagation SLA when none is given, and its bounds, in seconds.
const DEFAULT_SLA: i64 = 60;
const MAX_SLA: i64 = 86_400;

/// A required text of at most `max` characters.
fn bounded(check: &mut Check, name: &str, value: &Option<String>, max: usize) -> String {
    let v = check.required(name, value);
    if v.chars().count() > max {
        check.fail(format!("{name} must be at most {max} characters"));
    }
    v
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminNewByokBinding)]
struct NewBindingBody {
    #[schema(required = true, format = "uuid")]
    tenant_id: Option<String>,
    /// `aws-kms`, `gcp-kms` or `hsm-pkcs11`.
    #[schema(required = true)]
    provider: Option<String>,
    /// At most 2048 characters.
    #[schema(required = true)]
    customer_kms_key_arn: Option<String>,
    /// The tenant key under the customer's key (at most 256 characters;
    /// never used before).
    #[schema(required = true)]
    tenant_key_id: Option<String>,
    #[schema(required = true)]
    operator_id: Option<String>,
    /// 1 to 86400 (default 60).
    #[schema(value_type = Option<i64>)]
    sla_revoke_propagation_seconds: Option<Value>,
    /// An `https://` URL of at most 2048 characters, without user
    /// information (`user:password@`).
    siem_forwarder_endpoint: Option<String>,
}

/// Binds a tenant to a customer-managed key: the tenant's data keys are
/// wrapped under it from now on (200). Key reachability at the provider is
/// not verified. 409 when the tenant has a binding in force or the tenant
/// key was used before.
#[utoipa::path(post, path = "/admin/byok/bindings", tag = "admin-byok", request_body = NewBindingBody,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/admin/apps", { "app_id": "r-{unique}", "display_name": "Races" }], ["POST", "/admin/tenants", { "app_id": "r-{unique}", "display_name": "Races", "region": "eu-west-1" }]], "body": { "tenant_id": "{tenant.tenant_id}", "provider": "aws-kms", "customer_kms_key_arn": "arn:aws:kms:eu-west-1:1:key/race", "tenant_key_id": "tk-{unique}", "operator_id": "ops-race" } }))),
    responses((status = 200, description = "the binding", body = Data<Binding>)))]
async fn bind(State(state): State<AppState>, Operator(who): Operator, Lenient(body): Lenient<NewBindingBody>) -> ApiResult<Response> {
    let mut check = Check::new();
    let tenant_id = check.required_uuid("tenant_id", &body.tenant_id).map(|u| u.to_string());
    let provider = check.required("provider", &body.provider);
    check.one_of("provider", &provider, &byok::PROVIDERS);
    let arn = bounded(&mut check, "customer_kms_key_arn", &body.customer_kms_key_arn, 2048);
    let tenant_key_id = bounded(&mut check, "tenant_key_id", &body.tenant_key_id, 256);
    let operator_id = bounded(&mut check, "operator_id", &body.operator_id, 200);
    let sla = check.optional_seconds("sla_revoke_propagation_seconds", body.sla_revoke_propagation_seconds.as_ref(), MAX_SLA).unwrap_or(DEFAULT_SLA);
    let siem = check.optional_bounded("siem_forwarder_endpoint", &body.siem_forwarder_endpoint, 2048);
    if siem.as_deref().is_some_and(|u| !u.starts_with("https://") || u.len() <= "https://".len()) {
        check.fail("siem_forwarder_endpoint must be an https:// URL");
    } else if let Some(Err(why)) = siem.as_deref().map(|u| hub_kernel::outbound::no_userinfo("siem_forwarder_endpoint", u)) {
        check.fail(why);
    }
    check.finish()?;
    let tenant_id = tenant_id.unwrap_or_default();
    if hub_identity::tenancy::find(&state.db.read, &tenant_id).await?.is_none() {
        return Err(ApiError::invalid("tenant_id must name an existing tenant"));
    }
    let new = NewBinding {
        tenant_id: &tenant_id,
        provider: &provider,
        customer_kms_key_arn: &arn,
        tenant_key_id: &tenant_key_id,
        operator_id: &operator_id,
        sla_revoke_propagation_seconds: sla,
        siem_forwarder_endpoint: siem.as_deref(),
    };
    Ok(ok(byok::bind(&state.db, &state.master, &who, new).await?))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminByokRevoke)]
struct RevokeBody {
    /// At most 2000 characters.
    #[schema(required = true)]
    reason: Option<String>,
    #[schema(required = true)]
    operator_id: Option<String>,
}

/// Revokes a binding's grant; answers it `revoked` with `revoked_at` once
/// no replica can unwrap the tenant's keys. 404 'binding not found', 409
/// already revoked. Event `security.byok.revoked.v1` in the tenant's chain.
#[utoipa::path(post, path = "/admin/byok/bindings/{binding_id}/revoke", tag = "admin-byok", request_body = RevokeBody,
    params(("binding_id" = String, Path, description = "the binding")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/admin/apps", { "app_id": "r-{unique}", "display_name": "Races" }], ["POST", "/admin/tenants", { "app_id": "r-{unique}", "display_name": "Races", "region": "eu-west-1" }], ["POST", "/admin/byok/bindings", { "tenant_id": "{tenant.tenant_id}", "provider": "aws-kms", "customer_kms_key_arn": "arn:aws:kms:eu-west-1:1:key/race", "tenant_key_id": "tk-{unique}", "operator_id": "ops-race" }]], "body": { "reason": "race", "operator_id": "ops-race" } }))),
    responses((status = 200, description = "the binding, revoked", body = Data<Binding>)))]
async fn revoke(State(state): State<AppState>, Operator(who): Operator, Path(id): Path<String>, Lenient(body): Lenient<RevokeBody>) -> ApiResult<Response> {
    let id = path_id(&id).map_err(|_| ApiError::Missing("binding not found"))?.to_string();
    let mut check = Check::new();
    let reason = bounded(&mut check, "reason", &body.reason, 2000);
    let operator_id = bounded(&mut check, "operator_id", &body.operator_id, 200);
    check.finish()?;
    Ok(ok(byok::revoke(&state.db, &who, &id, &reason, &operator_id).await?))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminByokRotate)]
struct RotateBody {
    /// The binding's current tenant key.
    #[schema(required = true)]
    previous_tenant_key_id: Option<String>,
    /// A tenant key never used before (at most 256 characters).
    #[schema(required = true)]
    new_tenant_key_id: Option<String>,
    #[schema(required = true)]
    operator_id: Option<String>,
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
async fn rotate(State(state): State<AppState>, Operator(who): Operator, Path(id): Path<String>, Lenient(body): Lenient<RotateBody>) -> ApiResult<Response> {
    let id = path_id(&id).map_err(|_| ApiError::Missing("binding not found"))?.to_string();
    let mut check = Check::new();
    let previous = bounded(&mut check, "previous_tenant_key_id", &body.previous_tenant_key_id, 256);
    let new = bounded(&mut check, "new_tenant_key_id", &body.new_tenant_key_id, 256);
    let operator_id = bounded(&mut check, "operator_id", &body.operator_id, 200);
    if !new.is_empty() && new == previous {
        check.fail("new_tenant_key_id must differ from previous_tenant_key_id");
    }
    check.finish()?;
    Ok(ok(byok::rotate(&state.db, &state.master, &who, &id, &previous, &new, &operator_id).await?))
}

/// The tenant's binding (its latest); 404 'no binding for tenant'.
#[utoipa::path(get, path = "/admin/byok/bindings/tenant/{tenant_id}", tag = "admin-byok", params(("tenant_id" = String, Path, description = "the tenant")),
    responses((status = 200, description = "the binding", body = Data<Binding>)))]
async fn of_tenant(State(state): State<AppState>, _: Operator, Path(tenant_id): Path<String>) -> ApiResult<Response> {
    let missing = || ApiError::Missing("no binding for tenant");
    let tenant_id = path_id(&tenant_id).map_err(|_| missing())?.to_string();
    Ok(ok(byok::binding_of_tenant(&state.db, &tenant_id).await?.ok_or_else(missing)?))
}
