//! sdk-data-credits: a tenant's prepaid credits. A quote prices a
//! capability against what is available (balance minus what open holds
//! reserve); a hold reserves the price, with one conditional UPDATE, so
//! concurrent holds never overdraw; settling consumes at most the hold and
//! releases the rest; releasing returns it all. Credits are granted and
//! capabilities priced by the operator (`/admin/data-credits/*`, whose
//! work is [`grant_credits_as`] and [`set_price_as`] here); a tenant reads
//! the prices.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(balance))
        .routes(routes!(prices))
        .routes(routes!(quote))
        .routes(routes!(list_holds, hold))
        .routes(routes!(get_hold))
        .routes(routes!(ledger))
        .routes(routes!(settle))
        .routes(routes!(release))
}

const MAX_CREDITS: i64 = 1_000_000_000_000;

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = DataCreditsBalance)]
struct Balance {
    balance: i64,
    /// Held by open holds.
    reserved: i64,
    /// `balance - reserved`: what a new hold may take.
    available: i64,
    updated_at: Option<Timestamp>,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = DataCreditsQuote)]
struct Quote {
    capability: String,
    quantity: i64,
    /// Credits for one use.
    unit_price: i64,
    /// Credits for `quantity` uses.
    credits: i64,
    balance: i64,
    reserved: i64,
    available: i64,
    /// Whether `credits` fits in `available` now.
    affordable: bool,
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = DataCreditsHold)]
struct Hold {
    hold_id: Id,
    capability: String,
    quantity: i64,
    /// Credits reserved.
    credits: i64,
    status: HoldStatus,
    /// Credits consumed by the settlement.
    consumed: Option<i64>,
    created_at: Timestamp,
    closed_at: Option<Timestamp>,
}

stored_enum! {
    /// Where a hold of credits is: held until settled or released.
    #[schema(as = DataCreditsHoldStatus)]
    enum HoldStatus { Held = "held", Settled = "settled", Released = "released" }
}

const HOLD_COLUMNS: &str = "hold_id, capability, quantity, credits, status, consumed, created_at, closed_at";

#[derive(Deserialize, ToSchema)]
#[schema(as = DataCreditsRequest)]
struct Use {
    /// A capability with a credit price: 1 to 128 letters, digits or
    /// `. _ : / -`.
    capability: String,
    /// Uses to price; 1 when absent.
    #[schema(minimum = 1, maximum = 1000000)]
    quantity: Option<i64>,
}

async fn account(tx: &mut Tx, tenant_id: &str) -> ApiResult<Balance> {
    let found: Option<Balance> =
        sqlx::query_as("SELECT balance, reserved, balance - reserved AS available, updated_at FROM data_credits_account WHERE tenant_id = $1")
            .bind(tenant_id)
            .fetch_optional(&mut **tx)
            .await?;
    Ok(found.unwrap_or(Balance { balance: 0, reserved: 0, available: 0, updated_at: None }))
}

/// A capability's name as prices, quotes and holds take it: 1 to 128
/// letters, digits or `. _ : / -` (a meter sku's form).
pub fn valid_capability(s: &str) -> bool {
    crate::meter::valid_sku(s)
}

/// The capability, quantity and price of a quote or hold request (a body
/// that matches its schema).
async fn priced(tx: &mut Tx, body: &Use) -> ApiResult<(String, i64, i64, i64)> {
    let capability = body.capability.trim().to_string();
    if !valid_capability(&capability) {
        return Err(ApiError::invalid("capability must be 1 to 128 letters, digits or . _ : / -"));
    }
    let quantity = body.quantity.unwrap_or(1);
    let price: Option<i64> =
        sqlx::query_scalar("SELECT credits FROM data_credits_price WHERE capability = $1").bind(&capability).fetch_optional(&mut **tx).await?;
    let price = price.ok_or_else(|| ApiError::invalid("capability has no credit price"))?;
    Ok((capability, quantity, price, price * quantity))
}

/// The tenant's credits: balance, reserved and available.
#[utoipa::path(get, path = "/api/data-credits/balance", tag = "sdk-data-credits",
    responses((status = 200, description = "the balance", body = Data<Balance>)))]
async fn balance(State(state): State<AppState>, Tenant(ctx): Tenant) -> ApiResult<Data<Balance>> {
    let mut tx = state.db.read.begin().await?;
    let b = account(&mut tx, &ctx.tenant_id).await?;
    tx.commit().await?;
    Ok(ok(b))
}

/// A capability's price, as a tenant reads it.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = DataCreditsPrice)]
struct Price {
    capability: String,
    /// Credits for one use.
    credits: i64,
    updated_at: Timestamp,
}

/// The prices are the platform's, the same for every tenant.
const PRICES: Listing = Listing { table: "data_credits_price", columns: "capability, credits, updated_at", filter: "1 = 1", order: "capability" };

/// The priced capabilities (the platform's, the same for every tenant), by
/// capability: what a quote or hold can name.
#[utoipa::path(get, path = "/api/data-credits/prices", tag = "sdk-data-credits", params(Page),
    responses((status = 200, description = "one page of prices", body = ListOf<Price>)))]
async fn prices(State(state): State<AppState>, _: Tenant, page: Page) -> ApiResult<ListOf<Price>> {
    page.list::<Price>(&state.db.read, &PRICES, &[]).await
}

/// Prices a capability before anything is held: its credit price, the
/// credits available, and whether it is affordable.
#[utoipa::path(post, path = "/api/data-credits/quotes", tag = "sdk-data-credits", request_body = Use,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "events": 0, "given": [["PUT", "/admin/data-credits/prices/q.{unique}", { "credits": 1, "operator_id": "ops-race" }], ["POST", "/admin/data-credits/grants", { "tenant_id": "{tenant_id}", "credits": 2, "reason": "race", "operator_id": "ops-race" }]], "body": { "capability": "q.{unique}", "quantity": 2 } }))),
    responses((status = 200, description = "the quote", body = Data<Quote>)))]
async fn quote(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<Use>) -> ApiResult<Data<Quote>> {
    let body = body.checked()?;
    let mut tx = state.db.read.begin().await?;
    let (capability, quantity, unit_price, credits) = priced(&mut tx, &body).await?;
    let b = account(&mut tx, &ctx.tenant_id).await?;
    tx.commit().await?;
    let affordable = credits <= b.available;
    Ok(ok(Quote { capability, quantity, unit_price, credits, balance: b.balance, reserved: b.reserved, available: b.available, affordable }))
}

// The race marker's tenant (tenant A) keeps what the group's other
// scenarios leave of their grants (a few credits), so its capability costs
// a million: of the three million granted, three holds win, whatever was
// left before.
/// Reserves a capability's price out of the available credits (409 when
/// they do not suffice).
#[utoipa::path(post, path = "/api/data-credits/holds", tag = "sdk-data-credits", request_body = Use,
    extensions(("x-concurrency" = json!({ "outcome": "capacity", "wins": 3, "given": [["PUT", "/admin/data-credits/prices/h.{unique}", { "credits": 1000000, "operator_id": "ops-race" }], ["POST", "/admin/data-credits/grants", { "tenant_id": "{tenant_id}", "credits": 3000000, "reason": "race", "operator_id": "ops-race" }]], "body": { "capability": "h.{unique}" } }))),
    responses((status = 201, description = "the hold", body = Data<Hold>)))]
async fn hold(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<Use>) -> ApiResult<Created<Hold>> {
    let body = body.checked()?;
    let mut tx = state.db.begin().await?;
    let (capability, quantity, _, credits) = priced(&mut tx, &body).await?;
    let now = db::now();
    // The check and the reservation are one statement: of two holds racing
    // for the last credits, one wins.
    let reserved = sqlx::query("UPDATE data_credits_account SET reserved = reserved + $2, updated_at = $3 WHERE tenant_id = $1 AND balance - reserved >= $2")
        .bind(&ctx.tenant_id)
        .bind(credits)
        .bind(&now)
        .execute(&mut *tx)
        .await?;
    if reserved.rows_affected() == 0 {
        let b = account(&mut tx, &ctx.tenant_id).await?;
        return Err(ApiError::Conflict(format!("insufficient credits: {credits} needed, {} available", b.available)));
    }
    let sql = format!(
        "INSERT INTO data_credits_hold (hold_id, tenant_id, capability, quantity, credits, status, created_at) VALUES ($1, $2, $3, $4, $5, 'held', $6) \
         RETURNING {HOLD_COLUMNS}"
    );
    let h: Hold = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(Id::new())
        .bind(&ctx.tenant_id)
        .bind(&capability)
        .bind(quantity)
        .bind(credits)
        .bind(&now)
        .fetch_one(&mut *tx)
        .await?;
    audit::record(&mut tx, &ctx, events::DATA_CREDITS_RESERVED, json!({ "hold_id": h.hold_id, "capability": capability, "credits": credits })).await?;
    tx.commit().await?;
    Ok(created(h))
}

/// A hold as guarded writes name it.
const HOLD: Stateful = Stateful { noun: "hold", table: "data_credits_hold", key: "hold_id", state: "status" };

/// A hold of the caller's tenant; another tenant's is 404.
async fn find(tx: &mut Tx, ctx: &TenantCtx, id: &str) -> ApiResult<Hold> {
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {HOLD_COLUMNS} FROM data_credits_hold WHERE tenant_id = $1 AND hold_id = $2");
    let found: Option<Hold> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut **tx).await?;
    found.ok_or(ApiError::NotFound)
}

/// Closes a held hold of the tenant: `consumed` credits leave the balance,
/// the whole hold leaves the reserve. 404 for another tenant's, 409 when
/// it is closed already.
async fn close(tx: &mut Tx, ctx: &TenantCtx, id: &str, status: HoldStatus, consumed: Option<i64>) -> ApiResult<Hold> {
    let current = find(tx, ctx, id).await?;
    let id = current.hold_id.to_string();
    if let Some(c) = consumed
        && c > current.credits
    {
        return Err(ApiError::invalid(format!("credits must be at most the hold's {}", current.credits)));
    }
    let now = db::now();
    let sql =
        format!("UPDATE data_credits_hold SET status = $2, consumed = $3, closed_at = $4 WHERE hold_id = $1 AND status = 'held' RETURNING {HOLD_COLUMNS}");
    let closed: Option<Hold> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&id).bind(status).bind(consumed).bind(&now).fetch_optional(&mut **tx).await?;
    // The guard decides: of two closes at once, one closes the hold and
    // the other finds it closed (409 naming its state).
    let closed = HOLD.settle(tx, &ctx.tenant_id, &id, closed, "a hold is closed once").await?;
    sqlx::query("UPDATE data_credits_account SET balance = balance - $2, reserved = reserved - $3, updated_at = $4 WHERE tenant_id = $1")
        .bind(&ctx.tenant_id)
        .bind(consumed.unwrap_or(0))
        .bind(closed.credits)
        .bind(&now)
        .execute(&mut **tx)
        .await?;
    Ok(closed)
}

#[derive(Deserialize, ToSchema)]
#[schema(as = DataCreditsSettlement)]
struct Settlement {
    /// Credits used, from 0 to the hold's (400 above it); the rest is
    /// released.
    #[schema(minimum = 0, maximum = 1000000000000.0)]
    credits: i64,
}

/// Settles a hold: consumes `credits` (at most the hold) and releases the
/// rest.
#[utoipa::path(post, path = "/api/data-credits/holds/{hold_id}/settle", tag = "sdk-data-credits", request_body = Settlement,
    params(("hold_id" = String, Path, description = "the hold")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["PUT", "/admin/data-credits/prices/s.{unique}", { "credits": 1, "operator_id": "ops-race" }], ["POST", "/admin/data-credits/grants", { "tenant_id": "{tenant_id}", "credits": 1, "reason": "race", "operator_id": "ops-race" }], ["POST", "/api/data-credits/holds", { "capability": "s.{unique}" }]], "body": { "credits": 1 } }))),
    responses((status = 200, description = "the hold, settled", body = Data<Hold>)))]
async fn settle(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<Settlement>) -> ApiResult<Data<Hold>> {
    let mut tx = state.db.begin().await?;
    find(&mut tx, &ctx, &id).await?;
    let credits = body.checked()?.credits;
    let h = close(&mut tx, &ctx, &id, HoldStatus::Settled, Some(credits)).await?;
    let payload = json!({ "hold_id": h.hold_id, "capability": h.capability, "credits": h.consumed, "released": h.credits - h.consumed.unwrap_or(0) });
    audit::record(&mut tx, &ctx, events::DATA_CREDITS_CONSUMED, payload).await?;
    tx.commit().await?;
    Ok(ok(h))
}

/// Releases a hold: its credits return to the available ones.
#[utoipa::path(post, path = "/api/data-credits/holds/{hold_id}/release", tag = "sdk-data-credits",
    params(("hold_id" = String, Path, description = "the hold")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["PUT", "/admin/data-credits/prices/r.{unique}", { "credits": 1, "operator_id": "ops-race" }], ["POST", "/admin/data-credits/grants", { "tenant_id": "{tenant_id}", "credits": 1, "reason": "race", "operator_id": "ops-race" }], ["POST", "/api/data-credits/holds", { "capability": "r.{unique}" }]] }))),
    responses((status = 200, description = "the hold, released", body = Data<Hold>)))]
async fn release(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Hold>> {
    let mut tx = state.db.begin().await?;
    let h = close(&mut tx, &ctx, &id, HoldStatus::Released, None).await?;
    audit::record(&mut tx, &ctx, events::DATA_CREDITS_RELEASED, json!({ "hold_id": h.hold_id, "capability": h.capability, "credits": h.credits })).await?;
    tx.commit().await?;
    Ok(ok(h))
}

/// A grant of credits, as the ledger keeps it, with the tenant's balance
/// right after it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = DataCreditsGrant)]
pub struct Grant {
    pub grant_id: Id,
    pub tenant_id: String,
    /// Credits granted, at least 1.
    pub credits: i64,
    pub reason: String,
    /// Who granted them, as the operator named themself.
    pub operator_id: String,
    pub created_at: Timestamp,
    /// The tenant's balance after the grant.
    pub balance: i64,
}

/// What an operator grants.
pub struct NewGrant<'a> {
    pub tenant_id: &'a str,
    pub credits: i64,
    pub reason: &'a str,
    pub operator_id: &'a str,
}

/// Grants a tenant credits (the library's door: the operator named by
/// `operator_id` is also the event's actor). See [`grant_credits_as`].
pub async fn grant_credits(db: &Db, tenant_id: &str, credits: i64, operator_id: &str, reason: &str) -> ApiResult<Grant> {
    grant_credits_as(db, operator_id, NewGrant { tenant_id, credits, reason, operator_id }).await
}

/// Grants a tenant credits (`POST /admin/data-credits/grants`' work; no
/// tenant route grants): the grant goes into the ledger, the balance grows
/// by it in one upsert (concurrent grants add up, none is lost), and
/// `data-credits.credit.granted.v1` goes into the tenant's chain with
/// `actor` (the operator credential) as its actor, all in one transaction.
/// An unknown tenant is the foreign key's 400.
pub async fn grant_credits_as(db: &Db, actor: &str, g: NewGrant<'_>) -> ApiResult<Grant> {
    let mut check = Check::new();
    if !(1..=MAX_CREDITS).contains(&g.credits) {
        check.fail(format!("credits must be an integer from 1 to {MAX_CREDITS}"));
    }
    if g.operator_id.trim().is_empty() || g.reason.trim().is_empty() {
        check.fail("operator_id and reason are required");
    }
    check.finish()?;
    let now = Timestamp::now();
    let grant_id = Id::new();
    let mut tx = db.begin().await?;
    sqlx::query("INSERT INTO data_credits_grant (grant_id, tenant_id, credits, reason, operator_id, created_at) VALUES ($1, $2, $3, $4, $5, $6)")
        .bind(grant_id)
        .bind(g.tenant_id)
        .bind(g.credits)
        .bind(g.reason)
        .bind(g.operator_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    let balance: i64 = sqlx::query_scalar(
        "INSERT INTO data_credits_account (tenant_id, balance, reserved, updated_at) VALUES ($1, $2, 0, $3) \
         ON CONFLICT (tenant_id) DO UPDATE SET balance = data_credits_account.balance + excluded.balance, updated_at = excluded.updated_at RETURNING balance",
    )
    .bind(g.tenant_id)
    .bind(g.credits)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    let grant = Grant {
        grant_id,
        tenant_id: g.tenant_id.to_string(),
        credits: g.credits,
        reason: g.reason.to_string(),
        operator_id: g.operator_id.to_string(),
        created_at: now,
        balance,
    };
    let payload = json!({
        "grant_id": grant.grant_id, "credits": grant.credits, "reason": grant.reason, "operator_id": grant.operator_id, "balance": balance,
    });
    audit::record_operator_in(&mut tx, g.tenant_id, actor, events::DATA_CREDITS_GRANTED, payload).await?;
    tx.commit().await?;
    Ok(grant)
}

/// A capability's price as the operator set it.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = DataCreditsPriceRecord)]
pub struct PriceRecord {
    pub capability: String,
    /// Credits for one use.
    pub credits: i64,
    /// The operator who set it last.
    pub updated_by: String,
    pub updated_at: Timestamp,
}

const PRICE_RECORD_COLUMNS: &str = "capability, credits, updated_by, updated_at";

/// Sets a capability's price in credits (the library's door: the operator
/// named by `operator_id` is also the event's actor). See [`set_price_as`].
pub async fn set_price(db: &Db, capability: &str, credits: i64, operator_id: &str) -> ApiResult<(PriceRecord, Written)> {
    set_price_as(db, operator_id, capability, credits, operator_id).await
}

/// Sets a capability's price in credits (`PUT
/// /admin/data-credits/prices/{capability}`' work): the first set of a
/// capability inserts its price (`Written::Made`), any other, concurrent or
/// later, replaces it (`Written::Found`). Records
/// `data-credits.price.set.v1` in the platform chain (a price is no
/// tenant's), `actor` (the operator credential) as its actor. Quotes and
/// holds made before keep the price they were made at.
pub async fn set_price_as(db: &Db, actor: &str, capability: &str, credits: i64, operator_id: &str) -> ApiResult<(PriceRecord, Written)> {
    let mut check = Check::new();
    if !valid_capability(capability) {
        check.fail("capability must be 1 to 128 letters, digits or . _ : / -");
    }
    if !(0..=MAX_CREDITS).contains(&credits) {
        check.fail(format!("credits must be an integer from 0 to {MAX_CREDITS}"));
    }
    if operator_id.trim().is_empty() {
        check.fail("operator_id is required");
    }
    check.finish()?;
    let now = db::now();
    let insert = format!(
        "INSERT INTO data_credits_price (capability, credits, updated_by, updated_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (capability) DO NOTHING RETURNING {PRICE_RECORD_COLUMNS}"
    );
    let replace =
        format!("UPDATE data_credits_price SET credits = $2, updated_by = $3, updated_at = $4 WHERE capability = $1 RETURNING {PRICE_RECORD_COLUMNS}");
    let mut tx = db.begin().await?;
    let (price, written): (PriceRecord, _) = insert_or_read(
        &mut tx,
        sqlx::query_as(sqlx::AssertSqlSafe(insert)).bind(capability).bind(credits).bind(operator_id).bind(&now),
        sqlx::query_as(sqlx::AssertSqlSafe(replace)).bind(capability).bind(credits).bind(operator_id).bind(&now),
    )
    .await?;
    let payload = json!({ "capability": capability, "credits": credits, "operator_id": operator_id, "replaced": written == Written::Found });
    audit::record_operator(&mut tx, actor, events::DATA_CREDITS_PRICE_SET, payload).await?;
    tx.commit().await?;
    Ok((price, written))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct HoldFilter {
    #[param(inline)]
    status: Option<HoldStatus>,
    /// Only holds of this capability.
    #[param(max_length = 128, pattern = r"^[A-Za-z0-9._:/-]{1,128}$")]
    capability: Option<String>,
}

const HOLDS: Listing = Listing {
    table: "data_credits_hold",
    columns: HOLD_COLUMNS,
    filter: "tenant_id = $1 AND ($2 = '' OR status = $2) AND ($3 = '' OR capability = $3)",
    order: "created_at DESC, hold_id DESC",
};

/// The tenant's holds, newest first (`status=held`: the open ones, whose
/// credits stay reserved until settled or released).
#[utoipa::path(get, path = "/api/data-credits/holds", tag = "sdk-data-credits", params(HoldFilter, Page),
    responses((status = 200, description = "one page of holds", body = ListOf<Hold>)))]
async fn list_holds(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<HoldFilter>) -> ApiResult<ListOf<Hold>> {
    static CAPABILITY: Pattern = Pattern::query::<HoldFilter>("capability");
    let capability = q.capability.as_deref().unwrap_or("");
    if q.capability.is_some() && !CAPABILITY.is_match(capability) {
        return Err(ApiError::invalid("capability must be 1 to 128 letters, digits or . _ : / -"));
    }
    let status = q.status.map_or("", HoldStatus::as_str);
    page.list::<Hold>(&state.db.read, &HOLDS, &[&ctx.tenant_id, status, capability]).await
}

/// A hold of the caller's tenant; another tenant's is 404.
#[utoipa::path(get, path = "/api/data-credits/holds/{hold_id}", tag = "sdk-data-credits", params(("hold_id" = String, Path, description = "the hold")),
    responses((status = 200, description = "the hold", body = Data<Hold>)))]
async fn get_hold(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Hold>> {
    let mut tx = state.db.read.begin().await?;
    let h = find(&mut tx, &ctx, &id).await?;
    tx.commit().await?;
    Ok(ok(h))
}

stored_enum! {
    /// What moved the balance: a grant added credits, a settlement
    /// consumed them.
    #[schema(as = DataCreditsLedgerKind)]
    enum LedgerKind { Grant = "grant", Consumption = "consumption" }
}

/// One movement of the tenant's balance.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = DataCreditsLedgerEntry)]
struct LedgerEntry {
    /// The grant's id, or the settled hold's.
    entry_id: Id,
    kind: LedgerKind,
    /// Signed: a grant's credits are positive, a consumption's negative.
    credits: i64,
    /// A grant's reason.
    reason: Option<String>,
    /// Who granted (a grant).
    operator_id: Option<String>,
    /// The capability consumed (a consumption).
    capability: Option<String>,
    created_at: Timestamp,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct LedgerFilter {
    #[param(inline)]
    kind: Option<LedgerKind>,
}

/// Grants, and the credits consumed by settled holds (a release or a hold
/// settled for 0 moves no credit), as one ledger.
const LEDGER: Listing = Listing {
    table: "(SELECT grant_id AS entry_id, 'grant' AS kind, credits, reason, operator_id, CAST(NULL AS TEXT) AS capability, created_at, tenant_id \
            FROM data_credits_grant UNION ALL SELECT hold_id, 'consumption', -consumed, CAST(NULL AS TEXT), CAST(NULL AS TEXT), capability, closed_at, tenant_id \
            FROM data_credits_hold WHERE status = 'settled' AND consumed > 0) ledger",
    columns: "entry_id, kind, credits, reason, operator_id, capability, created_at",
    filter: "tenant_id = $1 AND ($2 = '' OR kind = $2)",
    order: "created_at DESC, entry_id DESC",
};

/// The tenant's credit ledger, newest first: each grant (positive) and
/// each settlement's consumed credits (negative); their sum is the
/// balance.
#[utoipa::path(get, path = "/api/data-credits/ledger", tag = "sdk-data-credits", params(LedgerFilter, Page),
    responses((status = 200, description = "one page of the ledger", body = ListOf<LedgerEntry>)))]
async fn ledger(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<LedgerFilter>) -> ApiResult<ListOf<LedgerEntry>> {
    let kind = q.kind.map_or("", LedgerKind::as_str);
    page.list::<LedgerEntry>(&state.db.read, &LEDGER, &[&ctx.tenant_id, kind]).await
}
