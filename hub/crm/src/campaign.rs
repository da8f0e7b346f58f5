//! sdk-campaign: campaigns (named once in a tenant) and their journeys,
//! each an ordered list of steps the hub stores as given (opaque JSON) and
//! does not interpret. A campaign is `active` until archived; an archived
//! campaign is read-only, its journeys included (409).

use hub_kernel::prelude::*;
use serde_json::Map;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_campaign, list_campaigns))
        .routes(routes!(get_campaign, update_campaign))
        .routes(routes!(archive))
        .routes(routes!(create_journey))
        .routes(routes!(update_journey, delete_journey))
}

stored_enum! {
    /// Whether a campaign may still change: `archived` is final.
    #[schema(as = CampaignStatus)]
    pub enum CampaignStatus { Active = "active", Archived = "archived" }
}

/// A campaign as guarded writes name it: a change of it or of its
/// journeys locks its row, so an archive and a change never both pass.
const CAMPAIGN: Stateful = Stateful { noun: "campaign", table: "campaign_campaign", key: "campaign_id", state: "status" };

/// What a change of an archived campaign answers.
const ONLY_ACTIVE: &str = "only an active campaign can be changed";

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = CampaignCampaign)]
struct Campaign {
    campaign_id: Id,
    name: String,
    description: Option<String>,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Object)]
    attributes: JsonText,
    status: CampaignStatus,
    created_by: String,
    created_at: Timestamp,
    archived_at: Option<Timestamp>,
    /// Its journeys, oldest first (on a read).
    #[sqlx(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Journey>>)]
    journeys: Option<Vec<Journey>>,
}

const CAMPAIGN_COLUMNS: &str = "campaign_id, name, description, attributes, status, created_by, created_at, archived_at";

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
/// An archived campaign takes no journey (409).
#[utoipa::path(post, path = "/api/campaigns/{campaign_id}/journeys", tag = "sdk-campaign", request_body = NewJourney,
    params(("campaign_id" = String, Path, description = "the campaign")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/campaigns", { "name": "race-{unique}" }]], "body": { "name": "race", "steps": [{ "wait": "1d" }] } }))),
    responses((status = 201, description = "the journey", body = Data<Journey>)))]
async fn create_journey(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<NewJourney>) -> ApiResult<Created<Journey>> {
    let mut tx = state.db.begin().await?;
    let campaign = active(&mut tx, &ctx.tenant_id, &id).await?;
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

/// The tenant's active campaign `id`, its row locked for the rest of the
/// transaction: 404 when there is none, 409 when it is archived.
async fn active(tx: &mut Tx, tenant_id: &str, id: &str) -> ApiResult<Campaign> {
    let id = path_id(id)?.to_string();
    let status: Option<CampaignStatus> = CAMPAIGN.lock(tx, tenant_id, &id).await?;
    match status {
        None => Err(ApiError::NotFound),
        Some(CampaignStatus::Archived) => Err(ApiError::Conflict(format!("the campaign is archived: {ONLY_ACTIVE}"))),
        Some(CampaignStatus::Active) => find(&mut **tx, tenant_id, &id).await,
    }
}

/// The campaigns, newest first.
const CAMPAIGNS: Listing =
    Listing { table: "campaign_campaign", columns: CAMPAIGN_COLUMNS, filter: "tenant_id = $1", order: "created_at DESC, campaign_id DESC" };

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct CampaignQuery {
    /// Only campaigns in this status.
    #[param(inline)]
    status: Option<CampaignStatus>,
}

/// The tenant's campaigns, newest first (without their journeys).
#[utoipa::path(get, path = "/api/campaigns", tag = "sdk-campaign", params(CampaignQuery, Page),
    responses((status = 200, description = "one page of campaigns", body = ListOf<Campaign>)))]
async fn list_campaigns(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<CampaignQuery>) -> ApiResult<ListOf<Campaign>> {
    match q.status {
        Some(status) => {
            let listing = Listing { filter: "tenant_id = $1 AND status = $2", ..CAMPAIGNS };
            page.list::<Campaign>(&state.db.read, &listing, &[&ctx.tenant_id, status.as_str()]).await
        }
        None => page.list::<Campaign>(&state.db.read, &CAMPAIGNS, &[&ctx.tenant_id]).await,
    }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = CampaignUpdate)]
struct CampaignUpdate {
    /// Unique in the tenant (409); not blank.
    #[schema(max_length = 200)]
    name: Option<String>,
    /// A blank description clears it.
    #[schema(max_length = 2000)]
    description: Option<String>,
    /// Replaces the attributes.
    attributes: Option<Map<String, Value>>,
}

/// Changes an active campaign's name, description or attributes (what the
/// body leaves out stays; at least one field). An archived campaign is
/// 409. Records `campaign.campaign.updated.v1` with the fields given.
#[utoipa::path(patch, path = "/api/campaigns/{campaign_id}", tag = "sdk-campaign", request_body = CampaignUpdate,
    params(("campaign_id" = String, Path, description = "the campaign")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/campaigns", { "name": "race-{unique}" }]],
        "body": { "description": "raced", "attributes": { "budget": 1 } } }))),
    responses((status = 200, description = "the campaign", body = Data<Campaign>),
        (status = 409, description = "Conflict: the campaign is archived, or another campaign of the tenant has the name", body = ErrorBody)))]
async fn update_campaign(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<CampaignUpdate>) -> ApiResult<Data<Campaign>> {
    let id = path_id(&id)?.to_string();
    let body = body.checked()?;
    let mut check = Check::new();
    let mut sets: Vec<(&str, Option<String>)> = Vec::new();
    if let Some(name) = body.name.as_deref().map(str::trim) {
        if name.is_empty() {
            check.fail("name must not be blank");
        }
        sets.push(("name", Some(name.to_string())));
    }
    if body.description.is_some() {
        sets.push(("description", Check::optional(&body.description)));
    }
    if let Some(attributes) = &body.attributes {
        sets.push(("attributes", Some(Value::Object(attributes.clone()).to_string())));
    }
    if sets.is_empty() {
        check.fail("give at least one of name, description, attributes");
    }
    check.finish()?;
    let mut tx = state.db.begin().await?;
    active(&mut tx, &ctx.tenant_id, &id).await?;
    if let Some((_, Some(name))) = sets.iter().find(|(column, _)| *column == "name") {
        let taken: Option<String> = sqlx::query_scalar("SELECT campaign_id FROM campaign_campaign WHERE tenant_id = $1 AND name = $2 AND campaign_id <> $3")
            .bind(&ctx.tenant_id)
            .bind(name)
            .bind(&id)
            .fetch_optional(&mut *tx)
            .await?;
        if taken.is_some() {
            return Err(ApiError::Conflict(format!("a campaign of this tenant is named {name} already")));
        }
    }
    let set: Vec<String> = sets.iter().enumerate().map(|(i, (column, _))| format!("{column} = ${}", i + 3)).collect();
    let sql = format!("UPDATE campaign_campaign SET {} WHERE tenant_id = $1 AND campaign_id = $2 RETURNING {CAMPAIGN_COLUMNS}", set.join(", "));
    let mut update = sqlx::query_as::<_, Campaign>(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id);
    for (_, value) in &sets {
        update = update.bind(value.clone());
    }
    let campaign = update.fetch_one(&mut *tx).await?;
    let fields: Vec<&str> = sets.iter().map(|(column, _)| *column).collect();
    audit::record(&mut tx, &ctx, events::CAMPAIGN_UPDATED, json!({ "campaign_id": id, "fields": fields })).await?;
    tx.commit().await?;
    Ok(ok(campaign))
}

/// Archives a campaign: from then on it and its journeys are read-only.
/// Archiving an archived campaign changes nothing, records no event and
/// answers the campaign as it is.
#[utoipa::path(post, path = "/api/campaigns/{campaign_id}/archive", tag = "sdk-campaign", params(("campaign_id" = String, Path, description = "the campaign")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/campaigns", { "name": "race-{unique}" }]] }))),
    responses((status = 200, description = "the campaign, archived", body = Data<Campaign>)))]
async fn archive(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Campaign>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // One guarded statement: of two archives at once, the second finds the
    // campaign archived and answers it as the first committed it.
    let sql = format!(
        "UPDATE campaign_campaign SET status = 'archived', archived_at = $3 WHERE tenant_id = $1 AND campaign_id = $2 AND status = 'active' \
         RETURNING {CAMPAIGN_COLUMNS}"
    );
    let moved: Option<Campaign> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).bind(db::now()).fetch_optional(&mut *tx).await?;
    let Some(campaign) = moved else {
        return Ok(ok(find(&mut *tx, &ctx.tenant_id, &id).await?));
    };
    audit::record(&mut tx, &ctx, events::CAMPAIGN_ARCHIVED, json!({ "campaign_id": id })).await?;
    tx.commit().await?;
    Ok(ok(campaign))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = CampaignJourneyUpdate)]
struct JourneyUpdate {
    /// A blank name clears it.
    #[schema(max_length = 200)]
    name: Option<String>,
    /// Replaces the ordered steps, each any JSON value, stored as given.
    #[schema(max_items = 500)]
    steps: Option<Vec<Value>>,
}

/// Changes a journey of an active campaign: its name or its steps (what
/// the body leaves out stays; at least one field). Records
/// `campaign.journey.updated.v1` with the fields given and the step count.
#[utoipa::path(patch, path = "/api/campaigns/{campaign_id}/journeys/{journey_id}", tag = "sdk-campaign", request_body = JourneyUpdate,
    params(("campaign_id" = String, Path, description = "the campaign"), ("journey_id" = String, Path, description = "the journey")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/campaigns", { "name": "race-{unique}" }],
        ["POST", "/api/campaigns/{campaign_id}/journeys", { "name": "race", "steps": [] }]], "body": { "steps": [{ "wait": "2d" }] } }))),
    responses((status = 200, description = "the journey", body = Data<Journey>),
        (status = 409, description = "Conflict: the campaign is archived", body = ErrorBody)))]
async fn update_journey(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path((campaign_id, journey_id)): Path<(String, String)>,
    body: Body<JourneyUpdate>,
) -> ApiResult<Data<Journey>> {
    let journey_id = path_id(&journey_id)?.to_string();
    let body = body.checked()?;
    let mut sets: Vec<(&str, Option<String>)> = Vec::new();
    if body.name.is_some() {
        sets.push(("name", Check::optional(&body.name)));
    }
    let step_count = body.steps.as_ref().map(Vec::len);
    if let Some(steps) = body.steps {
        sets.push(("steps", Some(Value::Array(steps).to_string())));
    }
    if sets.is_empty() {
        return Err(ApiError::invalid("give at least one of name, steps"));
    }
    let mut tx = state.db.begin().await?;
    let campaign = active(&mut tx, &ctx.tenant_id, &campaign_id).await?;
    let set: Vec<String> = sets.iter().enumerate().map(|(i, (column, _))| format!("{column} = ${}", i + 4)).collect();
    let sql =
        format!("UPDATE campaign_journey SET {} WHERE tenant_id = $1 AND campaign_id = $2 AND journey_id = $3 RETURNING {JOURNEY_COLUMNS}", set.join(", "));
    let mut update = sqlx::query_as::<_, Journey>(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(campaign.campaign_id).bind(&journey_id);
    for (_, value) in &sets {
        update = update.bind(value.clone());
    }
    let journey = update.fetch_optional(&mut *tx).await?.ok_or(ApiError::NotFound)?;
    let fields: Vec<&str> = sets.iter().map(|(column, _)| *column).collect();
    let payload = json!({ "journey_id": journey_id, "campaign_id": campaign.campaign_id, "fields": fields, "step_count": step_count });
    audit::record(&mut tx, &ctx, events::CAMPAIGN_JOURNEY_UPDATED, payload).await?;
    tx.commit().await?;
    Ok(ok(journey))
}

/// What deleting a journey answers.
#[derive(Serialize, ToSchema)]
#[schema(as = CampaignJourneyDeleted)]
struct JourneyDeleted {
    journey_id: Id,
    /// Always true: the journey is gone.
    deleted: bool,
}

/// Deletes a journey of an active campaign (the row is removed; the audit
/// chain keeps its creation and `campaign.journey.deleted.v1`).
#[utoipa::path(delete, path = "/api/campaigns/{campaign_id}/journeys/{journey_id}", tag = "sdk-campaign",
    params(("campaign_id" = String, Path, description = "the campaign"), ("journey_id" = String, Path, description = "the journey")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404, "given": [["POST", "/api/campaigns", { "name": "race-{unique}" }],
        ["POST", "/api/campaigns/{campaign_id}/journeys", { "name": "race" }]] }))),
    responses((status = 200, description = "deleted", body = Data<JourneyDeleted>),
        (status = 409, description = "Conflict: the campaign is archived", body = ErrorBody)))]
async fn delete_journey(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path((campaign_id, journey_id)): Path<(String, String)>,
) -> ApiResult<Data<JourneyDeleted>> {
    let journey_id = path_id(&journey_id)?.to_string();
    let mut tx = state.db.begin().await?;
    // The campaign's row is locked: of two deletes at once, the second
    // finds the journey gone (404).
    let campaign = active(&mut tx, &ctx.tenant_id, &campaign_id).await?;
    let deleted: Option<Id> =
        sqlx::query_scalar("DELETE FROM campaign_journey WHERE tenant_id = $1 AND campaign_id = $2 AND journey_id = $3 RETURNING journey_id")
            .bind(&ctx.tenant_id)
            .bind(campaign.campaign_id)
            .bind(&journey_id)
            .fetch_optional(&mut *tx)
            .await?;
    let journey_id = deleted.ok_or(ApiError::NotFound)?;
    audit::record(&mut tx, &ctx, events::CAMPAIGN_JOURNEY_DELETED, json!({ "journey_id": journey_id, "campaign_id": campaign.campaign_id })).await?;
    tx.commit().await?;
    Ok(ok(JourneyDeleted { journey_id, deleted: true }))
}
