//! sdk-feature-flags: flags, their rollouts and kill switch, and the
//! evaluation of a flag for a context (`tenant_id`, `persona_id`, `bu_id`,
//! `attributes`). A key has up to two layers: the tenant's own flag and the
//! platform's (`tenant_id` NULL, the operator's, seen by every tenant).
//! The tenant routes here and the operator's `/admin/feature-flags` share
//! one implementation (`create_as`, `update_as`, ...), given the writer
//! (`crate::layer::Writer`), which reaches only its own layer's rows.
//! Evaluation: a kill switch engaged in either layer answers the flag's
//! `off_value`; otherwise the first active rollout that matches, the
//! tenant's before the platform's, each layer by ascending priority;
//! otherwise the `default_value`. A percentage rollout buckets the context
//! as Unleash's SDKs do (`murmur3_32("{group_id}:{stickiness}", 0) % 100 +
//! 1`), so a user lands in the same bucket here as with a stock SDK.
//!
//! Evaluation reads no table: a tenant's flags are compiled once into the
//! state's `feature_flags` cache, which every write drops on every replica
//! (`Invalidation::FeatureFlags`) after it commits.

use std::{borrow::Cow, collections::HashMap, sync::Arc};

use axum::response::IntoResponse;

use hub_kernel::{prelude::*, state::Invalidation};

use crate::layer::Writer;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list_flags))
        .routes(routes!(get_flag, update_flag, delete_flag))
        .routes(routes!(set_rollout))
        .routes(routes!(kill_switch))
        .routes(routes!(evaluate))
}

/// Values a constraint lists at most.
const MAX_VALUES: usize = 1000;
/// Attributes an evaluation context carries at most.
const MAX_ATTRIBUTES: usize = 100;
/// The largest JSON value a flag or rollout answers.
const MAX_VALUE_BYTES: usize = 64 * 1024;

stored_enum! {
    /// How a constraint compares the context's value with its operands.
    #[schema(as = FeatureFlagOperator)]
    enum Operator {
        In = "in",
        NotIn = "not_in",
        StrContains = "str_contains",
        StrStartsWith = "str_starts_with",
        StrEndsWith = "str_ends_with",
        NumEq = "num_eq",
        NumGt = "num_gt",
        NumGte = "num_gte",
        NumLt = "num_lt",
        NumLte = "num_lte",
    }
}

impl Operator {
    /// Whether the operator compares numbers (its operand is `value`).
    fn numeric(self) -> bool {
        matches!(self, Operator::NumEq | Operator::NumGt | Operator::NumGte | Operator::NumLt | Operator::NumLte)
    }
}

stored_enum! {
    /// Whose flag a layer is: the caller's tenant's own, or the platform's
    /// (the operator's, seen by every tenant).
    #[schema(as = FeatureFlagLayer)]
    pub enum FlagLayer { Tenant = "tenant", Platform = "platform" }
}

stored_enum! {
    /// What decided an evaluation.
    #[schema(as = FeatureFlagEvaluationReason)]
    enum Reason { KillSwitch = "kill_switch", Rollout = "rollout", Default = "default" }
}

/// A flag (one layer of its key).
#[derive(Clone, Debug, FromRow, Serialize, ToSchema)]
#[schema(as = FeatureFlag)]
pub struct FlagRow {
    flag_id: String,
    flag_key: String,
    layer: FlagLayer,
    description: Option<String>,
    /// Answered when no rollout matches.
    #[sqlx(try_from = "String")]
    default_value: JsonText,
    /// Answered while the kill switch is engaged.
    #[sqlx(try_from = "String")]
    off_value: JsonText,
    #[sqlx(try_from = "i64")]
    kill_switch_engaged: Flag,
    /// The operator's reason; null on a platform flag read by a tenant.
    kill_switch_reason: Option<String>,
    kill_switch_changed_at: Option<Timestamp>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const FLAG_COLUMNS: &str = "flag_id, flag_key, CASE WHEN tenant_id IS NULL THEN 'platform' ELSE 'tenant' END AS layer, description, default_value, off_value, \
     kill_switch_engaged, kill_switch_reason, kill_switch_changed_at, created_at, updated_at";

/// `FLAG_COLUMNS` as a tenant reads them: a platform flag without the
/// operator's kill-switch reason.
const TENANT_FLAG_COLUMNS: &str = "flag_id, flag_key, CASE WHEN tenant_id IS NULL THEN 'platform' ELSE 'tenant' END AS layer, description, default_value, off_value, \
     kill_switch_engaged, CASE WHEN tenant_id IS NULL THEN NULL ELSE kill_switch_reason END AS kill_switch_reason, kill_switch_changed_at, created_at, updated_at";

/// A rollout of a flag.
#[derive(Clone, Debug, FromRow, Serialize, ToSchema)]
#[schema(as = FeatureFlagRollout)]
pub struct RolloutRow {
    rollout_id: String,
    flag_id: String,
    /// Lower first.
    priority: i64,
    /// Constraints that must all hold; empty: every context.
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<Constraint>)]
    predicate: JsonText,
    /// 0 to 100: the share of stickiness values admitted.
    percentage: i64,
    /// `persona_id`, `tenant_id`, `bu_id` or `attributes.<name>`.
    stickiness: String,
    /// Hashed with the stickiness value; the flag key by default.
    group_id: String,
    #[sqlx(try_from = "String")]
    value: JsonText,
    #[sqlx(try_from = "i64")]
    active: Flag,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const ROLLOUT_COLUMNS: &str = "rollout_id, flag_id, priority, predicate, percentage, stickiness, group_id, value, active, created_at, updated_at";

/// One condition over the context, as Unleash's constraints (snake case).
#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
#[schema(as = FeatureFlagConstraint)]
struct Constraint {
    /// `tenant_id`, `persona_id`, `bu_id` or `attributes.<name>`.
    #[schema(pattern = r"^(?:tenant_id|persona_id|bu_id|attributes\.[A-Za-z0-9._-]{1,128})$")]
    context_name: String,
    operator: Operator,
    /// The operand strings of `in`, `not_in` and the `str_` operators (1
    /// to 1,000 of them, required for those operators).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(max_items = 1000)]
    values: Vec<String>,
    /// The operand of the `num_` operators (required for them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value: Option<f64>,
    /// Negates the outcome.
    #[serde(default)]
    inverted: bool,
    /// String comparisons ignore case.
    #[serde(default)]
    case_insensitive: bool,
}

/// A flag with its rollouts, lowest priority first.
#[derive(Serialize, ToSchema)]
#[schema(as = FeatureFlagDetail)]
pub struct Detail {
    #[serde(flatten)]
    flag: FlagRow,
    /// Empty on a platform flag read by a tenant: the operator's targeting
    /// (predicates naming tenants, values, groups) is not shown to tenants.
    rollouts: Vec<RolloutRow>,
}

fn valid_key(key: &str) -> bool {
    (1..=128).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// `tenant_id`, `persona_id`, `bu_id`, or `attributes.` and a name.
fn valid_context_name(name: &str) -> bool {
    matches!(name, "tenant_id" | "persona_id" | "bu_id") || name.strip_prefix("attributes.").is_some_and(valid_key)
}

const CONTEXT_NAME_RULE: &str = "must be tenant_id, persona_id, bu_id or attributes.<name> (a name of 1 to 128 letters, digits, '.', '_' or '-')";

/// A JSON value a flag or rollout answers: `default` when absent or null.
fn json_value(check: &mut Check, name: &str, value: Option<&Value>, default: Value) -> String {
    let v = value.cloned().unwrap_or(default).to_string();
    if v.len() > MAX_VALUE_BYTES {
        check.fail(format!("{name} must be at most 64 KiB of JSON"));
    }
    v
}

/// A writer's own flag of a key (the tenant's, or the platform's for the
/// operator), inside a write's transaction: another layer's is 404.
async fn own_flag(tx: &mut Tx, w: &Writer<'_>, key: &str) -> ApiResult<FlagRow> {
    let sql = format!("SELECT {FLAG_COLUMNS} FROM feature_flag WHERE COALESCE(tenant_id, '') = $1 AND flag_key = $2");
    let row = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(w.owner()).bind(key).fetch_optional(&mut **tx).await?;
    row.ok_or(ApiError::NotFound)
}

/// After a write has committed: every replica drops the compiled flags
/// the write changes (the tenant's; every tenant's for a platform flag),
/// so the next evaluation anywhere sees the write.
async fn changed(state: &AppState, w: &Writer<'_>) {
    state.invalidate(Invalidation::FeatureFlags(w.tenant_id().map(str::to_string))).await;
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewFeatureFlag)]
pub struct NewFlag {
    /// 1 to 128 letters, digits, `.`, `_` or `-`; unique in the tenant
    /// (in the platform's layer for the operator's flags).
    #[schema(max_length = 128, pattern = r"^[A-Za-z0-9._-]{1,128}$")]
    flag_key: String,
    #[schema(max_length = 1000)]
    description: Option<String>,
    /// Any JSON (at most 64 KiB), answered when no rollout matches;
    /// `false` when absent.
    #[schema(value_type = Option<Value>)]
    default_value: Option<Value>,
    /// Any JSON, answered while the kill switch is engaged; `false` when
    /// absent.
    #[schema(value_type = Option<Value>)]
    off_value: Option<Value>,
}

/// Creates a flag of the caller's tenant (its kill switch released, no
/// rollout yet).
#[utoipa::path(post, path = "/api/feature-flags", tag = "sdk-feature-flags", request_body = NewFlag,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "body": { "flag_key": "race-{unique}" } }))),
    responses((status = 201, description = "the flag", body = Data<FlagRow>)))]
async fn create(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewFlag>) -> ApiResult<Created<FlagRow>> {
    Ok(created(create_as(&state, &Writer::Tenant(&ctx), body).await?))
}

/// Creates a flag in the writer's layer: the tenant route's and the
/// operator's (a platform flag) one implementation. 409 when the layer has
/// the key.
pub async fn create_as(state: &AppState, w: &Writer<'_>, body: Body<NewFlag>) -> ApiResult<FlagRow> {
    let req = body.checked()?;
    let mut check = Check::new();
    static FLAG_KEY: Pattern = Pattern::of::<NewFlag>("flag_key");
    let key = req.flag_key.clone();
    if !FLAG_KEY.is_match(&key) {
        check.fail("flag_key must be 1 to 128 letters, digits, '.', '_' or '-'");
    }
    let description = Check::optional(&req.description);
    let default_value = json_value(&mut check, "default_value", req.default_value.as_ref(), json!(false));
    let off_value = json_value(&mut check, "off_value", req.off_value.as_ref(), json!(false));
    check.finish()?;
    let now = db::now();
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO feature_flag (flag_id, tenant_id, flag_key, description, default_value, off_value, kill_switch_engaged, created_by, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, 0, $7, $8, $8) ON CONFLICT DO NOTHING RETURNING {FLAG_COLUMNS}"
    );
    let flag: Option<FlagRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(w.tenant_id())
        .bind(&key)
        .bind(&description)
        .bind(&default_value)
        .bind(&off_value)
        .bind(w.actor_id())
        .bind(&now)
        .fetch_optional(&mut *tx)
        .await?;
    let flag = flag.ok_or_else(|| ApiError::Conflict(format!("the flag {key} exists")))?;
    w.record(&mut tx, events::FEATURE_FLAG_CREATED, json!({ "flag_id": flag.flag_id, "flag_key": key })).await?;
    tx.commit().await?;
    changed(state, w).await;
    Ok(flag)
}

/// A flag with its rollouts: the tenant's own, or else the platform's.
#[utoipa::path(get, path = "/api/feature-flags/{flag_key}", tag = "sdk-feature-flags", params(("flag_key" = String, Path, description = "the flag's key")),
    responses((status = 200, description = "the flag and its rollouts, active or not, lowest priority first", body = Data<Detail>)))]
async fn get_flag(State(state): State<AppState>, Tenant(ctx): Tenant, Path(key): Path<String>) -> ApiResult<Data<Detail>> {
    Ok(ok(detail(&state.db, Some(&ctx.tenant_id), &key).await?))
}

/// A flag of a key with its rollouts, as a tenant reads it (its own layer,
/// or else the platform's) or, `tenant_id` None, the platform's layer
/// only (the operator's read).
pub async fn detail(db: &Db, tenant_id: Option<&str>, key: &str) -> ApiResult<Detail> {
    if !valid_key(key) {
        return Err(ApiError::NotFound);
    }
    // The tenant's layer sorts before the platform's; `''` is no tenant's.
    // A tenant reads a platform flag without the operator's targeting: no
    // rollouts, no kill-switch reason.
    let columns = if tenant_id.is_some() { TENANT_FLAG_COLUMNS } else { FLAG_COLUMNS };
    let sql = format!(
        "SELECT {columns} FROM feature_flag WHERE (tenant_id = $1 OR tenant_id IS NULL) AND flag_key = $2 \
         ORDER BY tenant_id IS NULL, flag_id LIMIT 1"
    );
    let flag: FlagRow =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id.unwrap_or("")).bind(key).fetch_optional(&db.read).await?.ok_or(ApiError::NotFound)?;
    if tenant_id.is_some() && matches!(flag.layer, FlagLayer::Platform) {
        return Ok(Detail { flag, rollouts: Vec::new() });
    }
    let sql = format!("SELECT {ROLLOUT_COLUMNS} FROM feature_flag_rollout WHERE flag_id = $1 ORDER BY priority, rollout_id");
    let rollouts = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&flag.flag_id).fetch_all(&db.read).await?;
    Ok(Detail { flag, rollouts })
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct FlagFilter {
    /// Only the tenant's own flags, or only the platform's.
    #[param(inline)]
    layer: Option<FlagLayer>,
}

/// The flags a tenant reads (a platform flag without the operator's
/// kill-switch reason).
const FLAGS: Listing = Listing {
    table: "feature_flag",
    columns: TENANT_FLAG_COLUMNS,
    filter: "(tenant_id = $1 OR tenant_id IS NULL) AND ($2 = '' OR ($2 = 'tenant' AND tenant_id IS NOT NULL) OR ($2 = 'platform' AND tenant_id IS NULL))",
    order: "created_at DESC, flag_id DESC",
};

/// The platform's flags, as the operator reads them.
const PLATFORM_FLAGS: Listing = Listing { table: "feature_flag", columns: FLAG_COLUMNS, filter: "tenant_id IS NULL", order: "created_at DESC, flag_id DESC" };

/// The flags the caller's tenant sees, newest first: its own and the
/// platform's (a key may have both layers, one row each; `layer` says
/// whose). The rollouts are read on the flag's own route.
#[utoipa::path(get, path = "/api/feature-flags", tag = "sdk-feature-flags", params(FlagFilter, Page),
    responses((status = 200, description = "a page of flags", body = ListOf<FlagRow>)))]
async fn list_flags(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<FlagFilter>, page: Page) -> ApiResult<ListOf<FlagRow>> {
    list_of(&state.db, page, Some(&ctx.tenant_id), q.layer).await
}

/// A page of the flags a tenant sees (its own and the platform's, or one
/// `layer` of them), newest first; `tenant_id` None: the platform's only.
pub async fn list_of(db: &Db, page: Page, tenant_id: Option<&str>, layer: Option<FlagLayer>) -> ApiResult<ListOf<FlagRow>> {
    match tenant_id {
        Some(tenant_id) => page.list::<FlagRow>(&db.read, &FLAGS, &[tenant_id, layer.map_or("", FlagLayer::as_str)]).await,
        // The operator's layer is the platform's: a `tenant` layer is empty.
        None if matches!(layer, Some(FlagLayer::Tenant)) => Ok(hub_kernel::extract::list(Vec::new(), 0)),
        None => page.list::<FlagRow>(&db.read, &PLATFORM_FLAGS, &[]).await,
    }
}

/// A change of a flag: what is absent stays as it is.
#[derive(Deserialize, ToSchema)]
#[schema(as = FeatureFlagUpdate)]
pub struct FlagUpdate {
    #[schema(max_length = 1000)]
    description: Option<String>,
    /// Any JSON (at most 64 KiB), answered when no rollout matches.
    #[schema(value_type = Option<Value>)]
    default_value: Option<Value>,
    /// Any JSON (at most 64 KiB), answered while the kill switch is
    /// engaged.
    #[schema(value_type = Option<Value>)]
    off_value: Option<Value>,
}

/// Changes the description, default value or off value of the tenant's
/// own flag (at least one; what is absent stays). The platform's flags
/// are the operator's: 404 here.
#[utoipa::path(patch, path = "/api/feature-flags/{flag_key}", tag = "sdk-feature-flags", params(("flag_key" = String, Path, description = "the flag's key")),
    request_body = FlagUpdate,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/feature-flags", { "flag_key": "race-{unique}" }]],
        "body": { "default_value": { "variant": "b" } } }))),
    responses((status = 200, description = "the flag", body = Data<FlagRow>)))]
async fn update_flag(State(state): State<AppState>, Tenant(ctx): Tenant, Path(key): Path<String>, body: Body<FlagUpdate>) -> ApiResult<Data<FlagRow>> {
    Ok(ok(update_as(&state, &Writer::Tenant(&ctx), &key, body).await?))
}

/// Changes the writer's own flag of a key (another layer's is 404, before
/// the body is looked at).
pub async fn update_as(state: &AppState, w: &Writer<'_>, key: &str, body: Body<FlagUpdate>) -> ApiResult<FlagRow> {
    if !valid_key(key) {
        return Err(ApiError::NotFound);
    }
    let mut tx = state.db.begin().await?;
    // Not found comes first, so another tenant's key is never confirmed.
    own_flag(&mut tx, w, key).await?;
    let req = body.checked()?;
    let mut check = Check::new();
    let description = Check::optional(&req.description);
    let default_value = req.default_value.as_ref().map(|v| json_value(&mut check, "default_value", Some(v), Value::Null));
    let off_value = req.off_value.as_ref().map(|v| json_value(&mut check, "off_value", Some(v), Value::Null));
    if req.description.is_none() && default_value.is_none() && off_value.is_none() {
        check.fail("give at least one of description, default_value, off_value");
    }
    check.finish()?;
    let sql = format!(
        "UPDATE feature_flag SET description = COALESCE($1, description), default_value = COALESCE($2, default_value), off_value = COALESCE($3, off_value), \
         updated_at = $4 WHERE COALESCE(tenant_id, '') = $5 AND flag_key = $6 RETURNING {FLAG_COLUMNS}"
    );
    let flag: FlagRow = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&description)
        .bind(&default_value)
        .bind(&off_value)
        .bind(db::now())
        .bind(w.owner())
        .bind(key)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(ApiError::NotFound)?;
    let payload = json!({
        "flag_id": flag.flag_id, "flag_key": key, "description_changed": description.is_some(),
        "default_value_changed": default_value.is_some(), "off_value_changed": off_value.is_some(),
    });
    w.record(&mut tx, events::FEATURE_FLAG_UPDATED, payload).await?;
    tx.commit().await?;
    changed(state, w).await;
    Ok(flag)
}

/// The answer of a flag's delete.
#[derive(Serialize, ToSchema)]
#[schema(as = FeatureFlagDeleted)]
pub struct Deleted {
    flag_id: String,
    flag_key: String,
    deleted: bool,
}

/// Deletes the tenant's own flag with its rollouts: evaluations then find
/// the platform's flag of the key, if any, or none (404). Its history
/// stays in the audit chain. The platform's flags are the operator's: 404
/// here.
#[utoipa::path(delete, path = "/api/feature-flags/{flag_key}", tag = "sdk-feature-flags", params(("flag_key" = String, Path, description = "the flag's key")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404, "given": [["POST", "/api/feature-flags", { "flag_key": "race-{unique}" }]] }))),
    responses((status = 200, description = "deleted", body = Data<Deleted>)))]
async fn delete_flag(State(state): State<AppState>, Tenant(ctx): Tenant, Path(key): Path<String>) -> ApiResult<Data<Deleted>> {
    Ok(ok(delete_as(&state, &Writer::Tenant(&ctx), &key).await?))
}

/// Deletes the writer's own flag of a key with its rollouts (another
/// layer's is 404; of two deletes at once, one deletes).
pub async fn delete_as(state: &AppState, w: &Writer<'_>, key: &str) -> ApiResult<Deleted> {
    if !valid_key(key) {
        return Err(ApiError::NotFound);
    }
    let mut tx = state.db.begin().await?;
    let flag = own_flag(&mut tx, w, key).await?;
    sqlx::query("DELETE FROM feature_flag_rollout WHERE flag_id = $1").bind(&flag.flag_id).execute(&mut *tx).await?;
    // The delete itself says whether this request removed the flag: of
    // two deletes at once, the other finds nothing (404).
    let deleted: Option<String> = sqlx::query_scalar("DELETE FROM feature_flag WHERE COALESCE(tenant_id, '') = $1 AND flag_id = $2 RETURNING flag_id")
        .bind(w.owner())
        .bind(&flag.flag_id)
        .fetch_optional(&mut *tx)
        .await?;
    deleted.ok_or(ApiError::NotFound)?;
    w.record(&mut tx, events::FEATURE_FLAG_DELETED, json!({ "flag_id": flag.flag_id, "flag_key": key })).await?;
    tx.commit().await?;
    changed(state, w).await;
    Ok(Deleted { flag_id: flag.flag_id, flag_key: key.to_string(), deleted: true })
}

#[derive(Deserialize, ToSchema)]
#[schema(as = FeatureFlagRolloutRequest)]
pub struct RolloutRequest {
    /// A rollout of this flag to change; absent: a new rollout.
    #[schema(format = "uuid")]
    rollout_id: Option<String>,
    /// Lower first; 100 when absent.
    #[schema(minimum = 0, maximum = 1_000_000)]
    priority: Option<i64>,
    /// Constraints that must all hold; absent or empty: every context.
    #[schema(max_items = 50)]
    predicate: Option<Vec<Constraint>>,
    /// 100 when absent.
    #[schema(minimum = 0, maximum = 100)]
    percentage: Option<i64>,
    /// `persona_id` (the default), `tenant_id`, `bu_id` or
    /// `attributes.<name>`: the context value the percentage buckets.
    stickiness: Option<String>,
    /// Hashed with the stickiness value; the flag key when absent (two
    /// flags with one group_id admit the same users).
    #[schema(max_length = 128)]
    group_id: Option<String>,
    /// Any JSON (at most 64 KiB) answered when this rollout matches;
    /// `true` when absent.
    #[schema(value_type = Option<Value>)]
    value: Option<Value>,
    /// Whether evaluation considers this rollout; `true` when absent.
    active: Option<bool>,
}

/// What the schema of a predicate cannot say: a context name of the
/// documented forms, and the operand the operator needs.
fn check_predicate(check: &mut Check, predicate: &[Constraint]) {
    static CONTEXT_NAME: Pattern = Pattern::of::<Constraint>("context_name");
    for (i, c) in predicate.iter().enumerate() {
        if !CONTEXT_NAME.is_match(&c.context_name) {
            check.fail(format!("predicate[{i}].context_name {CONTEXT_NAME_RULE}"));
        }
        if c.operator.numeric() {
            if c.value.is_none() {
                check.fail(format!("predicate[{i}].value must be a number"));
            }
        } else if c.values.is_empty() {
            check.fail(format!("predicate[{i}].values must be an array of 1 to {MAX_VALUES} strings"));
        }
    }
}

/// Adds a rollout to the tenant's flag (201), or changes one of its
/// rollouts named by `rollout_id` (200).
#[utoipa::path(post, path = "/api/feature-flags/{flag_key}/rollouts", tag = "sdk-feature-flags", params(("flag_key" = String, Path, description = "the flag's key")),
    request_body = RolloutRequest,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/feature-flags", { "flag_key": "race-{unique}" }]],
        "body": { "percentage": 50 } }))),
    responses((status = 201, description = "a new rollout", body = Data<RolloutRow>), (status = 200, description = "the changed rollout", body = Data<RolloutRow>)))]
async fn set_rollout(State(state): State<AppState>, Tenant(ctx): Tenant, Path(key): Path<String>, body: Body<RolloutRequest>) -> ApiResult<Response> {
    let (row, written) = set_rollout_as(&state, &Writer::Tenant(&ctx), &key, body).await?;
    Ok(if written == Written::Made { created(row).into_response() } else { ok(row).into_response() })
}

/// Adds a rollout to the writer's own flag of a key, or changes one of
/// its rollouts (`Written::Found`); another layer's flag is 404.
pub async fn set_rollout_as(state: &AppState, w: &Writer<'_>, key: &str, body: Body<RolloutRequest>) -> ApiResult<(RolloutRow, Written)> {
    if !valid_key(key) {
        return Err(ApiError::NotFound);
    }
    let key = key.to_string();
    let mut tx = state.db.begin().await?;
    let flag = own_flag(&mut tx, w, &key).await?;
    let req = body.checked()?;
    let mut check = Check::new();
    let rollout_id = check.optional_uuid("rollout_id", &req.rollout_id).map(|u| u.to_string());
    let priority = req.priority.unwrap_or(100);
    let predicate = req.predicate.unwrap_or_default();
    check_predicate(&mut check, &predicate);
    let percentage = req.percentage.unwrap_or(100);
    let stickiness = Check::optional(&req.stickiness).unwrap_or_else(|| "persona_id".into());
    if !valid_context_name(&stickiness) {
        check.fail(format!("stickiness {CONTEXT_NAME_RULE}"));
    }
    let group_id = Check::optional(&req.group_id).unwrap_or_else(|| key.clone());
    let value = json_value(&mut check, "value", req.value.as_ref(), json!(true));
    let active = req.active.unwrap_or(true);
    check.finish()?;
    let predicate = serde_json::to_string(&predicate).map_err(|e| ApiError::Internal(e.into()))?;
    let now = db::now();
    let (row, fresh): (RolloutRow, bool) = match rollout_id {
        Some(id) => {
            let sql = format!(
                "UPDATE feature_flag_rollout SET priority = $1, predicate = $2, percentage = $3, stickiness = $4, group_id = $5, value = $6, active = $7, \
                 updated_at = $8 WHERE rollout_id = $9 AND flag_id = $10 RETURNING {ROLLOUT_COLUMNS}"
            );
            let row = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(priority)
                .bind(&predicate)
                .bind(percentage)
                .bind(&stickiness)
                .bind(&group_id)
                .bind(&value)
                .bind(i64::from(active))
                .bind(&now)
                .bind(&id)
                .bind(&flag.flag_id)
                .fetch_optional(&mut *tx)
                .await?;
            (row.ok_or(ApiError::NotFound)?, false)
        }
        None => {
            let sql = format!(
                "INSERT INTO feature_flag_rollout (rollout_id, flag_id, tenant_id, priority, predicate, percentage, stickiness, group_id, value, active, \
                 created_by, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12) RETURNING {ROLLOUT_COLUMNS}"
            );
            let row = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(db::new_id())
                .bind(&flag.flag_id)
                .bind(w.tenant_id())
                .bind(priority)
                .bind(&predicate)
                .bind(percentage)
                .bind(&stickiness)
                .bind(&group_id)
                .bind(&value)
                .bind(i64::from(active))
                .bind(w.actor_id())
                .bind(&now)
                .fetch_one(&mut *tx)
                .await?;
            (row, true)
        }
    };
    let fact = json!({
        "flag_id": flag.flag_id, "flag_key": key, "rollout_id": row.rollout_id, "created": fresh,
        "priority": priority, "percentage": percentage, "active": active,
    });
    w.record(&mut tx, events::FEATURE_FLAG_ROLLOUT_CHANGED, fact).await?;
    tx.commit().await?;
    changed(state, w).await;
    Ok((row, if fresh { Written::Made } else { Written::Found }))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = FeatureFlagKillSwitch)]
pub struct KillSwitchRequest {
    /// `true` engages, `false` releases.
    engaged: bool,
    /// Why; kept with the state.
    #[schema(max_length = 500)]
    reason: Option<String>,
}

/// Engages or releases the kill switch of the tenant's flag. Setting the
/// state it already has changes nothing and records no event.
#[utoipa::path(post, path = "/api/feature-flags/{flag_key}/kill-switch", tag = "sdk-feature-flags", params(("flag_key" = String, Path, description = "the flag's key")),
    request_body = KillSwitchRequest,
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/feature-flags", { "flag_key": "race-{unique}" }]],
        "body": { "engaged": true, "reason": "race" } }))),
    responses((status = 200, description = "the flag", body = Data<FlagRow>)))]
async fn kill_switch(State(state): State<AppState>, Tenant(ctx): Tenant, Path(key): Path<String>, body: Body<KillSwitchRequest>) -> ApiResult<Data<FlagRow>> {
    Ok(ok(kill_switch_as(&state, &Writer::Tenant(&ctx), &key, body).await?))
}

/// Engages or releases the kill switch of the writer's own flag of a key
/// (another layer's is 404); the state it already has changes nothing.
pub async fn kill_switch_as(state: &AppState, w: &Writer<'_>, key: &str, body: Body<KillSwitchRequest>) -> ApiResult<FlagRow> {
    if !valid_key(key) {
        return Err(ApiError::NotFound);
    }
    let mut tx = state.db.begin().await?;
    let flag = own_flag(&mut tx, w, key).await?;
    let req = body.checked()?;
    let engaged = req.engaged;
    let reason = Check::optional(&req.reason);
    let now = db::now();
    // The switch moves in one guarded statement: of two requests setting it
    // at once, one changes it (with the event) and the other finds it set.
    let sql = format!(
        "UPDATE feature_flag SET kill_switch_engaged = $1, kill_switch_reason = $2, kill_switch_changed_at = $3, updated_at = $3 \
         WHERE flag_id = $4 AND kill_switch_engaged <> $1 RETURNING {FLAG_COLUMNS}"
    );
    let moved: Option<FlagRow> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(i64::from(engaged)).bind(&reason).bind(&now).bind(&flag.flag_id).fetch_optional(&mut *tx).await?;
    let Some(flag) = moved else {
        // Already in that state: nothing changes, no event; the flag as
        // committed (the winner's, when another request just set it).
        return own_flag(&mut tx, w, key).await;
    };
    let event = if engaged { events::FEATURE_FLAG_KILL_SWITCH_ENGAGED } else { events::FEATURE_FLAG_KILL_SWITCH_RELEASED };
    w.record(&mut tx, event, json!({ "flag_id": flag.flag_id, "flag_key": key, "reason": reason })).await?;
    tx.commit().await?;
    changed(state, w).await;
    Ok(flag)
}

/// The context a flag is evaluated for.
#[derive(Deserialize, ToSchema)]
#[schema(as = FeatureFlagContext)]
struct ContextRequest {
    /// The persona the flag is evaluated for; the calling persona when
    /// absent.
    #[schema(max_length = 256)]
    persona_id: Option<String>,
    /// The business unit, if any.
    #[schema(max_length = 256)]
    bu_id: Option<String>,
    /// At most 100 attributes, each a string, number or boolean.
    attributes: Option<serde_json::Map<String, Value>>,
}

/// An evaluation's answer.
#[derive(Debug, PartialEq, Serialize, ToSchema)]
#[schema(as = FeatureFlagEvaluation)]
struct Evaluation {
    flag_key: String,
    #[schema(value_type = Value)]
    resolved_value: Value,
    /// The rollout that decided; null for the kill switch or the default.
    matched_rollout_id: Option<String>,
    kill_switch_engaged: bool,
    reason: Reason,
    /// The layer that decided.
    layer: FlagLayer,
}

/// Evaluates a flag for a context: kill switch first, then the active
/// rollouts (the tenant's, then the platform's, each by ascending
/// priority) whose predicate matches, then the default value.
#[utoipa::path(post, path = "/api/feature-flags/{flag_key}/evaluate", tag = "sdk-feature-flags", params(("flag_key" = String, Path, description = "the flag's key")),
    request_body = ContextRequest,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "events": 0, "given": [["POST", "/api/feature-flags", { "flag_key": "race-{unique}" }]],
        "body": {} }))),
    responses((status = 200, description = "the value for this context and what decided it", body = Data<Evaluation>)))]
async fn evaluate(State(state): State<AppState>, Tenant(ctx): Tenant, Path(key): Path<String>, body: Body<ContextRequest>) -> ApiResult<Data<Evaluation>> {
    // A context's `tenant_id` is the gate's: `Body` refused another
    // tenant's; the context's tenant is the caller's.
    if !valid_key(&key) {
        return Err(ApiError::NotFound);
    }
    let flags = flags_of(&state, &ctx.tenant_id).await?;
    if !flags.tenant.contains_key(&key) && !flags.platform.contains_key(&key) {
        return Err(ApiError::NotFound);
    }
    let req = body.checked()?;
    let mut check = Check::new();
    let persona_id = Check::optional(&req.persona_id).unwrap_or_else(|| ctx.persona_id.clone());
    let bu_id = Check::optional(&req.bu_id);
    let attributes = req.attributes.unwrap_or_default();
    if attributes.len() > MAX_ATTRIBUTES {
        check.fail(format!("attributes must hold at most {MAX_ATTRIBUTES} entries"));
    }
    for (name, v) in &attributes {
        if !matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_)) {
            check.fail(format!("attributes.{name} must be a string, number or boolean"));
        }
    }
    check.finish()?;
    let context = Context { tenant_id: &ctx.tenant_id, persona_id: Some(persona_id), bu_id, attributes };
    Ok(ok(flags.evaluate(&key, &context).ok_or(ApiError::NotFound)?))
}

/// The context's values by name.
struct Context<'a> {
    tenant_id: &'a str,
    persona_id: Option<String>,
    bu_id: Option<String>,
    attributes: serde_json::Map<String, Value>,
}

impl Context<'_> {
    /// A context value as text (a number as its JSON text, a boolean as
    /// `true`/`false`), or None when the context lacks it.
    fn get(&self, name: &str) -> Option<Cow<'_, str>> {
        match name {
            "tenant_id" => Some(Cow::Borrowed(self.tenant_id)),
            "persona_id" => self.persona_id.as_deref().map(Cow::Borrowed),
            "bu_id" => self.bu_id.as_deref().map(Cow::Borrowed),
            _ => match self.attributes.get(name.strip_prefix("attributes.")?)? {
                Value::String(s) => Some(Cow::Borrowed(s.as_str())),
                Value::Number(n) => Some(Cow::Owned(n.to_string())),
                Value::Bool(b) => Some(Cow::Borrowed(if *b { "true" } else { "false" })),
                _ => None,
            },
        }
    }
}

impl Constraint {
    /// Unleash's rules: a context without the value satisfies only
    /// `not_in`; `inverted` negates the outcome.
    fn holds(&self, context: &Context) -> bool {
        let actual = context.get(&self.context_name);
        // Folded only when the constraint ignores case: no allocation on
        // the common path.
        fn fold(case_insensitive: bool, s: &str) -> Cow<'_, str> {
            if case_insensitive { Cow::Owned(s.to_lowercase()) } else { Cow::Borrowed(s) }
        }
        let any = |test: &dyn Fn(&str, &str) -> bool, a: &str| {
            let a = fold(self.case_insensitive, a);
            self.values.iter().any(|v| test(&a, &fold(self.case_insensitive, v)))
        };
        let outcome = match (self.operator, actual) {
            (Operator::NotIn, None) => true,
            (_, None) => false,
            (Operator::In, Some(a)) => any(&|a, v| a == v, &a),
            (Operator::NotIn, Some(a)) => !any(&|a, v| a == v, &a),
            (Operator::StrContains, Some(a)) => any(&|a, v| a.contains(v), &a),
            (Operator::StrStartsWith, Some(a)) => any(&|a, v| a.starts_with(v), &a),
            (Operator::StrEndsWith, Some(a)) => any(&|a, v| a.ends_with(v), &a),
            (op, Some(a)) => match (a.trim().parse::<f64>(), self.value) {
                (Ok(x), Some(y)) => match op {
                    Operator::NumEq => x == y,
                    Operator::NumGt => x > y,
                    Operator::NumGte => x >= y,
                    Operator::NumLt => x < y,
                    Operator::NumLte => x <= y,
                    _ => false,
                },
                _ => false,
            },
        };
        outcome != self.inverted
    }
}

/// Unleash's normalised bucket of a stickiness value in a group: 1 to 100.
fn bucket(group_id: &str, stickiness: &str) -> u32 {
    let text = format!("{group_id}:{stickiness}");
    let hash = murmur3::murmur3_32(&mut std::io::Cursor::new(text.as_bytes()), 0).expect("hashing a slice does not fail");
    hash % 100 + 1
}

/// A rollout ready for evaluation.
struct Rollout {
    rollout_id: String,
    predicate: Vec<Constraint>,
    percentage: u32,
    stickiness: String,
    group_id: String,
    value: Value,
}

impl Rollout {
    /// Whether the predicate holds and the stickiness value falls in the
    /// percentage (a context without that value is not admitted, as in
    /// Unleash's flexible rollout).
    fn admits(&self, context: &Context) -> bool {
        if !self.predicate.iter().all(|c| c.holds(context)) {
            return false;
        }
        match context.get(&self.stickiness) {
            Some(value) => self.percentage > 0 && bucket(&self.group_id, &value) <= self.percentage,
            None => false,
        }
    }
}

/// One layer of a key: its flag and its active rollouts, lowest priority
/// first.
struct Layer {
    flag: FlagRow,
    rollouts: Vec<Rollout>,
}

/// A tenant's flags compiled for evaluation: its own layer and the
/// platform's, by key.
#[derive(Default)]
struct Flags {
    tenant: HashMap<String, Layer>,
    platform: HashMap<String, Layer>,
}

impl Flags {
    fn evaluate(&self, key: &str, context: &Context) -> Option<Evaluation> {
        let layers: Vec<&Layer> = [self.tenant.get(key), self.platform.get(key)].into_iter().flatten().collect();
        let first = layers.first()?;
        let answer = |layer: &Layer, resolved_value: &Value, rollout: Option<&str>, reason| Evaluation {
            flag_key: key.to_string(),
            resolved_value: resolved_value.clone(),
            matched_rollout_id: rollout.map(str::to_string),
            kill_switch_engaged: reason == Reason::KillSwitch,
            reason,
            layer: layer.flag.layer,
        };
        if let Some(killed) = layers.iter().find(|l| l.flag.kill_switch_engaged.0) {
            return Some(answer(killed, &killed.flag.off_value.0, None, Reason::KillSwitch));
        }
        for layer in &layers {
            if let Some(r) = layer.rollouts.iter().find(|r| r.admits(context)) {
                return Some(answer(layer, &r.value, Some(&r.rollout_id), Reason::Rollout));
            }
        }
        Some(answer(first, &first.flag.default_value.0, None, Reason::Default))
    }
}

/// Reads a tenant's flags and active rollouts (and the platform's).
async fn load(db: &Db, tenant_id: &str) -> ApiResult<Flags> {
    let sql = format!("SELECT {FLAG_COLUMNS} FROM feature_flag WHERE tenant_id = $1 OR tenant_id IS NULL");
    let rows: Vec<FlagRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).fetch_all(&db.read).await?;
    let sql =
        format!("SELECT {ROLLOUT_COLUMNS} FROM feature_flag_rollout WHERE (tenant_id = $1 OR tenant_id IS NULL) AND active = 1 ORDER BY priority, rollout_id");
    let rollouts: Vec<RolloutRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).fetch_all(&db.read).await?;
    let mut by_flag: HashMap<String, Vec<Rollout>> = HashMap::new();
    for r in rollouts {
        let predicate = serde_json::from_value(r.predicate.0).map_err(|e| ApiError::Internal(anyhow::anyhow!("rollout {}: {e}", r.rollout_id)))?;
        let rollout = Rollout {
            rollout_id: r.rollout_id,
            predicate,
            percentage: u32::try_from(r.percentage).unwrap_or(0),
            stickiness: r.stickiness,
            group_id: r.group_id,
            value: r.value.0,
        };
        by_flag.entry(r.flag_id).or_default().push(rollout);
    }
    let mut flags = Flags::default();
    for flag in rows {
        let layer = Layer { rollouts: by_flag.remove(&flag.flag_id).unwrap_or_default(), flag };
        let side = if layer.flag.layer == FlagLayer::Platform { &mut flags.platform } else { &mut flags.tenant };
        side.insert(layer.flag.flag_key.clone(), layer);
    }
    Ok(flags)
}

/// A tenant's compiled flags, from the cache or loaded into it. A load
/// that an invalidation overtook is answered but not kept.
async fn flags_of(state: &AppState, tenant_id: &String) -> ApiResult<Arc<Flags>> {
    if let Some(flags) = state.feature_flags.get(tenant_id).and_then(|any| any.downcast::<Flags>().ok()) {
        return Ok(flags);
    }
    let generation = state.feature_flags.generation();
    let flags = Arc::new(load(&state.db, tenant_id).await?);
    state.feature_flags.put(generation, tenant_id.clone(), flags.clone());
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_unleashs() {
        // The values Unleash's Node, Java and Go clients assert for
        // `normalizedValue("123", "gr1")` and `("999", "groupX")`.
        assert_eq!(bucket("gr1", "123"), 73);
        assert_eq!(bucket("groupX", "999"), 25);
        // The x86 32-bit variant (the x64 one differs).
        assert_eq!(murmur3::murmur3_32(&mut std::io::Cursor::new(b"hello"), 0).unwrap(), 613_153_351);
    }

    fn context(attributes: Value) -> Context<'static> {
        let Value::Object(attributes) = attributes else { panic!() };
        Context { tenant_id: "t-1", persona_id: Some("p-1".into()), bu_id: None, attributes }
    }

    fn constraint(name: &str, operator: &str, values: &[&str], value: Option<f64>) -> Constraint {
        Constraint {
            context_name: name.into(),
            operator: operator.parse().unwrap(),
            values: values.iter().map(|s| s.to_string()).collect(),
            value,
            inverted: false,
            case_insensitive: false,
        }
    }

    #[test]
    fn constraints_follow_unleashs_operators() {
        let cx = context(json!({ "plan": "Pro", "seats": 12, "beta": true }));
        assert!(constraint("persona_id", "in", &["p-1", "p-2"], None).holds(&cx));
        assert!(!constraint("attributes.plan", "in", &["pro"], None).holds(&cx));
        assert!(Constraint { case_insensitive: true, ..constraint("attributes.plan", "in", &["pro"], None) }.holds(&cx));
        assert!(constraint("attributes.beta", "in", &["true"], None).holds(&cx));
        assert!(constraint("bu_id", "not_in", &["b-1"], None).holds(&cx), "a missing value is not in any list");
        assert!(!constraint("bu_id", "in", &["b-1"], None).holds(&cx));
        assert!(!constraint("bu_id", "str_contains", &[""], None).holds(&cx));
        assert!(constraint("attributes.plan", "str_starts_with", &["Pr"], None).holds(&cx));
        assert!(constraint("attributes.seats", "num_gte", &[], Some(12.0)).holds(&cx));
        assert!(!constraint("attributes.seats", "num_gt", &[], Some(12.0)).holds(&cx));
        assert!(!constraint("attributes.plan", "num_lt", &[], Some(1.0)).holds(&cx), "not a number");
        assert!(!Constraint { inverted: true, ..constraint("persona_id", "in", &["p-1"], None) }.holds(&cx));
    }

    #[test]
    fn rollouts_admit_their_percentage_of_stickiness_values() {
        let rollout = |percentage| Rollout {
            rollout_id: "r".into(),
            predicate: vec![],
            percentage,
            stickiness: "persona_id".into(),
            group_id: "flag".into(),
            value: json!(true),
        };
        let admitted =
            |percentage| (0..10_000).filter(|i| rollout(percentage).admits(&Context { persona_id: Some(format!("user-{i}")), ..context(json!({})) })).count();
        assert_eq!(admitted(0), 0);
        assert_eq!(admitted(100), 10_000);
        let half = admitted(50);
        assert!((4_700..=5_300).contains(&half), "{half} of 10,000 at 50%");
        let no_persona = Context { persona_id: None, ..context(json!({})) };
        assert!(!rollout(100).admits(&no_persona), "no stickiness value, no admission");
    }
}
