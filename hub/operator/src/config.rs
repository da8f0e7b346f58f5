//! Platform config values, the operator's half: setting, listing,
//! reading the history of and revoking the values of scope `platform`,
//! which every tenant's `resolve` answers when none of its own scopes
//! (app_user, app, tenant) has the key. A tenant reads them and never
//! writes them (403). The values and their rules are sdk-config's
//! (`hub_platform::config`, one implementation for the tenant's rows and
//! the platform's); this module is the operator's door to them, each
//! write recorded in the platform chain, the operator credential as
//! actor. Not in the operator document: see docs/compatibility.md,
//! "Lifecycle routes (issue 37)".

use axum::response::IntoResponse;
use hub_kernel::gate::Operator;
use hub_kernel::prelude::*;
use hub_platform::config::{self, Row};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_values, set_value)).routes(routes!(history)).routes(routes!(revoke))
}

/// A platform value to set: the tenant's body without `scope` and
/// `scope_id` (always `platform`).
#[derive(Deserialize, ToSchema)]
#[schema(as = AdminConfigSet)]
struct SetBody {
    /// 1 to 200 letters, digits, `.`, `_`, `-`, `/` or `:`.
    #[schema(max_length = 200)]
    key: String,
    /// Any JSON but null, at most 64 KiB of it.
    #[schema(value_type = Value)]
    value: Value,
}

/// Sets the platform's value of a key: a new active row (201), or the
/// next version of the active one (200), as the tenant's write at its own
/// scopes. Every tenant's `resolve` of the key answers it unless one of
/// the tenant's own scopes has the key. Event `config.value.set.v1` in the
/// platform chain (the row, never the value).
#[utoipa::path(post, path = "/admin/config", tag = "admin-config", request_body = SetBody,
    extensions(("x-concurrency" = json!({ "outcome": "first-creates", "body": { "key": "race.{unique}", "value": { "on": true } } }))),
    responses((status = 201, description = "a new platform key", body = Data<Row>), (status = 200, description = "a new version of the value", body = Data<Row>)))]
async fn set_value(State(state): State<AppState>, Operator(who): Operator, body: Body<SetBody>) -> ApiResult<Response> {
    let body = body.checked()?;
    let (row, written) = config::set_platform(&state.db, &who, &body.key, &body.value).await?;
    Ok(if written == Written::Made { created(row).into_response() } else { ok(row).into_response() })
}

/// The platform's active values, by key.
#[utoipa::path(get, path = "/admin/config", tag = "admin-config", params(Page),
    responses((status = 200, description = "a page of the platform's active rows", body = ListOf<Row>)))]
async fn list_values(State(state): State<AppState>, _: Operator, page: Page) -> ApiResult<ListOf<Row>> {
    config::active_rows(&state.db, page, None, config::Scope::Platform, config::PLATFORM).await
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct KeyQuery {
    /// 1 to 200 letters, digits, `.`, `_`, `-`, `/` or `:`.
    key: String,
}

/// Every row the platform's value of a key has had, active and revoked,
/// newest first (empty when it never had one).
#[utoipa::path(get, path = "/admin/config/history", tag = "admin-config", params(KeyQuery, Page),
    responses((status = 200, description = "the key's platform rows, newest first", body = ListOf<Row>)))]
async fn history(State(state): State<AppState>, _: Operator, Params(q): Params<KeyQuery>, page: Page) -> ApiResult<ListOf<Row>> {
    config::platform_history(&state.db, page, &q.key).await
}

/// A platform key to revoke.
#[derive(Deserialize, ToSchema)]
#[schema(as = AdminConfigKey)]
struct KeyBody {
    /// 1 to 200 letters, digits, `.`, `_`, `-`, `/` or `:`.
    #[schema(max_length = 200)]
    key: String,
}

/// Ends the platform's active value of a key (its history stays): tenants
/// then resolve the key from their own scopes only. 404 when the platform
/// has no active value of the key. Event `config.value.revoked.v1` in the
/// platform chain.
#[utoipa::path(post, path = "/admin/config/revoke", tag = "admin-config", request_body = KeyBody,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404,
        "given": [["POST", "/admin/config", { "key": "race.{unique}", "value": { "on": true } }]],
        "body": { "key": "race.{unique}" } }))),
    responses((status = 200, description = "the revoked row", body = Data<Row>),
        (status = 404, description = "NotFound: no active platform value of the key", body = ErrorBody)))]
async fn revoke(State(state): State<AppState>, Operator(who): Operator, body: Body<KeyBody>) -> ApiResult<Data<Row>> {
    let body = body.checked()?;
    Ok(ok(config::revoke_platform(&state.db, &who, &body.key).await?))
}
