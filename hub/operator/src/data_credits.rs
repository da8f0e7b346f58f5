//! Data credits, the operator's half: granting a tenant credits and pricing
//! the capabilities tenants quote and hold (sdk-data-credits). The ledger,
//! the balances, the prices and their rules are the billing area's
//! (`data_credits::{grant_credits_as, set_price_as}`); this module is the
//! operator's door to them. Not in the operator document: see
//! docs/compatibility.md, "Routes added beyond the document".

use hub_billing::data_credits::{self, Grant, NewGrant, PriceRecord};
use hub_kernel::gate::Operator;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(grant)).routes(routes!(set_price))
}

/// The most credits one grant or one price may name.
const MAX_CREDITS: i64 = 1_000_000_000_000;

/// A required text of at most `max` characters.
fn bounded(check: &mut Check, name: &str, value: &Option<String>, max: usize) -> String {
    let v = check.required(name, value);
    if v.chars().count() > max {
        check.fail(format!("{name} must be at most {max} characters"));
    }
    v
}

/// A required JSON integer from `min` to `max`.
fn required_int(check: &mut Check, name: &str, value: Option<&Value>, min: i64, max: i64) -> i64 {
    match value {
        None | Some(Value::Null) => {
            check.fail(format!("{name} is required"));
            0
        }
        v => check.optional_int(name, v, min, max).unwrap_or_default(),
    }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminNewDataCreditsGrant)]
struct NewGrantBody {
    /// The tenant credited; an unknown one is 400.
    #[schema(required = true, format = "uuid")]
    tenant_id: Option<String>,
    /// Whole credits, 1 to 1,000,000,000,000.
    #[schema(required = true, value_type = i64, minimum = 1, maximum = 1_000_000_000_000_i64)]
    credits: Option<Value>,
    /// Why (kept in the ledger), 1 to 2000 characters.
    #[schema(required = true, min_length = 1, max_length = 2000)]
    reason: Option<String>,
    /// Who grants them (kept in the ledger), 1 to 200 characters.
    #[schema(required = true, min_length = 1, max_length = 200)]
    operator_id: Option<String>,
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
async fn grant(State(state): State<AppState>, Operator(who): Operator, Lenient(body): Lenient<NewGrantBody>) -> ApiResult<Response> {
    let mut check = Check::new();
    let tenant_id = check.required_uuid("tenant_id", &body.tenant_id).map(|u| u.to_string());
    let credits = required_int(&mut check, "credits", body.credits.as_ref(), 1, MAX_CREDITS);
    let reason = bounded(&mut check, "reason", &body.reason, 2000);
    let operator_id = bounded(&mut check, "operator_id", &body.operator_id, 200);
    check.finish()?;
    let tenant_id = tenant_id.unwrap_or_default();
    // Tenants are never deleted, so the answer cannot change before the
    // grant is written; the grant's foreign key would refuse one anyway.
    if hub_identity::tenancy::find(&state.db.read, &tenant_id).await?.is_none() {
        return Err(ApiError::invalid("tenant_id must name an existing tenant"));
    }
    let g = NewGrant { tenant_id: &tenant_id, credits, reason: &reason, operator_id: &operator_id };
    Ok(created(data_credits::grant_credits_as(&state.db, &who, g).await?))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminDataCreditsPrice)]
struct PriceBody {
    /// Credits for one use of the capability, 0 to 1,000,000,000,000.
    #[schema(required = true, value_type = i64, minimum = 0, maximum = 1_000_000_000_000_i64)]
    credits: Option<Value>,
    /// Who sets it (kept as `updated_by`), 1 to 200 characters.
    #[schema(required = true, min_length = 1, max_length = 200)]
    operator_id: Option<String>,
}

/// Sets a capability's price in credits: 201 when the capability had no
/// price, 200 when its price is replaced (holds already made keep theirs).
/// Event `data-credits.price.set.v1` in the platform chain, the operator
/// credential as actor.
#[utoipa::path(put, path = "/admin/data-credits/prices/{capability}", tag = "admin-data-credits", request_body = PriceBody,
    params(("capability" = String, Path, description = "the capability: 1 to 128 letters, digits or . _ : / - (a `/` percent-encoded, `%2F`)")),
    extensions(("x-concurrency" = json!({ "outcome": "first-creates", "events": 8, "params": { "capability": "p.{unique}" }, "body": { "credits": 2, "operator_id": "ops-race" } }))),
    responses((status = 201, description = "the price, new", body = Data<PriceRecord>), (status = 200, description = "the price, replaced", body = Data<PriceRecord>)))]
async fn set_price(
    State(state): State<AppState>,
    Operator(who): Operator,
    Path(capability): Path<String>,
    Lenient(body): Lenient<PriceBody>,
) -> ApiResult<Response> {
    let mut check = Check::new();
    if !data_credits::valid_capability(&capability) {
        check.fail("capability must be 1 to 128 letters, digits or . _ : / -");
    }
    let credits = required_int(&mut check, "credits", body.credits.as_ref(), 0, MAX_CREDITS);
    let operator_id = bounded(&mut check, "operator_id", &body.operator_id, 200);
    check.finish()?;
    let (price, written) = data_credits::set_price_as(&state.db, &who, &capability, credits, &operator_id).await?;
    Ok(if written == Written::Made { created(price) } else { ok(price) })
}
