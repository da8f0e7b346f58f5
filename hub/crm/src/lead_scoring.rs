//! sdk-lead-scoring: scoring models of a tenant, numbered per vertical
//! (`saas`, `real_estate`, ...), with at most one active per (tenant,
//! vertical), which is what `GET /api/lead-scoring/models/active` resolves.

use hub_kernel::prelude::*;
use serde_json::Map;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_model, list))
        .routes(routes!(get_model))
        .routes(routes!(activate))
        .routes(routes!(deactivate))
        .routes(routes!(active))
}

/// The most weights a model holds.
const MAX_WEIGHTS: usize = 200;

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

fn valid_vertical(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewLeadScoringModel)]
struct NewModel {
    /// 1–64 of `a-z 0-9 . _ -`.
    vertical: String,
    #[schema(max_length = 200)]
    name: String,
    /// 1–200 signals, each name (1–64 characters) with a numeric weight,
    /// stored as given.
    #[schema(value_type = HashMap<String, f64>)]
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
    let vertical = body.vertical.trim().to_string();
    if !valid_vertical(&vertical) {
        check.fail("vertical must be 1 to 64 of a-z, 0-9, '.', '_', '-'");
    }
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
