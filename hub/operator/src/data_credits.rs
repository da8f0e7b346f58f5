//! Data credits, the operator's half: granting a tenant credits and pricing
//! the capabilities tenants quote and hold (sdk-data-credits). The ledger,
//! the balances, the prices and their rules are the billing area's
//! (`data_credits::{grant_credits_as, set_price_as}`); this module is the
//! operator's door to them. Not in the operator document: see
//! docs/compatibility.md, "Routes added beyond the document".

use axum::response::IntoResponse;
use hub_billing::data_credits::{self, Grant, NewGrant, PriceRecord};
use hub_kernel::gate::Operator;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(grant)).routes(routes!(set_price))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminNewDataCreditsGrant)]
struct NewGrantBody {
    /// The tenant credited; an unknown one is 400.
    #[schema(format = "uuid")]
    tenant_id: String,
    /// Whole credits.
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    credits: i64,
    /// Why (kept in the ledger).
    #[schema(min_length = 1, max_length = 2000)]
    reason: String,
    /// Who grants them (kept in the ledger).
    #[schema(min_length = 1, max_length = 200)]
    operator_id: String,
}

/// Grants a tenant credits: 201 the grant with the tenant's balance after
/// it. Every problem of the body in one 400; a tenant_id that names no
/// tenant is 400 `tenant_id must name an existing tenant`, as the other
/// operator routes that take a tenant in their body. Event
/// `data-credits.credit.granted.v1` in the tenant's chain, the operator
/// credential as actor.
#[utoipa::path(post, path = "/admin/data-credits/grants", tag = "admin-data-credits", request_body = NewGrantBody,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/admin/apps", { "app_id": "r-{unique}", "display_name": "Races" }], ["POST", "/admin/tenants", { "app_id": "r-{unique}", "display_name": "Races", "region": "eu-west-1" }]], "body": { "tenant_id": "{tenant.tenant_id}", "credits": 5, "reason": "race", "operator_id": "ops-race" } }))),
    responses((status = 201, description = "the grant and the new balance", body = Data<Grant>)))]
async fn grant(State(state): State<AppState>, Operator(who): Operator, body: Body<NewGrantBody>) -> ApiResult<Created<Grant>> {
    let body = body.checked()?;
    let tenant_id = canonical_uuid(&body.tenant_id);
    // Tenants are never deleted, so the answer cannot change before the
    // grant is written; the grant's foreign key would refuse one anyway.
    if hub_identity::tenancy::find(&state.db.read, &tenant_id).await?.is_none() {
        return Err(ApiError::invalid("tenant_id must name an existing tenant"));
    }
    let g = NewGrant { tenant_id: &tenant_id, credits: body.credits, reason: body.reason.trim(), operator_id: body.operator_id.trim() };
    Ok(created(data_credits::grant_credits_as(&state.db, &who, g).await?))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminDataCreditsPrice)]
struct PriceBody {
    /// Credits for one use of the capability.
    #[schema(minimum = 0, maximum = 1_000_000_000_000_i64)]
    credits: i64,
    /// Who sets it (kept as `updated_by`).
    #[schema(min_length = 1, max_length = 200)]
    operator_id: String,
}

/// Sets a capability's price in credits: 201 when the capability had no
/// price, 200 when its price is replaced (holds already made keep theirs).
/// Event `data-credits.price.set.v1` in the platform chain, the operator
/// credential as actor.
#[utoipa::path(put, path = "/admin/data-credits/prices/{capability}", tag = "admin-data-credits", request_body = PriceBody,
    params(("capability" = String, Path, pattern = r"^[A-Za-z0-9._:/-]{1,128}$", description = "the capability: 1 to 128 letters, digits or . _ : / - (a `/` percent-encoded, `%2F`)")),
    extensions(("x-concurrency" = json!({ "outcome": "first-creates", "events": 8, "params": { "capability": "p.{unique}" }, "body": { "credits": 2, "operator_id": "ops-race" } }))),
    responses((status = 201, description = "the price, new", body = Data<PriceRecord>), (status = 200, description = "the price, replaced", body = Data<PriceRecord>)))]
async fn set_price(State(state): State<AppState>, Operator(who): Operator, Path(capability): Path<String>, body: Body<PriceBody>) -> ApiResult<Response> {
    // Every problem in one answer: the path's capability (not a resource
    // to find: a price is made when missing) with the body's.
    static CAPABILITY: Pattern = Pattern::param::<__path_set_price>("capability");
    let bad_capability = (!CAPABILITY.is_match(&capability)).then_some("capability must be 1 to 128 letters, digits or . _ : / -");
    let body = match (body.checked(), bad_capability) {
        (Ok(body), None) => body,
        (Ok(_), Some(why)) => return Err(ApiError::invalid(why)),
        (Err(ApiError::Validation(problems)), Some(why)) => return Err(ApiError::Validation(std::iter::once(why.to_string()).chain(problems).collect())),
        (Err(e), _) => return Err(e),
    };
    let (price, written) = data_credits::set_price_as(&state.db, &who, &capability, body.credits, body.operator_id.trim()).await?;
    Ok(if written == Written::Made { created(price).into_response() } else { ok(price).into_response() })
}
