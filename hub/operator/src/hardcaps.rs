//! Hard caps, the operator's half: setting, listing and removing a
//! tenant's monthly cap on a sku's usage (sdk-meter refuses usage over it
//! with 429). The caps and their rules are the billing area's
//! (`meter::{set_hardcap_as, remove_hardcap_as, hardcaps_across}`); this
//! module is the operator's door to them. Not in the operator document:
//! see docs/compatibility.md, "Lifecycle routes (issue 37)".

use axum::response::IntoResponse;
use hub_billing::meter::{self, Hardcap};
use hub_kernel::gate::Operator;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_caps)).routes(routes!(set_cap, remove_cap))
}

/// The tenant of a path, found: a non-UUID or a tenant that does not
/// exist is 404 (before the body is looked at).
async fn tenant_of(state: &AppState, raw: &str) -> ApiResult<String> {
    let tenant_id = path_id(raw)?.to_string();
    if hub_identity::tenancy::find(state.db.writer(), &tenant_id).await?.is_none() {
        return Err(ApiError::NotFound);
    }
    Ok(tenant_id)
}

const BAD_SKU: &str = "sku must be 1 to 128 letters, digits or . _ : / -";

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminMeterHardcap)]
struct CapBody {
    /// Units of the sku the tenant may record in each UTC month; 0 refuses
    /// every use.
    #[schema(minimum = 0, maximum = 1_000_000_000_000_i64)]
    monthly_units: i64,
    /// Who sets it (kept as `set_by`).
    #[schema(min_length = 1, max_length = 200)]
    operator_id: String,
}

/// Sets a tenant's monthly hard cap on a sku: 201 when the tenant had no
/// cap on it, 200 when the cap is replaced. Usage already recorded this
/// month counts against it; an operator's override still lifts it until
/// its end. A tenant that does not exist is 404. Event
/// `billing.hardcap.set.v1` in the tenant's chain, the operator credential
/// as actor.
#[utoipa::path(put, path = "/admin/meter/hardcaps/{tenant_id}/{sku}", tag = "admin-meter", request_body = CapBody,
    params(("tenant_id" = String, Path, description = "the tenant"), ("sku" = String, Path, pattern = r"^[A-Za-z0-9._:/-]{1,128}$", description = "the sku: 1 to 128 letters, digits or . _ : / - (a `/` percent-encoded, `%2F`)")),
    extensions(("x-concurrency" = json!({ "outcome": "first-creates", "events": 8, "params": { "tenant_id": "{tenant_id}", "sku": "cap.{unique}" }, "body": { "monthly_units": 10, "operator_id": "ops-race" } }))),
    responses((status = 201, description = "the cap, new", body = Data<Hardcap>), (status = 200, description = "the cap, replaced", body = Data<Hardcap>)))]
async fn set_cap(
    State(state): State<AppState>,
    Operator(who): Operator,
    Path((tenant_id, sku)): Path<(String, String)>,
    body: Body<CapBody>,
) -> ApiResult<Response> {
    let tenant_id = tenant_of(&state, &tenant_id).await?;
    // Every problem in one answer: the path's sku (not a resource to find:
    // a cap is made when missing) with the body's.
    static SKU: Pattern = Pattern::param::<__path_set_cap>("sku");
    let bad_sku = (!SKU.is_match(&sku)).then_some(BAD_SKU);
    let body = match (body.checked(), bad_sku) {
        (Ok(body), None) => body,
        (Ok(_), Some(why)) => return Err(ApiError::invalid(why)),
        (Err(ApiError::Validation(problems)), Some(why)) => return Err(ApiError::Validation(std::iter::once(why.to_string()).chain(problems).collect())),
        (Err(e), _) => return Err(e),
    };
    let (cap, written) = meter::set_hardcap_as(&state.db, &who, &tenant_id, &sku, body.monthly_units, body.operator_id.trim()).await?;
    Ok(if written == Written::Made { created(cap).into_response() } else { ok(cap).into_response() })
}

/// Removes a tenant's hard cap on a sku: the tenant's usage of it is no
/// longer capped (its usage and the overrides stay). 200 the removed cap
/// with `removed: true`; 404 when the tenant has no cap on the sku (of two
/// removals at once, one removes it). Event `billing.hardcap.removed.v1`
/// in the tenant's chain, the operator credential as actor.
#[utoipa::path(delete, path = "/admin/meter/hardcaps/{tenant_id}/{sku}", tag = "admin-meter",
    params(("tenant_id" = String, Path, description = "the tenant"), ("sku" = String, Path, description = "the sku")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404, "given": [["PUT", "/admin/meter/hardcaps/{tenant_id}/del.{unique}", { "monthly_units": 10, "operator_id": "ops-race" }]], "params": { "tenant_id": "{tenant_id}", "sku": "del.{unique}" } }))),
    responses((status = 200, description = "the cap, removed", body = Data<Removed>)))]
async fn remove_cap(State(state): State<AppState>, Operator(who): Operator, Path((tenant_id, sku)): Path<(String, String)>) -> ApiResult<Data<Removed>> {
    let tenant_id = tenant_of(&state, &tenant_id).await?;
    if !meter::valid_sku(&sku) {
        return Err(ApiError::NotFound);
    }
    let cap = meter::remove_hardcap_as(&state.db, &who, &tenant_id, &sku).await?;
    Ok(ok(Removed { tenant_id: cap.tenant_id, sku: cap.sku, monthly_units: cap.monthly_units, removed: true }))
}

/// A removed cap.
#[derive(Serialize, ToSchema)]
#[schema(as = AdminMeterHardcapRemoved)]
struct Removed {
    tenant_id: String,
    sku: String,
    /// The cap it had.
    monthly_units: i64,
    /// Always true: the cap is gone (its history is in the tenant's chain).
    removed: bool,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct CapFilter {
    /// Only this tenant's caps.
    #[param(format = "uuid")]
    tenant_id: Option<String>,
    /// Only caps on this sku.
    #[param(max_length = 128, pattern = r"^[A-Za-z0-9._:/-]{1,128}$")]
    sku: Option<String>,
}

/// Every tenant's hard caps (or one tenant's, or one sku's), by tenant
/// then sku.
#[utoipa::path(get, path = "/admin/meter/hardcaps", tag = "admin-meter", params(CapFilter, Page),
    responses((status = 200, description = "one page of caps", body = ListOf<Hardcap>)))]
async fn list_caps(State(state): State<AppState>, _: Operator, page: Page, Params(q): Params<CapFilter>) -> ApiResult<ListOf<Hardcap>> {
    let tenant_id = canonical_uuid_opt(&q.tenant_id).unwrap_or_default();
    static SKU: Pattern = Pattern::query::<CapFilter>("sku");
    let sku = q.sku.as_deref().unwrap_or("");
    if q.sku.is_some() && !SKU.is_match(sku) {
        return Err(ApiError::invalid(BAD_SKU));
    }
    meter::hardcaps_across(&state.db, page, &tenant_id, sku).await
}
