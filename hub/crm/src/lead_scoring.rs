//! sdk-lead-scoring: scoring models of a tenant, numbered per vertical
//! (`saas`, `real_estate`, ...), with at most one active per (tenant,
//! vertical), which is what `GET /api/lead-scoring/models/active` resolves.
//! `POST /api/lead-scoring/score` scores a lead, or given attributes, with
//! the active model of a vertical: each signal's weight times the
//! attribute of the same name (a number as it is, `true` 1, `false` 0,
//! anything else or nothing: no contribution), summed in signal-name
//! order, then held to 0–100 and rounded to two decimals.

use hub_kernel::prelude::*;
use serde_json::Map;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_model, list))
        .routes(routes!(get_model))
        .routes(routes!(activate))
        .routes(routes!(deactivate))
        .routes(routes!(active))
        .routes(routes!(score))
}

/// The most weights a model holds.
const MAX_WEIGHTS: usize = 200;

/// The largest weight, either way: a model's weights are from
/// `-MAX_WEIGHT` to `MAX_WEIGHT`.
const MAX_WEIGHT: f64 = 1e6;

/// The schema of a model's weights: signal name → a number from
/// `-MAX_WEIGHT` to `MAX_WEIGHT` (the contract refuses any other).
fn weights_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    let weight = ObjectBuilder::new().schema_type(Type::Number).minimum(Some(-MAX_WEIGHT)).maximum(Some(MAX_WEIGHT));
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some("1–200 signals, each name (1–64 characters) with a numeric weight from -1000000 to 1000000, stored as given."))
        .additional_properties(Some(weight))
        .build()
}

/// The form of a vertical, for a model and for a score alike.
static VERTICAL_FORM: Pattern = Pattern::of::<NewModel>("vertical");
const VERTICAL_RULE: &str = "vertical must be 1 to 64 of a-z, 0-9, '.', '_', '-'";

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = LeadScoringModel)]
struct Model {
    model_id: Id,
    vertical: String,
    name: String,
    /// 1, 2, ... within the vertical.
    version: i64,
    /// Signal name → weight (a number).
    #[sqlx(try_from = "String")]
    #[schema(value_type = Object)]
    weights: JsonText,
    /// The score (0–100) at which a lead counts as qualified.
    threshold: i64,
    #[sqlx(try_from = "i64")]
    #[schema(value_type = bool)]
    active: Flag,
    activated_at: Option<Timestamp>,
    created_by: String,
    created_at: Timestamp,
}

const COLUMNS: &str = "model_id, vertical, name, version, weights, threshold, active, activated_at, created_by, created_at";

#[derive(Deserialize, ToSchema)]
#[schema(as = NewLeadScoringModel)]
struct NewModel {
    /// 1–64 of `a-z 0-9 . _ -`.
    #[schema(pattern = r"^[a-z0-9._-]{1,64}$")]
    vertical: String,
    #[schema(max_length = 200)]
    name: String,
    #[schema(schema_with = weights_schema)]
    weights: Map<String, Value>,
    /// 50 when absent.
    #[schema(minimum = 0, maximum = 100)]
    threshold: Option<i64>,
}

/// Creates the next version of a vertical's model, inactive.
#[utoipa::path(post, path = "/api/lead-scoring/models", tag = "sdk-lead-scoring", request_body = NewModel,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "vertical": "race-{unique}", "name": "race", "weights": { "a": 1 } } }))),
    responses((status = 201, description = "the model, inactive", body = Data<Model>)))]
async fn create_model(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewModel>) -> ApiResult<Created<Model>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let vertical = body.vertical.clone();
    check.matches(&vertical, &VERTICAL_FORM, VERTICAL_RULE);
    let name = body.name.trim().to_string();
    if (1..=MAX_WEIGHTS).contains(&body.weights.len()) {
        for signal in body.weights.keys() {
            if signal.is_empty() || signal.chars().count() > 64 {
                check.fail(format!("weights.{signal} must be a number named by 1 to 64 characters"));
            }
        }
    } else {
        check.fail(format!("weights must be an object of 1 to {MAX_WEIGHTS} numbers"));
    }
    let threshold = body.threshold.unwrap_or(50);
    check.finish()?;
    let mut tx = state.db.begin().await?;
    // Concurrent publishes of one vertical each get a version of their own.
    let floor = "SELECT MAX(version) FROM lead_scoring_model WHERE tenant_id = $1 AND vertical = $3";
    let version = next_number(&mut tx, &ctx.tenant_id, &format!("lead_scoring_model {vertical}"), floor, &vertical).await?;
    let sql = format!(
        "INSERT INTO lead_scoring_model (model_id, tenant_id, vertical, name, version, weights, threshold, active, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8, $9) RETURNING {COLUMNS}"
    );
    let model: Model = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&vertical)
        .bind(&name)
        .bind(version)
        .bind(Value::Object(body.weights).to_string())
        .bind(threshold)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "model_id": model.model_id, "vertical": vertical, "version": version });
    audit::record(&mut tx, &ctx, events::LEAD_SCORING_MODEL_CREATED, payload).await?;
    tx.commit().await?;
    Ok(created(model))
}

/// The first version of a vertical, as activations lock it.
const VERTICAL: Stateful = Stateful { noun: "model", table: "lead_scoring_model", key: "model_id", state: "active" };

/// Makes a model its vertical's active one (the one active before is not
/// any more); activating the active model changes nothing.
#[utoipa::path(post, path = "/api/lead-scoring/models/{model_id}/activate", tag = "sdk-lead-scoring",
    params(("model_id" = String, Path, description = "the model")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/lead-scoring/models", { "vertical": "race-{unique}", "name": "one", "weights": { "a": 1 } }], ["POST", "/api/lead-scoring/models", { "vertical": "race-{unique}", "name": "two", "weights": { "a": 2 } }]] }))),
    responses((status = 200, description = "the model, active", body = Data<Model>)))]
async fn activate(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Model>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let sql = format!("SELECT {COLUMNS} FROM lead_scoring_model WHERE tenant_id = $1 AND model_id = $2");
    let model: Model = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?.ok_or(ApiError::NotFound)?;
    // The vertical's first version owns "one active model": locking it
    // queues the activations of the vertical one after another, so the
    // model is read again as the previous activation committed it.
    let first: String = sqlx::query_scalar("SELECT model_id FROM lead_scoring_model WHERE tenant_id = $1 AND vertical = $2 ORDER BY version LIMIT 1")
        .bind(&ctx.tenant_id)
        .bind(&model.vertical)
        .fetch_one(&mut *tx)
        .await?;
    VERTICAL.lock::<i64>(&mut tx, &ctx.tenant_id, &first).await?;
    let sql = format!("SELECT {COLUMNS} FROM lead_scoring_model WHERE tenant_id = $1 AND model_id = $2");
    let model: Model = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_one(&mut *tx).await?;
    if model.active.0 {
        return Ok(ok(model));
    }
    let previous: Option<String> =
        sqlx::query_scalar("UPDATE lead_scoring_model SET active = 0 WHERE tenant_id = $1 AND vertical = $2 AND active = 1 RETURNING model_id")
            .bind(&ctx.tenant_id)
            .bind(&model.vertical)
            .fetch_optional(&mut *tx)
            .await?;
    let sql = format!("UPDATE lead_scoring_model SET active = 1, activated_at = $2 WHERE model_id = $1 RETURNING {COLUMNS}");
    let model: Model = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&id).bind(db::now()).fetch_one(&mut *tx).await?;
    let payload = json!({ "model_id": model.model_id, "vertical": model.vertical, "version": model.version, "previous_model_id": previous });
    audit::record(&mut tx, &ctx, events::LEAD_SCORING_MODEL_ACTIVATED, payload).await?;
    tx.commit().await?;
    Ok(ok(model))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ActiveQuery {
    /// The caller's tenant.
    #[param(format = "uuid")]
    tenant_id: String,
    /// The vertical.
    vertical: String,
}

/// The active model of a vertical; 404 `no active model` when it has none.
#[utoipa::path(get, path = "/api/lead-scoring/models/active", tag = "sdk-lead-scoring", params(ActiveQuery),
    responses((status = 200, description = "the active model", body = Data<Model>), (status = 404, description = "NotFound: no active model for the vertical", body = ErrorBody)))]
async fn active(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<ActiveQuery>) -> ApiResult<Data<Model>> {
    ctx.check_tenant(Some(&q.tenant_id))?;
    let vertical = q.vertical.trim();
    let sql = format!("SELECT {COLUMNS} FROM lead_scoring_model WHERE tenant_id = $1 AND vertical = $2 AND active = 1");
    let model: Option<Model> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(vertical).fetch_optional(&state.db.read).await?;
    Ok(ok(model.ok_or(ApiError::Missing("no active model"))?))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ModelFilter {
    /// Only the versions of this vertical.
    #[param(max_length = 64)]
    vertical: Option<String>,
    /// Only the active (true) or the inactive (false) versions.
    active: Option<bool>,
}

/// The tenant's models, every version, active or not; newest first.
#[utoipa::path(get, path = "/api/lead-scoring/models", tag = "sdk-lead-scoring", params(ModelFilter, Page),
    responses((status = 200, description = "one page of models", body = ListOf<Model>)))]
async fn list(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<ModelFilter>, page: Page) -> ApiResult<ListOf<Model>> {
    let vertical = Check::optional(&q.vertical).unwrap_or_default();
    let active = match q.active {
        None => "",
        Some(true) => "1",
        Some(false) => "0",
    };
    let listing = Listing {
        table: "lead_scoring_model",
        columns: COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR vertical = $2) AND ($3 = '' OR CAST(active AS TEXT) = $3)",
        order: "created_at DESC, model_id DESC",
    };
    page.list::<Model>(&state.db.read, &listing, &[&ctx.tenant_id, &vertical, active]).await
}

/// One model of the tenant, any version.
#[utoipa::path(get, path = "/api/lead-scoring/models/{model_id}", tag = "sdk-lead-scoring",
    params(("model_id" = String, Path, description = "the model")),
    responses((status = 200, description = "the model", body = Data<Model>)))]
async fn get_model(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Model>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM lead_scoring_model WHERE tenant_id = $1 AND model_id = $2");
    let model: Option<Model> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    Ok(ok(model.ok_or(ApiError::NotFound)?))
}

/// Leaves the model's vertical with no active model (`GET
/// /api/lead-scoring/models/active` answers 404 for it until a model is
/// activated); deactivating an inactive model changes nothing and answers
/// it as it is.
#[utoipa::path(post, path = "/api/lead-scoring/models/{model_id}/deactivate", tag = "sdk-lead-scoring",
    params(("model_id" = String, Path, description = "the model")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/lead-scoring/models", { "vertical": "race-{unique}", "name": "one", "weights": { "a": 1 } }], ["POST", "/api/lead-scoring/models/{model_id}/activate", {}]] }))),
    responses((status = 200, description = "the model, inactive", body = Data<Model>)))]
async fn deactivate(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Model>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let sql = format!("UPDATE lead_scoring_model SET active = 0 WHERE tenant_id = $1 AND model_id = $2 AND active = 1 RETURNING {COLUMNS}");
    let changed: Option<Model> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
    let Some(model) = changed else {
        let sql = format!("SELECT {COLUMNS} FROM lead_scoring_model WHERE tenant_id = $1 AND model_id = $2");
        let model: Option<Model> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
        tx.rollback().await?;
        return Ok(ok(model.ok_or(ApiError::NotFound)?));
    };
    let payload = json!({ "model_id": model.model_id, "vertical": model.vertical, "version": model.version });
    audit::record(&mut tx, &ctx, events::LEAD_SCORING_MODEL_DEACTIVATED, payload).await?;
    tx.commit().await?;
    Ok(ok(model))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = LeadScoreRequest)]
struct ScoreRequest {
    /// The vertical whose active model scores: 1–64 of `a-z 0-9 . _ -`.
    #[schema(pattern = r"^[a-z0-9._-]{1,64}$")]
    vertical: String,
    /// A lead of the tenant: its `attributes` are scored. Give this or
    /// `attributes`, not both.
    #[schema(format = "uuid")]
    lead_id: Option<String>,
    /// Signal name → value, scored as given (nothing is stored). Give this
    /// or `lead_id`, not both.
    attributes: Option<Map<String, Value>>,
}

/// What one signal of the model added to the score.
#[derive(Serialize, ToSchema)]
#[schema(as = LeadScoreContribution)]
struct Contribution {
    /// The signal: a weight of the model, an attribute of the lead.
    signal: String,
    weight: f64,
    /// The attribute's value as scored (a number; `true` is 1, `false`
    /// 0); null when the lead has no number or boolean of that name.
    value: Option<f64>,
    /// `weight × value`, 0 when `value` is null.
    contribution: f64,
}

/// A score and how the model made it.
#[derive(Serialize, ToSchema)]
#[schema(as = LeadScore)]
struct Score {
    /// The lead scored; null when attributes were given.
    lead_id: Option<String>,
    /// The model used: the vertical's active one.
    model_id: Id,
    vertical: String,
    version: i64,
    /// The sum of the contributions, in signal-name order.
    raw_score: f64,
    /// `raw_score` held to 0–100 and rounded to two decimals.
    #[schema(minimum = 0, maximum = 100)]
    score: f64,
    /// The model's threshold.
    threshold: i64,
    /// `score >= threshold`.
    qualified: bool,
    /// One per signal of the model, by signal name.
    contributions: Vec<Contribution>,
}

/// A value as a signal scores it: a number, or a boolean as 1 or 0.
fn signal_value(value: Option<&Value>) -> Option<f64> {
    match value? {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    }
}

/// Scores a lead of the tenant, or given attributes, with the active model
/// of a vertical (404 `no active model` when it has none). Deterministic:
/// the same model and attributes give the same answer. Nothing is stored
/// and nothing recorded.
#[utoipa::path(post, path = "/api/lead-scoring/score", tag = "sdk-lead-scoring", request_body = ScoreRequest,
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "events": 0, "given": [
        ["POST", "/api/lead-scoring/models", { "vertical": "race-{unique}", "name": "one", "weights": { "demo": 40, "visits": 2.5 } }],
        ["POST", "/api/lead-scoring/models/{model_id}/activate", {}]],
        "body": { "vertical": "race-{unique}", "attributes": { "demo": true, "visits": 4 } } }))),
    responses((status = 200, description = "the score, with each signal's contribution", body = Data<Score>),
        (status = 404, description = "NotFound: no active model for the vertical", body = ErrorBody)))]
async fn score(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<ScoreRequest>) -> ApiResult<Data<Score>> {
    let body = body.checked()?;
    static SCORED_VERTICAL: Pattern = Pattern::of::<ScoreRequest>("vertical");
    let vertical = body.vertical.clone();
    let mut check = Check::new();
    check.matches(&vertical, &SCORED_VERTICAL, VERTICAL_RULE);
    check.finish()?;
    let lead = Check::optional(&body.lead_id);
    let attributes = match (&lead, body.attributes) {
        (Some(_), Some(_)) => return Err(ApiError::invalid("give lead_id or attributes, not both")),
        (None, None) => return Err(ApiError::invalid("give lead_id or attributes")),
        (None, Some(given)) => given,
        (Some(l), None) => {
            let id = canonical_uuid(l);
            let stored: Option<String> = sqlx::query_scalar("SELECT attributes FROM crm_lead WHERE tenant_id = $1 AND lead_id = $2")
                .bind(&ctx.tenant_id)
                .bind(&id)
                .fetch_optional(&state.db.read)
                .await?;
            let stored = stored.ok_or_else(|| ApiError::invalid("lead_id is not a lead of this tenant"))?;
            serde_json::from_str::<Map<String, Value>>(&stored).unwrap_or_default()
        }
    };
    let lead = lead.map(|l| canonical_uuid(&l));
    let sql = format!("SELECT {COLUMNS} FROM lead_scoring_model WHERE tenant_id = $1 AND vertical = $2 AND active = 1");
    let model: Option<Model> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&vertical).fetch_optional(&state.db.read).await?;
    let model = model.ok_or(ApiError::Missing("no active model"))?;
    let mut weights: Vec<(String, f64)> =
        model.weights.0.as_object().map(|w| w.iter().map(|(k, v)| (k.clone(), v.as_f64().unwrap_or(0.0))).collect()).unwrap_or_default();
    weights.sort_by(|a, b| a.0.cmp(&b.0));
    let mut raw = 0.0;
    let mut check = Check::new();
    let contributions: Vec<Contribution> = weights
        .into_iter()
        .map(|(signal, weight)| {
            let value = signal_value(attributes.get(&signal));
            let contribution = value.map_or(0.0, |v| weight * v);
            // A number of any size is valid JSON: one whose product with
            // its weight is out of a double's range cannot be scored.
            if !contribution.is_finite() {
                check.fail(format!("attributes.{signal} is too large to score (its weight times it is out of range)"));
            }
            raw += contribution;
            Contribution { signal, weight, value, contribution }
        })
        .collect();
    check.finish()?;
    if !raw.is_finite() {
        return Err(ApiError::invalid("the attributes are too large to score (the sum of the contributions is out of range)"));
    }
    let score = (raw.clamp(0.0, 100.0) * 100.0).round() / 100.0;
    Ok(ok(Score {
        lead_id: lead,
        model_id: model.model_id,
        vertical: model.vertical,
        version: model.version,
        raw_score: raw,
        score,
        threshold: model.threshold,
        qualified: score >= model.threshold as f64,
        contributions,
    }))
}
