//! sdk-crm deals: what the tenant may sell, about a contact of its CRM, a
//! company or both, worth an amount in a currency's minor units (cents for
//! EUR, yen for JPY; with its ISO 4217 code, or neither), owned by a
//! persona. A deal is `open` until it is won or lost, each final; only an
//! open deal is changed. Handoffs (sdk-handoff) name the deal handed over.

use hub_identity::personas;
use hub_kernel::prelude::*;

use crate::crm::{contact_exists, filtered};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_deal, list_deals)).routes(routes!(get_deal, update_deal)).routes(routes!(win_deal)).routes(routes!(lose_deal))
}

stored_enum! {
    /// Where a deal is: `open` until it is `won` or `lost`, both final.
    #[schema(as = CrmDealStage)]
    pub enum DealStage { Open = "open", Won = "won", Lost = "lost" }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = CrmDeal)]
struct Deal {
    deal_id: Id,
    name: String,
    /// The contact of the tenant the deal is with.
    contact_id: Option<Id>,
    /// The company the deal is with.
    company: Option<String>,
    /// The amount in its currency's minor units (cents for EUR, yen for JPY).
    amount_minor: Option<i64>,
    /// ISO 4217, with `amount_minor`.
    currency: Option<String>,
    stage: DealStage,
    owner_persona_id: Option<String>,
    /// The reason given when the deal was won or lost.
    stage_reason: Option<String>,
    /// When the deal was won or lost (null while open).
    closed_at: Option<Timestamp>,
    created_by: String,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const COLUMNS: &str =
    "deal_id, name, contact_id, company, amount_minor, currency, stage, owner_persona_id, stage_reason, closed_at, created_by, created_at, updated_at";

/// The tenant's deals, newest first; `list_deals` composes the filter.
const DEALS: Listing = Listing { table: "crm_deal", columns: COLUMNS, filter: "tenant_id = $1", order: "created_at DESC, deal_id DESC" };

/// A deal as guarded writes name it.
const DEAL: Stateful = Stateful { noun: "deal", table: "crm_deal", key: "deal_id", state: "stage" };

/// The references of a deal, checked in the write's transaction: a
/// contact and an owner of the tenant (400 otherwise).
async fn check_refs(tx: &mut Tx, tenant_id: &str, contact: Option<&str>, owner: Option<&str>) -> ApiResult<()> {
    let mut check = Check::new();
    if let Some(c) = contact
        && !contact_exists(tx, tenant_id, c).await?
    {
        check.fail("contact_id is not a contact of this tenant");
    }
    if let Some(p) = owner
        && !personas::exists_in_tenant(&mut **tx, tenant_id, p).await?
    {
        check.fail("owner_persona_id is not a persona of this tenant");
    }
    check.finish()
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewCrmDeal)]
struct NewDeal {
    #[schema(max_length = 200)]
    name: String,
    /// A contact of the tenant; a deal names a contact, a company or both.
    #[schema(format = "uuid")]
    contact_id: Option<String>,
    /// The company the deal is with; a deal names a contact, a company or both.
    #[schema(max_length = 200)]
    company: Option<String>,
    /// In the currency's minor units; required with `currency`.
    #[schema(minimum = 0, maximum = 1_000_000_000_000_000_i64)]
    amount_minor: Option<i64>,
    /// ISO 4217 (`EUR`, `USD`, ...); required with `amount_minor`.
    currency: Option<String>,
    /// A persona of the tenant.
    #[schema(format = "uuid")]
    owner_persona_id: Option<String>,
}

/// Creates a deal, `open`.
#[utoipa::path(post, path = "/api/crm/deals", tag = "sdk-crm", request_body = NewDeal,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "name": "race", "company": "race", "amount_minor": 1000, "currency": "EUR" } }))),
    responses((status = 201, description = "the deal, open", body = Data<Deal>)))]
async fn create_deal(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewDeal>) -> ApiResult<Created<Deal>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let name = body.name.trim().to_string();
    let contact = canonical_uuid_opt(&body.contact_id);
    let company = Check::optional(&body.company);
    if contact.is_none() && company.is_none() {
        check.fail("a deal needs a contact_id or a company");
    }
    let currency = Check::optional(&body.currency);
    hub_kernel::validate::money(&mut check, "amount_minor", body.amount_minor.is_some(), currency.as_deref());
    let owner = canonical_uuid_opt(&body.owner_persona_id);
    check.finish()?;
    let mut tx = state.db.begin().await?;
    check_refs(&mut tx, &ctx.tenant_id, contact.as_deref(), owner.as_deref()).await?;
    let sql = format!(
        "INSERT INTO crm_deal (deal_id, tenant_id, name, contact_id, company, amount_minor, currency, stage, owner_persona_id, created_by, created_at, \
         updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 'open', $8, $9, $10, $10) RETURNING {COLUMNS}"
    );
    let deal: Deal = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&name)
        .bind(&contact)
        .bind(&company)
        .bind(body.amount_minor)
        .bind(&currency)
        .bind(&owner)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({
        "deal_id": deal.deal_id, "contact_id": contact, "owner_persona_id": owner, "amount_minor": deal.amount_minor, "currency": deal.currency,
        "stage": deal.stage,
    });
    audit::record(&mut tx, &ctx, events::CRM_DEAL_CREATED, payload).await?;
    tx.commit().await?;
    Ok(created(deal))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct DealQuery {
    /// Only deals at this stage.
    #[param(inline)]
    stage: Option<DealStage>,
    /// Only deals owned by this persona.
    #[param(format = "uuid")]
    owner_persona_id: Option<String>,
    /// Only the deals with this contact.
    #[param(format = "uuid")]
    contact_id: Option<String>,
}

/// The tenant's deals, newest first.
#[utoipa::path(get, path = "/api/crm/deals", tag = "sdk-crm", params(DealQuery, Page),
    responses((status = 200, description = "one page of deals", body = ListOf<Deal>)))]
async fn list_deals(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<DealQuery>) -> ApiResult<ListOf<Deal>> {
    let owner = canonical_uuid_opt(&q.owner_persona_id);
    let contact = canonical_uuid_opt(&q.contact_id);
    let conditions =
        [(" AND stage = $#", q.stage.map(DealStage::as_str)), (" AND owner_persona_id = $#", owner.as_deref()), (" AND contact_id = $#", contact.as_deref())];
    filtered(&state, &ctx, page, &DEALS, &conditions).await
}

async fn find_deal<'e, E>(exec: E, tenant_id: &str, id: &str) -> ApiResult<Deal>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let sql = format!("SELECT {COLUMNS} FROM crm_deal WHERE tenant_id = $1 AND deal_id = $2");
    let found: Option<Deal> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(id).fetch_optional(exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// A deal.
#[utoipa::path(get, path = "/api/crm/deals/{deal_id}", tag = "sdk-crm", params(("deal_id" = String, Path, description = "the deal")),
    responses((status = 200, description = "the deal", body = Data<Deal>)))]
async fn get_deal(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Deal>> {
    let id = path_id(&id)?.to_string();
    Ok(ok(find_deal(&state.db.read, &ctx.tenant_id, &id).await?))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = CrmDealUpdate)]
struct DealUpdate {
    /// Not blank.
    #[schema(max_length = 200)]
    name: Option<String>,
    /// A contact of the tenant.
    #[schema(format = "uuid")]
    contact_id: Option<String>,
    /// Blank clears it (the deal keeps a contact or a company).
    #[schema(max_length = 200)]
    company: Option<String>,
    /// In the currency's minor units; a deal without an amount takes a
    /// `currency` with it.
    #[schema(minimum = 0, maximum = 1_000_000_000_000_000_i64)]
    amount_minor: Option<i64>,
    /// ISO 4217; a deal without an amount takes an `amount_minor` with it.
    currency: Option<String>,
    /// A persona of the tenant.
    #[schema(format = "uuid")]
    owner_persona_id: Option<String>,
}

/// Changes an open deal's name, contact, company, amount, currency or
/// owner (what is absent stays; at least one is given). A won or lost deal
/// is not changed (409). `crm.deal.updated.v1` names the fields given.
#[utoipa::path(patch, path = "/api/crm/deals/{deal_id}", tag = "sdk-crm", request_body = DealUpdate,
    params(("deal_id" = String, Path, description = "the deal")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/crm/deals", { "name": "race", "company": "race" }]],
        "body": { "amount_minor": 1200, "currency": "EUR" } }))),
    responses((status = 200, description = "the deal", body = Data<Deal>),
        (status = 409, description = "Conflict: the deal is won or lost", body = ErrorBody)))]
async fn update_deal(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<DealUpdate>) -> ApiResult<Data<Deal>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // The deal's row is locked until the change is committed: changes of
    // one deal read its stage and amount one after another. Another
    // tenant's deal is not found, whatever the body.
    let stage: DealStage = DEAL.lock(&mut tx, &ctx.tenant_id, &id).await?.ok_or(ApiError::NotFound)?;
    let body = body.checked()?;
    let current = find_deal(&mut *tx, &ctx.tenant_id, &id).await?;
    let mut check = Check::new();
    let name = body.name.as_deref().map(str::trim);
    if name == Some("") {
        check.fail("name must not be blank");
    }
    let contact = canonical_uuid_opt(&body.contact_id);
    let company = body.company.is_some().then(|| Check::optional(&body.company));
    let currency = Check::optional(&body.currency);
    let given: Vec<&str> = [
        ("name", name.is_some()),
        ("contact_id", contact.is_some()),
        ("company", company.is_some()),
        ("amount_minor", body.amount_minor.is_some()),
        ("currency", currency.is_some()),
        ("owner_persona_id", body.owner_persona_id.is_some()),
    ]
    .into_iter()
    .filter_map(|(field, is)| is.then_some(field))
    .collect();
    if given.is_empty() {
        check.fail("give at least one of name, contact_id, company, amount_minor, currency, owner_persona_id");
    }
    let contact = contact.or_else(|| current.contact_id.map(|c| c.to_string()));
    let company = company.unwrap_or_else(|| current.company.clone());
    if contact.is_none() && company.is_none() {
        check.fail("a deal needs a contact_id or a company");
    }
    let amount = body.amount_minor.or(current.amount_minor);
    let currency = currency.or_else(|| current.currency.clone());
    hub_kernel::validate::money(&mut check, "amount_minor", amount.is_some(), currency.as_deref());
    let owner = canonical_uuid_opt(&body.owner_persona_id);
    check.finish()?;
    if stage != DealStage::Open {
        return Err(ApiError::Conflict(format!("the deal is {stage}: only an open deal can be changed")));
    }
    let given_contact = canonical_uuid_opt(&body.contact_id);
    check_refs(&mut tx, &ctx.tenant_id, given_contact.as_deref(), owner.as_deref()).await?;
    let owner = owner.or_else(|| current.owner_persona_id.clone());
    let name = name.map_or_else(|| current.name.clone(), str::to_string);
    let sql = format!(
        "UPDATE crm_deal SET name = $3, contact_id = $4, company = $5, amount_minor = $6, currency = $7, owner_persona_id = $8, updated_at = $9 \
         WHERE tenant_id = $1 AND deal_id = $2 AND stage = 'open' RETURNING {COLUMNS}"
    );
    let deal: Deal = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(&id)
        .bind(&name)
        .bind(&contact)
        .bind(&company)
        .bind(amount)
        .bind(&currency)
        .bind(&owner)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "deal_id": id, "fields": given, "amount_minor": deal.amount_minor, "currency": deal.currency, "stage": deal.stage });
    audit::record(&mut tx, &ctx, events::CRM_DEAL_UPDATED, payload).await?;
    tx.commit().await?;
    Ok(ok(deal))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = CrmDealClose)]
struct DealClose {
    /// Why the deal was won or lost (kept on the deal, not in the event).
    #[schema(max_length = 2000)]
    reason: Option<String>,
}

/// Closes an open deal as `to` in one guarded statement, after its row is
/// found (another tenant's deal is 404 before the body is read): of two
/// closes at once, one closes it and the other finds it closed (409).
async fn close(state: &AppState, ctx: &TenantCtx, id: &str, body: Body<DealClose>, to: DealStage, event: &str) -> ApiResult<Deal> {
    let id = path_id(id)?.to_string();
    let mut tx = state.db.begin().await?;
    DEAL.state_of(&mut tx, &ctx.tenant_id, &id).await?.ok_or(ApiError::NotFound)?;
    let body = body.checked()?;
    let reason = Check::optional(&body.reason);
    let now = db::now();
    let sql = format!(
        "UPDATE crm_deal SET stage = $3, stage_reason = $4, closed_at = $5, updated_at = $5 WHERE tenant_id = $1 AND deal_id = $2 AND stage = 'open' \
         RETURNING {COLUMNS}"
    );
    let closed: Option<Deal> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).bind(to).bind(&reason).bind(&now).fetch_optional(&mut *tx).await?;
    let deal = DEAL.settle(&mut tx, &ctx.tenant_id, &id, closed, &format!("only an open deal can be {to}")).await?;
    let payload = json!({
        "deal_id": id, "stage": to, "contact_id": deal.contact_id, "owner_persona_id": deal.owner_persona_id, "amount_minor": deal.amount_minor,
        "currency": deal.currency, "closed_at": now,
    });
    audit::record(&mut tx, ctx, event, payload).await?;
    tx.commit().await?;
    Ok(deal)
}

/// Marks an open deal won, for good (409 when it is won or lost already).
#[utoipa::path(post, path = "/api/crm/deals/{deal_id}/won", tag = "sdk-crm", request_body = DealClose,
    params(("deal_id" = String, Path, description = "the deal")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/crm/deals", { "name": "race", "company": "race" }]] }))),
    responses((status = 200, description = "the deal, won", body = Data<Deal>),
        (status = 409, description = "Conflict: the deal is won or lost already", body = ErrorBody)))]
async fn win_deal(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<DealClose>) -> ApiResult<Data<Deal>> {
    Ok(ok(close(&state, &ctx, &id, body, DealStage::Won, events::CRM_DEAL_WON).await?))
}

/// Marks an open deal lost, for good (409 when it is won or lost already).
#[utoipa::path(post, path = "/api/crm/deals/{deal_id}/lost", tag = "sdk-crm", request_body = DealClose,
    params(("deal_id" = String, Path, description = "the deal")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/crm/deals", { "name": "race", "company": "race" }]],
        "body": { "reason": "race" } }))),
    responses((status = 200, description = "the deal, lost", body = Data<Deal>),
        (status = 409, description = "Conflict: the deal is won or lost already", body = ErrorBody)))]
async fn lose_deal(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<DealClose>) -> ApiResult<Data<Deal>> {
    Ok(ok(close(&state, &ctx, &id, body, DealStage::Lost, events::CRM_DEAL_LOST).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_amount_has_a_known_currency_and_both_or_neither() {
        let problems = |amount: Option<i64>, currency| {
            let mut check = Check::new();
            hub_kernel::validate::money(&mut check, "amount_minor", amount.is_some(), currency);
            match check.finish() {
                Ok(()) => Vec::new(),
                Err(ApiError::Validation(details)) => details,
                Err(e) => vec![e.to_string()],
            }
        };
        assert!(problems(None, None).is_empty());
        assert!(problems(Some(100), Some("EUR")).is_empty());
        assert_eq!(problems(Some(100), None), ["currency is required with amount_minor"]);
        assert_eq!(problems(None, Some("EUR")), ["amount_minor is required with currency"]);
        assert_eq!(problems(Some(1), Some("EURO")), ["currency must be an ISO 4217 code (EUR, USD, ...)"]);
    }
}
