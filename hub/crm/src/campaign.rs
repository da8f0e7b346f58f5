//! sdk-campaign: campaigns (named once in a tenant) and their journeys,
//! each an ordered list of steps the hub stores as given (opaque JSON) and
//! does not interpret.

use hub_kernel::prelude::*;
use serde_json::Map;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_campaign)).routes(routes!(get_campaign)).routes(routes!(create_journey))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = CampaignCampaign)]
struct Campaign {
    campaign_id: Id,
    name: String,
    description: Option<String>,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Object)]
    attributes: JsonText,
    created_by: String,
    created_at: Timestamp,
    /// Its journeys, oldest first (on a read).
    #[sqlx(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Journey>>)]
    journeys: Option<Vec<Journey>>,
}

const CAMPAIGN_COLUMNS: &str = "campaign_id, name, description, attributes, created_by, created_at";

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = CampaignJourney)]
struct Journey {
    journey_id: Id,
    campaign_id: Id,
    name: Option<String>,
    /// The ordered steps, as given (each any JSON value).
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<Value>)]
    steps: JsonText,
    created_by: String,
    created_at: Timestamp,
}

const JOURNEY_COLUMNS: &str = "journey_id, campaign_id, name, steps, created_by, created_at";

#[derive(Deserialize, ToSchema)]
#[schema(as = NewCampaign)]
struct NewCampaign {
    /// Unique in the tenant (409).
    #[schema(max_length = 200)]
    name: String,
    #[schema(max_length = 2000)]
    description: Option<String>,
    attributes: Option<Map<String, Value>>,
}

/// Creates a campaign.
#[utoipa::path(post, path = "/api/campaigns", tag = "sdk-campaign", request_body = NewCampaign,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "body": { "name": "race-{unique}" } }))),
    responses((status = 201, description = "the campaign", body = Data<Campaign>)))]
async fn create_campaign(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewCampaign>) -> ApiResult<Created<Campaign>> {
    let body = body.checked()?;
    let name = body.name.trim();
    let description = Check::optional(&body.description);
    let attributes = Value::Object(body.attributes.unwrap_or_default());
    let mut tx = state.db.begin().await?;
    let taken: Option<String> = sqlx::query_scalar("SELECT campaign_id FROM campaign_campaign WHERE tenant_id = $1 AND name = $2")
        .bind(&ctx.tenant_id)
        .bind(name)
        .fetch_optional(&mut *tx)
        .await?;
    if taken.is_some() {
        return Err(ApiError::Conflict(format!("a campaign of this tenant is named {name} already")));
    }
    let sql = format!(
        "INSERT INTO campaign_campaign (campaign_id, tenant_id, name, description, attributes, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {CAMPAIGN_COLUMNS}"
    );
    let campaign: Campaign = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(name)
        .bind(&description)
        .bind(attributes.to_string())
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    audit::record(&mut tx, &ctx, events::CAMPAIGN_CREATED, json!({ "campaign_id": campaign.campaign_id })).await?;
    tx.commit().await?;
    Ok(created(campaign))
}

async fn find<'e, E>(exec: E, tenant_id: &str, id: &str) -> ApiResult<Campaign>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {CAMPAIGN_COLUMNS} FROM campaign_campaign WHERE tenant_id = $1 AND campaign_id = $2");
    let found: Option<Campaign> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&id).fetch_optional(exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// A campaign with its journeys.
#[utoipa::path(get, path = "/api/campaigns/{campaign_id}", tag = "sdk-campaign", params(("campaign_id" = String, Path, description = "the campaign")),
    responses((status = 200, description = "the campaign", body = Data<Campaign>)))]
async fn get_campaign(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Campaign>> {
    let mut tx = state.db.read.begin().await?;
    let mut campaign = find(&mut *tx, &ctx.tenant_id, &id).await?;
    let sql = format!("SELECT {JOURNEY_COLUMNS} FROM campaign_journey WHERE campaign_id = $1 ORDER BY created_at, journey_id");
    campaign.journeys = Some(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(campaign.campaign_id).fetch_all(&mut *tx).await?);
    tx.commit().await?;
    Ok(ok(campaign))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewCampaignJourney)]
struct NewJourney {
    #[schema(max_length = 200)]
    name: Option<String>,
    /// The ordered steps, each any JSON value, stored as given; `[]` when
    /// absent.
    #[schema(max_items = 500)]
    steps: Option<Vec<Value>>,
}

/// Creates a journey of a campaign: its steps stored in order, as given.
#[utoipa::path(post, path = "/api/campaigns/{campaign_id}/journeys", tag = "sdk-campaign", request_body = NewJourney,
    params(("campaign_id" = String, Path, description = "the campaign")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/campaigns", { "name": "race-{unique}" }]], "body": { "name": "race", "steps": [{ "wait": "1d" }] } }))),
    responses((status = 201, description = "the journey", body = Data<Journey>)))]
async fn create_journey(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<NewJourney>) -> ApiResult<Created<Journey>> {
    let mut tx = state.db.begin().await?;
    let campaign = find(&mut *tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let name = Check::optional(&body.name);
    let steps = Value::Array(body.steps.unwrap_or_default());
    let sql = format!(
        "INSERT INTO campaign_journey (journey_id, campaign_id, tenant_id, name, steps, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7) \
         RETURNING {JOURNEY_COLUMNS}"
    );
    let journey: Journey = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(campaign.campaign_id)
        .bind(&ctx.tenant_id)
        .bind(&name)
        .bind(steps.to_string())
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "journey_id": journey.journey_id, "campaign_id": campaign.campaign_id, "step_count": steps.as_array().map_or(0, Vec::len) });
    audit::record(&mut tx, &ctx, events::CAMPAIGN_JOURNEY_CREATED, payload).await?;
    tx.commit().await?;
    Ok(created(journey))
}
