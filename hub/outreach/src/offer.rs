//! sdk-offer-catalog: the offers a tenant sells or proposes, one per slug.
//! A price is an integer count of its currency's minor units (cents for
//! EUR, yen for JPY), never a float; an offer has a price and a currency
//! together, or neither. An offer is created `draft` or `active`; a draft
//! is activated; either is retired, for good. A retired offer is not
//! changed; any other move is 409.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create, list)).routes(routes!(get_offer, update)).routes(routes!(retire)).routes(routes!(activate))
}

stored_enum! {
    /// Where an offer is in its life: a `draft` is activated, a `draft` or
    /// `active` offer is retired (`POST .../retire`), for good.
    #[schema(as = OfferStatus)]
    enum OfferStatus { Draft = "draft", Active = "active", Retired = "retired" }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
struct Offer {
    offer_id: Id,
    slug: String,
    name: String,
    description: Option<String>,
    /// The price in the currency's minor units.
    price_minor: Option<i64>,
    /// ISO 4217, with `price_minor`.
    currency: Option<String>,
    status: OfferStatus,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const COLUMNS: &str = "offer_id, slug, name, description, price_minor, currency, status, created_at, updated_at";

fn valid_slug(s: &str) -> bool {
    (1..=128).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
}

#[derive(Deserialize, ToSchema)]
struct NewOffer {
    /// The caller's tenant (checked against the caller by `Body`).
    #[schema(format = "uuid")]
    #[allow(dead_code)]
    tenant_id: String,
    #[schema(max_length = 200)]
    name: String,
    /// 1 to 128 of `a-z 0-9 . _ -`, unique in the tenant.
    #[schema(max_length = 128)]
    slug: String,
    #[schema(max_length = 4000)]
    description: Option<String>,
    /// In the currency's minor units; required with `currency`.
    #[schema(minimum = 0, maximum = 1_000_000_000_000_000_i64)]
    price_minor: Option<i64>,
    /// ISO 4217 (`EUR`, `USD`, ...); required with `price_minor`.
    currency: Option<String>,
    /// `active` when absent.
    status: Option<NewStatus>,
}

/// The status an offer is created in.
#[derive(Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = OfferNewStatus)]
enum NewStatus {
    Draft,
    Active,
}

impl NewStatus {
    fn status(self) -> OfferStatus {
        match self {
            NewStatus::Draft => OfferStatus::Draft,
            NewStatus::Active => OfferStatus::Active,
        }
    }
}

/// Creates an offer.
#[utoipa::path(post, path = "/api/offers", tag = "sdk-offer-catalog", request_body = NewOffer,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "body": { "tenant_id": "{tenant_id}", "name": "race", "slug": "r-{unique}", "price_minor": 1000, "currency": "EUR" } }))),
    responses((status = 201, description = "the offer", body = Data<Offer>)))]
async fn create(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewOffer>) -> ApiResult<Created<Offer>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let name = body.name.trim();
    let slug = body.slug.trim();
    if !valid_slug(slug) {
        check.fail("slug must be 1 to 128 of a-z, 0-9, '.', '_' or '-'");
    }
    let description = Check::optional(&body.description);
    let price = body.price_minor;
    let currency = Check::optional(&body.currency);
    hub_kernel::validate::money(&mut check, "price_minor", price.is_some(), currency.as_deref());
    let status = body.status.unwrap_or(NewStatus::Active).status();
    check.finish()?;
    let now = db::now();
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO offer_offer (offer_id, tenant_id, slug, name, description, price_minor, currency, status, created_by, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) ON CONFLICT (tenant_id, slug) DO NOTHING RETURNING {COLUMNS}"
    );
    let made: Option<Offer> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(slug)
        .bind(name)
        .bind(&description)
        .bind(price)
        .bind(&currency)
        .bind(status)
        .bind(audit::actor_of(&ctx).1)
        .bind(&now)
        .fetch_optional(&mut *tx)
        .await?;
    let offer = made.ok_or_else(|| ApiError::Conflict(format!("the tenant has an offer with the slug {slug}")))?;
    let payload = json!({ "offer_id": offer.offer_id, "slug": slug, "status": status, "price_minor": price, "currency": currency });
    audit::record(&mut tx, &ctx, events::OFFER_CREATED, payload).await?;
    tx.commit().await?;
    Ok(created(offer))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Filter {
    /// When given, the caller's tenant.
    #[param(format = "uuid")]
    tenant_id: Option<String>,
    #[param(inline)]
    status: Option<OfferStatus>,
    /// One slug, exactly.
    #[param(max_length = 128)]
    slug: Option<String>,
    /// Text the name or the slug contains, in any case.
    #[param(max_length = 200)]
    q: Option<String>,
}

/// A `LIKE` pattern matching `text` anywhere, its wildcards escaped (with
/// `ESCAPE '\'`), lower-cased.
fn contains_pattern(text: &str) -> String {
    let escaped = text.to_lowercase().replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
    format!("%{escaped}%")
}

/// The tenant's offers, newest first.
#[utoipa::path(get, path = "/api/offers", tag = "sdk-offer-catalog", params(Filter, Page),
    responses((status = 200, description = "one page of offers", body = ListOf<Offer>)))]
async fn list(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<Filter>) -> ApiResult<ListOf<Offer>> {
    let status = q.status.map_or("", OfferStatus::as_str);
    ctx.check_tenant(q.tenant_id.as_deref())?;
    let slug = Check::optional(&q.slug).unwrap_or_default();
    let text = Check::optional(&q.q).map(|t| contains_pattern(&t)).unwrap_or_default();
    let listing = Listing {
        table: "offer_offer",
        columns: COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR status = $2) AND ($3 = '' OR slug = $3) \
                 AND ($4 = '' OR LOWER(name) LIKE $4 ESCAPE '\\' OR slug LIKE $4 ESCAPE '\\')",
        order: "created_at DESC, offer_id DESC",
    };
    page.list::<Offer>(&state.db.read, &listing, &[&ctx.tenant_id, status, &slug, &text]).await
}

/// One offer.
#[utoipa::path(get, path = "/api/offers/{offer_id}", tag = "sdk-offer-catalog", params(("offer_id" = String, Path, description = "the offer")),
    responses((status = 200, description = "the offer", body = Data<Offer>)))]
async fn get_offer(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Offer>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM offer_offer WHERE tenant_id = $1 AND offer_id = $2");
    let found: Option<Offer> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    Ok(ok(found.ok_or(ApiError::NotFound)?))
}

/// An offer as its changes lock it.
const OFFER: Stateful = Stateful { noun: "offer", table: "offer_offer", key: "offer_id", state: "status" };

#[derive(Deserialize, ToSchema)]
#[schema(as = OfferUpdate)]
struct Update {
    #[schema(max_length = 200)]
    name: Option<String>,
    #[schema(max_length = 4000)]
    description: Option<String>,
    /// In the currency's minor units; an offer without a price takes a
    /// `currency` with it.
    #[schema(minimum = 0, maximum = 1_000_000_000_000_000_i64)]
    price_minor: Option<i64>,
    /// ISO 4217; an offer without a price takes a `price_minor` with it.
    currency: Option<String>,
}

/// Changes an offer's name, description, price or currency (what is
/// absent stays; at least one is given). A retired offer is not changed
/// (409).
#[utoipa::path(patch, path = "/api/offers/{offer_id}", tag = "sdk-offer-catalog", request_body = Update,
    params(("offer_id" = String, Path, description = "the offer")),
    extensions(("x-concurrency" = json!({ "outcome": "independent",
        "given": [["POST", "/api/offers", { "tenant_id": "{tenant_id}", "name": "race", "slug": "r-{unique}", "price_minor": 1000, "currency": "EUR" }]],
        "body": { "price_minor": 1200, "description": "race" } }))),
    responses((status = 200, description = "the offer", body = Data<Offer>)))]
async fn update(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<Update>) -> ApiResult<Data<Offer>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // The offer's row is locked until the change is committed: changes of
    // one offer check its price and status one after another.
    let status: OfferStatus = OFFER.lock(&mut tx, &ctx.tenant_id, &id).await?.ok_or(ApiError::NotFound)?;
    let body = body.checked()?;
    let name = Check::optional(&body.name);
    let description = Check::optional(&body.description);
    let price = body.price_minor;
    let currency = Check::optional(&body.currency);
    if name.is_none() && description.is_none() && price.is_none() && currency.is_none() {
        return Err(ApiError::invalid("give at least one of name, description, price_minor, currency"));
    }
    let sql = format!("SELECT {COLUMNS} FROM offer_offer WHERE tenant_id = $1 AND offer_id = $2");
    let current: Offer = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_one(&mut *tx).await?;
    let mut check = Check::new();
    let priced = price.or(current.price_minor).is_some();
    hub_kernel::validate::money(&mut check, "price_minor", priced, currency.as_deref().or(current.currency.as_deref()));
    check.finish()?;
    if status == OfferStatus::Retired {
        return Err(ApiError::Conflict("the offer is retired: a retired offer is not changed".into()));
    }
    let sql = format!(
        "UPDATE offer_offer SET name = COALESCE($3, name), description = COALESCE($4, description), price_minor = COALESCE($5, price_minor), \
         currency = COALESCE($6, currency), updated_at = $7 WHERE tenant_id = $1 AND offer_id = $2 RETURNING {COLUMNS}"
    );
    let offer: Offer = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(&id)
        .bind(&name)
        .bind(&description)
        .bind(price)
        .bind(&currency)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "offer_id": id, "name_changed": name.is_some(), "description_changed": description.is_some(),
        "price_minor": offer.price_minor, "currency": offer.currency });
    audit::record(&mut tx, &ctx, events::OFFER_UPDATED, payload).await?;
    tx.commit().await?;
    Ok(ok(offer))
}

/// Moves an offer from one of `from` to `to` in one guarded statement:
/// of two moves at once, one moves it and the other finds it moved (409).
async fn moved(state: &AppState, ctx: &TenantCtx, id: &str, from: &str, to: OfferStatus, expected: &str, event: &str) -> ApiResult<Offer> {
    let id = path_id(id)?.to_string();
    let mut tx = state.db.begin().await?;
    let sql = format!("UPDATE offer_offer SET status = $3, updated_at = $4 WHERE tenant_id = $1 AND offer_id = $2 AND status IN ({from}) RETURNING {COLUMNS}");
    let moved: Option<Offer> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).bind(to).bind(db::now()).fetch_optional(&mut *tx).await?;
    let offer = OFFER.settle(&mut tx, &ctx.tenant_id, &id, moved, expected).await?;
    audit::record(&mut tx, ctx, event, json!({ "offer_id": id, "slug": offer.slug, "status": to })).await?;
    tx.commit().await?;
    Ok(offer)
}

/// Retires a draft or active offer, for good (409 when it is retired
/// already).
#[utoipa::path(post, path = "/api/offers/{offer_id}/retire", tag = "sdk-offer-catalog", params(("offer_id" = String, Path, description = "the offer")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins",
        "given": [["POST", "/api/offers", { "tenant_id": "{tenant_id}", "name": "race", "slug": "r-{unique}" }]] }))),
    responses((status = 200, description = "the offer, retired", body = Data<Offer>)))]
async fn retire(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Offer>> {
    let expected = "only a draft or active offer can be retired";
    Ok(ok(moved(&state, &ctx, &id, "'draft', 'active'", OfferStatus::Retired, expected, events::OFFER_RETIRED).await?))
}

/// Puts a draft offer on sale (409 for an active or retired one).
#[utoipa::path(post, path = "/api/offers/{offer_id}/activate", tag = "sdk-offer-catalog", params(("offer_id" = String, Path, description = "the offer")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins",
        "given": [["POST", "/api/offers", { "tenant_id": "{tenant_id}", "name": "race", "slug": "r-{unique}", "status": "draft" }]] }))),
    responses((status = 200, description = "the offer, active", body = Data<Offer>)))]
async fn activate(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Offer>> {
    let expected = "only a draft offer can be activated";
    Ok(ok(moved(&state, &ctx, &id, "'draft'", OfferStatus::Active, expected, events::OFFER_ACTIVATED).await?))
}
