//! sdk-payment: payment methods and charges. A method keeps the provider's
//! token and the card's display facts (brand, last four, expiry), never its
//! number: anything that looks like a card number is refused. A charge is
//! captured or declined by the method's provider, once per idempotency key.
//! The default provider is `sandbox`, which decides from documented test
//! tokens as processors' test modes do.

use std::{future::Future, pin::Pin};

use axum::response::IntoResponse;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_methods, store_method))
        .routes(routes!(get_method, detach_method))
        .routes(routes!(list_charges, charge))
        .routes(routes!(get_charge))
}

stored_enum! {
    /// A card's brand.
    #[schema(as = PaymentCardBrand)]
    enum Brand {
        Visa = "visa",
        Mastercard = "mastercard",
        Amex = "amex",
        Discover = "discover",
        Jcb = "jcb",
        Diners = "diners",
        Unionpay = "unionpay",
    }
}

stored_enum! {
    /// What the provider made of a charge.
    #[schema(as = PaymentChargeStatus)]
    enum ChargeStatus { Captured = "captured", Declined = "declined" }
}

/// What a provider answers to a charge.
pub struct ProviderResult {
    /// The provider's reference for the attempt.
    pub reference: String,
    /// `None` when captured, else the decline code.
    pub decline_code: Option<String>,
}

/// A payment processor. A real one calls out, hence the future.
pub trait PaymentProvider: Send + Sync {
    fn name(&self) -> &'static str;
    /// Whether the provider knows the token (checked when a method is stored).
    fn knows(&self, token: &str) -> bool;
    /// Charges once per `idempotency_key` (the tenant's id and the
    /// client's key): concurrent first uses of one key both reach the
    /// provider, which must charge the card at most once for it, as
    /// processors' own idempotency keys do.
    fn charge<'a>(
        &'a self,
        token: &'a str,
        amount: i64,
        currency: &'a str,
        idempotency_key: &'a str,
    ) -> Pin<Box<dyn Future<Output = ApiResult<ProviderResult>> + Send + 'a>>;
}

/// The test tokens of the sandbox and the decline each one causes (`None`:
/// captured). Listed in docs/compatibility.md.
pub const SANDBOX_TOKENS: [(&str, Option<&str>); 7] = [
    ("tok_visa", None),
    ("tok_mastercard", None),
    ("tok_amex", None),
    ("tok_chargeDeclined", Some("card_declined")),
    ("tok_insufficientFunds", Some("insufficient_funds")),
    ("tok_expiredCard", Some("expired_card")),
    ("tok_processingError", Some("processing_error")),
];

/// The default provider: decides from the token alone, moves no money.
pub struct Sandbox;

impl PaymentProvider for Sandbox {
    fn name(&self) -> &'static str {
        "sandbox"
    }
    fn knows(&self, token: &str) -> bool {
        SANDBOX_TOKENS.iter().any(|(t, _)| *t == token)
    }
    fn charge<'a>(&'a self, token: &'a str, _: i64, _: &'a str, _: &'a str) -> Pin<Box<dyn Future<Output = ApiResult<ProviderResult>> + Send + 'a>> {
        Box::pin(async move {
            let decline = SANDBOX_TOKENS.iter().find(|(t, _)| *t == token).map_or(Some("invalid_token"), |(_, d)| *d);
            Ok(ProviderResult { reference: format!("sbx_{}", db::new_id().replace('-', "")), decline_code: decline.map(str::to_string) })
        })
    }
}

/// The provider a method names.
fn provider(name: &str) -> ApiResult<&'static dyn PaymentProvider> {
    match name {
        "sandbox" => Ok(&Sandbox),
        other => Err(ApiError::Internal(anyhow::anyhow!("unknown payment provider {other}"))),
    }
}

/// Whether the text holds a card number: 13 to 19 digits (spaces and
/// dashes between them allowed) passing the Luhn check.
pub fn looks_like_pan(text: &str) -> bool {
    let digits: Vec<u32> = text.chars().filter(|c| !matches!(c, ' ' | '-')).map(|c| c.to_digit(10).unwrap_or(99)).collect();
    digits.split(|d| *d == 99).any(|run| (13..=19).contains(&run.len()) && luhn(run))
}

fn luhn(digits: &[u32]) -> bool {
    let sum: u32 = digits.iter().rev().enumerate().map(|(i, d)| if i % 2 == 1 { if d * 2 > 9 { d * 2 - 9 } else { d * 2 } } else { *d }).sum();
    sum.is_multiple_of(10)
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = PaymentMethod)]
struct Method {
    payment_method_id: Id,
    /// `sandbox`.
    provider: String,
    brand: Brand,
    last4: String,
    exp_month: i64,
    exp_year: i64,
    label: Option<String>,
    created_at: Timestamp,
}

const METHOD_COLUMNS: &str = "method_id AS payment_method_id, provider, brand, last4, exp_month, exp_year, label, created_at";

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = PaymentCharge)]
struct Charge {
    charge_id: Id,
    payment_method_id: Id,
    /// Minor units of `currency`.
    amount: i64,
    currency: String,
    description: Option<String>,
    idempotency_key: String,
    provider: String,
    provider_reference: String,
    status: ChargeStatus,
    /// Why the provider declined (`card_declined`, `insufficient_funds`, ...).
    decline_code: Option<String>,
    created_at: Timestamp,
}

const CHARGE_COLUMNS: &str =
    "charge_id, payment_method_id, amount, currency, description, idempotency_key, provider, provider_reference, status, decline_code, created_at";

#[derive(Deserialize, ToSchema)]
#[schema(as = NewPaymentMethod)]
struct NewMethod {
    /// The provider's token for the card (a sandbox test token), never its number.
    token: String,
    brand: Brand,
    /// The card's last four digits.
    last4: String,
    #[schema(minimum = 1, maximum = 12)]
    exp_month: i64,
    /// Not in the past, with `exp_month`.
    #[schema(minimum = 2000, maximum = 2100)]
    exp_year: i64,
    #[schema(max_length = 200)]
    label: Option<String>,
}

/// Stores a payment method: the provider's token and the card's display
/// facts. A card number anywhere is 400.
#[utoipa::path(post, path = "/api/payments/methods", tag = "sdk-payment", request_body = NewMethod,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "token": "tok_visa", "brand": "visa", "last4": "4242", "exp_month": 12, "exp_year": 2099 } }))),
    responses((status = 201, description = "the method", body = Data<Method>)))]
async fn store_method(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewMethod>) -> ApiResult<Created<Method>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let token = body.token.trim().to_string();
    let brand = body.brand;
    let last4 = body.last4.trim().to_string();
    let label = Check::optional(&body.label);
    if [&token, &last4].into_iter().chain(label.as_ref()).any(|t| looks_like_pan(t)) {
        check.fail("a card number is never stored: send the provider's token");
    } else if !Sandbox.knows(&token) {
        check.fail(format!("token is not a token of the sandbox provider (one of: {})", SANDBOX_TOKENS.map(|(t, _)| t).join(", ")));
    }
    if last4.len() != 4 || !last4.bytes().all(|b| b.is_ascii_digit()) {
        check.fail("last4 must be four digits");
    }
    let (month, year) = (body.exp_month, body.exp_year);
    let today = chrono::Utc::now().date_naive();
    if (year, month) < (i64::from(chrono::Datelike::year(&today)), i64::from(chrono::Datelike::month(&today))) {
        check.fail(format!("the card expired in {month:02}/{year}"));
    }
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO payment_method (method_id, tenant_id, provider, token, brand, last4, exp_month, exp_year, label, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING {METHOD_COLUMNS}"
    );
    let m: Method = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(Sandbox.name())
        .bind(&token)
        .bind(brand)
        .bind(&last4)
        .bind(month)
        .bind(year)
        .bind(&label)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    audit::record(&mut tx, &ctx, events::PAYMENT_METHOD_STORED, json!({ "payment_method_id": m.payment_method_id, "provider": m.provider, "brand": brand }))
        .await?;
    tx.commit().await?;
    Ok(created(m))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewPaymentCharge)]
struct NewCharge {
    /// Minor units (cents, yen).
    #[schema(minimum = 1, maximum = 1000000000000.0)]
    amount: i64,
    /// ISO 4217, three capital letters.
    #[schema(pattern = r"^[A-Z]{3}$")]
    currency: String,
    /// A payment method of the caller's tenant.
    #[schema(format = "uuid")]
    payment_method_id: String,
    /// Never a card number.
    #[schema(max_length = 1000)]
    description: Option<String>,
    /// A repeat answers the first charge.
    #[schema(max_length = 200)]
    idempotency_key: String,
}

async fn charge_by_key(tx: &mut Tx, tenant_id: &str, key: &str) -> ApiResult<Option<Charge>> {
    let sql = format!("SELECT {CHARGE_COLUMNS} FROM payment_charge WHERE tenant_id = $1 AND idempotency_key = $2");
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(key).fetch_optional(&mut **tx).await?)
}

/// The first charge of a key, when the repeat asks for the same charge.
fn repeat(first: Charge, method: &str, amount: i64, currency: &str) -> ApiResult<Response> {
    if first.payment_method_id != *method || (first.amount, first.currency.as_str()) != (amount, currency) {
        return Err(ApiError::Conflict("idempotency_key was used for another charge (method, amount or currency differ)".into()));
    }
    Ok(ok(first).into_response())
}

/// Captures a charge against a stored method: 201 when captured, 200 with
/// `declined` and the provider's code otherwise; a repeated key answers
/// the first charge (200).
#[utoipa::path(post, path = "/api/payments/charges", tag = "sdk-payment", request_body = NewCharge,
    extensions(("x-concurrency" = json!({ "outcome": "first-creates", "events": 1, "given": [["POST", "/api/payments/methods", { "token": "tok_visa", "brand": "visa", "last4": "4242", "exp_month": 12, "exp_year": 2099 }]], "body": { "amount": 1250, "currency": "EUR", "payment_method_id": "{payment_method_id}", "idempotency_key": "k-{unique}" } }))),
    responses((status = 201, description = "the charge, captured", body = Data<Charge>),
        (status = 200, description = "the charge, declined, or the first charge of the key", body = Data<Charge>)))]
async fn charge(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewCharge>) -> ApiResult<Response> {
    let body = body.checked()?;
    let mut check = Check::new();
    let amount = body.amount;
    static CURRENCY: Pattern = Pattern::of::<NewCharge>("currency");
    let currency = body.currency.clone();
    if !CURRENCY.is_match(&currency) {
        check.fail("currency must be an ISO 4217 code (three capital letters)");
    }
    let method_id = canonical_uuid(&body.payment_method_id);
    let description = Check::optional(&body.description);
    if description.as_deref().is_some_and(looks_like_pan) {
        check.fail("a card number is never stored: description holds one");
    }
    let key = body.idempotency_key.trim().to_string();
    check.finish()?;
    let mut tx = state.db.begin().await?;
    if let Some(first) = charge_by_key(&mut tx, &ctx.tenant_id, &key).await? {
        return repeat(first, &method_id, amount, &currency);
    }
    let found: Option<(String, String)> =
        sqlx::query_as("SELECT provider, token FROM payment_method WHERE tenant_id = $1 AND method_id = $2 AND detached_at IS NULL")
            .bind(&ctx.tenant_id)
            .bind(&method_id)
            .fetch_optional(&mut *tx)
            .await?;
    let (provider_name, token) = found.ok_or_else(|| ApiError::invalid("payment_method_id is not a payment method of the tenant"))?;
    tx.commit().await?;

    // The provider is called outside any transaction (a real one answers
    // over the network).
    let p = provider(&provider_name)?;
    // The key passed on is the tenant's: two tenants' equal keys are two charges.
    let result = p.charge(&token, amount, &currency, &format!("{}:{key}", ctx.tenant_id)).await?;
    let status = if result.decline_code.is_none() { ChargeStatus::Captured } else { ChargeStatus::Declined };
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO payment_charge (charge_id, tenant_id, payment_method_id, amount, currency, description, idempotency_key, provider, provider_reference, \
         status, decline_code, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
         ON CONFLICT (tenant_id, idempotency_key) DO NOTHING RETURNING {CHARGE_COLUMNS}"
    );
    let inserted: Option<Charge> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&method_id)
        .bind(amount)
        .bind(&currency)
        .bind(&description)
        .bind(&key)
        .bind(p.name())
        .bind(&result.reference)
        .bind(status)
        .bind(&result.decline_code)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let Some(c) = inserted else {
        // A concurrent twin of the key won: its charge is the answer.
        let first = charge_by_key(&mut tx, &ctx.tenant_id, &key).await?.ok_or(ApiError::NotFound)?;
        return repeat(first, &method_id, amount, &currency);
    };
    let event = if c.status == ChargeStatus::Captured { events::PAYMENT_CHARGE_CAPTURED } else { events::PAYMENT_CHARGE_FAILED };
    let payload = json!({ "charge_id": c.charge_id, "payment_method_id": c.payment_method_id, "amount": c.amount, "currency": c.currency,
        "status": c.status, "decline_code": c.decline_code });
    audit::record(&mut tx, &ctx, event, payload).await?;
    tx.commit().await?;
    Ok(if c.status == ChargeStatus::Captured { created(c).into_response() } else { ok(c).into_response() })
}

/// A charge of the caller's tenant; another tenant's is 404.
#[utoipa::path(get, path = "/api/payments/charges/{charge_id}", tag = "sdk-payment", params(("charge_id" = String, Path, description = "the charge")),
    responses((status = 200, description = "the charge", body = Data<Charge>)))]
async fn get_charge(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Charge>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {CHARGE_COLUMNS} FROM payment_charge WHERE tenant_id = $1 AND charge_id = $2");
    let c: Option<Charge> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    Ok(ok(c.ok_or(ApiError::NotFound)?))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct MethodFilter {
    #[param(inline)]
    brand: Option<Brand>,
}

/// Stored methods: a detached one is no longer the tenant's to use or see.
const METHODS: Listing = Listing {
    table: "payment_method",
    columns: METHOD_COLUMNS,
    filter: "tenant_id = $1 AND detached_at IS NULL AND ($2 = '' OR brand = $2)",
    order: "created_at DESC, method_id DESC",
};

/// The tenant's stored payment methods (never a detached one), newest
/// first: display facts only, never the provider's token.
#[utoipa::path(get, path = "/api/payments/methods", tag = "sdk-payment", params(MethodFilter, Page),
    responses((status = 200, description = "one page of methods", body = ListOf<Method>)))]
async fn list_methods(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<MethodFilter>) -> ApiResult<ListOf<Method>> {
    let brand = q.brand.map_or("", Brand::as_str);
    page.list::<Method>(&state.db.read, &METHODS, &[&ctx.tenant_id, brand]).await
}

/// A stored payment method of the caller's tenant; another tenant's, or a
/// detached one, is 404.
#[utoipa::path(get, path = "/api/payments/methods/{payment_method_id}", tag = "sdk-payment", params(("payment_method_id" = String, Path, description = "the payment method")),
    responses((status = 200, description = "the method", body = Data<Method>)))]
async fn get_method(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Method>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {METHOD_COLUMNS} FROM payment_method WHERE tenant_id = $1 AND method_id = $2 AND detached_at IS NULL");
    let m: Option<Method> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    Ok(ok(m.ok_or(ApiError::NotFound)?))
}

/// A detached payment method.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = PaymentMethodDetached)]
struct Detached {
    payment_method_id: Id,
    /// Always true: no charge can use the method again.
    detached: bool,
    detached_at: Timestamp,
}

/// Detaches a payment method: no charge can use it again (400 naming it),
/// its provider token is erased and it leaves the list; the row stays,
/// because the charges made with it keep naming it. 404 when it is
/// detached already (of two detaches at once, one detaches it) or
/// another tenant's.
#[utoipa::path(delete, path = "/api/payments/methods/{payment_method_id}", tag = "sdk-payment", params(("payment_method_id" = String, Path, description = "the payment method")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404, "given": [["POST", "/api/payments/methods", { "token": "tok_visa", "brand": "visa", "last4": "4242", "exp_month": 12, "exp_year": 2099 }]], "params": { "payment_method_id": "{payment_method_id}" } }))),
    responses((status = 200, description = "the method, detached", body = Data<Detached>)))]
async fn detach_method(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Detached>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let detached: Option<(Id, Timestamp)> = sqlx::query_as(
        "UPDATE payment_method SET detached_at = $3, token = '' WHERE tenant_id = $1 AND method_id = $2 AND detached_at IS NULL \
         RETURNING method_id, detached_at",
    )
    .bind(&ctx.tenant_id)
    .bind(&id)
    .bind(db::now())
    .fetch_optional(&mut *tx)
    .await?;
    let (payment_method_id, detached_at) = detached.ok_or(ApiError::NotFound)?;
    let d = Detached { payment_method_id, detached: true, detached_at };
    audit::record(&mut tx, &ctx, events::PAYMENT_METHOD_DETACHED, json!({ "payment_method_id": d.payment_method_id })).await?;
    tx.commit().await?;
    Ok(ok(d))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ChargeFilter {
    #[param(inline)]
    status: Option<ChargeStatus>,
    /// Only charges made with this method.
    #[param(format = "uuid")]
    payment_method_id: Option<String>,
    /// Charges made at or after this time (RFC 3339).
    #[param(format = DateTime)]
    from: Option<String>,
    /// Charges made before this time (RFC 3339).
    #[param(format = DateTime)]
    to: Option<String>,
}

const CHARGES: Listing = Listing {
    table: "payment_charge",
    columns: CHARGE_COLUMNS,
    filter: "tenant_id = $1 AND ($2 = '' OR status = $2) AND ($3 = '' OR payment_method_id = $3) AND ($4 = '' OR created_at >= $4) \
             AND ($5 = '' OR created_at < $5)",
    order: "created_at DESC, charge_id DESC",
};

/// The tenant's charges, captured and declined, newest first: of one
/// status, one method, made from `from` (inclusive) to `to` (exclusive).
#[utoipa::path(get, path = "/api/payments/charges", tag = "sdk-payment", params(ChargeFilter, Page),
    responses((status = 200, description = "one page of charges", body = ListOf<Charge>)))]
async fn list_charges(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<ChargeFilter>) -> ApiResult<ListOf<Charge>> {
    let mut check = Check::new();
    let from = check.optional_expiry("from", &q.from).unwrap_or_default();
    let to = check.optional_expiry("to", &q.to).unwrap_or_default();
    if !from.is_empty() && !to.is_empty() && from >= to {
        check.fail("from must be before to");
    }
    check.finish()?;
    let status = q.status.map_or("", ChargeStatus::as_str);
    let method = canonical_uuid_opt(&q.payment_method_id).unwrap_or_default();
    page.list::<Charge>(&state.db.read, &CHARGES, &[&ctx.tenant_id, status, &method, &from, &to]).await
}
