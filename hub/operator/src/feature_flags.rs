//! Platform feature flags, the operator's half: creating, reading,
//! changing and deleting the platform's layer of a key (`tenant_id` NULL),
//! its rollouts and its kill switch. Every tenant evaluates the platform's
//! flag of a key after its own flag of the key, if any ("tenant-specific
//! first"). The flags and their rules are sdk-feature-flags'
//! (`hub_platform::feature_flags`, one implementation for the tenant's
//! layer and the platform's); this module is the operator's door to them,
//! each write recorded in the platform chain, the operator credential as
//! actor. Not in the operator document: see docs/compatibility.md,
//! "Lifecycle routes (issue 37)".

use axum::response::IntoResponse;
use hub_kernel::gate::Operator;
use hub_kernel::prelude::*;
use hub_platform::feature_flags::{self as flags, Deleted, Detail, FlagRow, FlagUpdate, KillSwitchRequest, NewFlag, RolloutRequest, RolloutRow};
use hub_platform::layer::Writer;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list_flags))
        .routes(routes!(get_flag, update_flag, delete_flag))
        .routes(routes!(set_rollout))
        .routes(routes!(kill_switch))
}

/// Creates a platform flag (its kill switch released, no rollout yet):
/// the tenant route's body and rules; 409 when the platform has a flag of
/// the key (a tenant's flag of the key does not count: it stays that
/// tenant's layer). Every tenant sees it at once. Event
/// `feature-flag.flag.created.v1` in the platform chain.
#[utoipa::path(post, path = "/admin/feature-flags", tag = "admin-feature-flags", request_body = NewFlag,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "body": { "flag_key": "race-{unique}" } }))),
    responses((status = 201, description = "the flag, `layer` `platform`", body = Data<FlagRow>)))]
async fn create(State(state): State<AppState>, Operator(who): Operator, body: Body<NewFlag>) -> ApiResult<Created<FlagRow>> {
    Ok(created(flags::create_as(&state, &Writer::Operator(&who), body).await?))
}

/// The platform's flags, newest first (the rollouts are read on the
/// flag's own route). Tenants' flags are theirs: not listed here.
#[utoipa::path(get, path = "/admin/feature-flags", tag = "admin-feature-flags", params(Page),
    responses((status = 200, description = "a page of the platform's flags", body = ListOf<FlagRow>)))]
async fn list_flags(State(state): State<AppState>, _: Operator, page: Page) -> ApiResult<ListOf<FlagRow>> {
    flags::list_of(&state.db, page, None, None).await
}

/// A platform flag with its rollouts, active or not, lowest priority
/// first; 404 when the platform has no flag of the key.
#[utoipa::path(get, path = "/admin/feature-flags/{flag_key}", tag = "admin-feature-flags", params(("flag_key" = String, Path, description = "the flag's key")),
    responses((status = 200, description = "the flag and its rollouts", body = Data<Detail>)))]
async fn get_flag(State(state): State<AppState>, _: Operator, Path(key): Path<String>) -> ApiResult<Data<Detail>> {
    Ok(ok(flags::detail(&state.db, None, &key).await?))
}

/// Changes the description, default value or off value of a platform
/// flag (at least one; what is absent stays), as the tenant route does
/// its own. Event `feature-flag.flag.updated.v1` in the platform chain.
#[utoipa::path(patch, path = "/admin/feature-flags/{flag_key}", tag = "admin-feature-flags", params(("flag_key" = String, Path, description = "the flag's key")),
    request_body = FlagUpdate,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/admin/feature-flags", { "flag_key": "race-{unique}" }]],
        "body": { "default_value": { "variant": "b" } } }))),
    responses((status = 200, description = "the flag", body = Data<FlagRow>)))]
async fn update_flag(State(state): State<AppState>, Operator(who): Operator, Path(key): Path<String>, body: Body<FlagUpdate>) -> ApiResult<Data<FlagRow>> {
    Ok(ok(flags::update_as(&state, &Writer::Operator(&who), &key, body).await?))
}

/// Deletes a platform flag with its rollouts: tenants then evaluate only
/// their own flag of the key, if any (404 otherwise). Event
/// `feature-flag.flag.deleted.v1` in the platform chain.
#[utoipa::path(delete, path = "/admin/feature-flags/{flag_key}", tag = "admin-feature-flags", params(("flag_key" = String, Path, description = "the flag's key")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404, "given": [["POST", "/admin/feature-flags", { "flag_key": "race-{unique}" }]] }))),
    responses((status = 200, description = "deleted", body = Data<Deleted>)))]
async fn delete_flag(State(state): State<AppState>, Operator(who): Operator, Path(key): Path<String>) -> ApiResult<Data<Deleted>> {
    Ok(ok(flags::delete_as(&state, &Writer::Operator(&who), &key).await?))
}

/// Adds a rollout to a platform flag (201), or changes one of its
/// rollouts named by `rollout_id` (200): the tenant route's body and
/// rules. Event `feature-flag.rollout.changed.v1` in the platform chain.
#[utoipa::path(post, path = "/admin/feature-flags/{flag_key}/rollouts", tag = "admin-feature-flags", params(("flag_key" = String, Path, description = "the flag's key")),
    request_body = RolloutRequest,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/admin/feature-flags", { "flag_key": "race-{unique}" }]],
        "body": { "percentage": 50 } }))),
    responses((status = 201, description = "a new rollout", body = Data<RolloutRow>), (status = 200, description = "the changed rollout", body = Data<RolloutRow>)))]
async fn set_rollout(State(state): State<AppState>, Operator(who): Operator, Path(key): Path<String>, body: Body<RolloutRequest>) -> ApiResult<Response> {
    let (row, written) = flags::set_rollout_as(&state, &Writer::Operator(&who), &key, body).await?;
    Ok(if written == Written::Made { created(row).into_response() } else { ok(row).into_response() })
}

/// Engages or releases the kill switch of a platform flag: engaged, every
/// tenant's evaluation of the key answers an off value (the kill switch
/// of either layer comes first). Setting the state it already has changes
/// nothing and records no event. Events
/// `feature-flag.kill_switch.engaged.v1` / `.released.v1` in the platform
/// chain.
#[utoipa::path(post, path = "/admin/feature-flags/{flag_key}/kill-switch", tag = "admin-feature-flags", params(("flag_key" = String, Path, description = "the flag's key")),
    request_body = KillSwitchRequest,
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/admin/feature-flags", { "flag_key": "race-{unique}" }]],
        "body": { "engaged": true, "reason": "race" } }))),
    responses((status = 200, description = "the flag", body = Data<FlagRow>)))]
async fn kill_switch(
    State(state): State<AppState>,
    Operator(who): Operator,
    Path(key): Path<String>,
    body: Body<KillSwitchRequest>,
) -> ApiResult<Data<FlagRow>> {
    Ok(ok(flags::kill_switch_as(&state, &Writer::Operator(&who), &key, body).await?))
}
