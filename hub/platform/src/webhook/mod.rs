//! sdk-webhook: endpoints a tenant's events are delivered to, signed the
//! Standard Webhooks way; their deliveries with every attempt; dead
//! letters with retry and replay. The audit writer marks subscribed events
//! in the event's own transaction (`hub_kernel::audit::outbox`); `worker`
//! fans them out into deliveries and makes the attempts; `target` keeps
//! them off private networks; `inbound` receives signed webhooks.

pub mod inbound;
pub mod target;
pub mod worker;

use base64::Engine;
use hub_kernel::{crypto, prelude::*};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_endpoint, list_endpoints))
        .routes(routes!(get_endpoint, update_endpoint, delete_endpoint))
        .routes(routes!(disable))
        .routes(routes!(enable))
        .routes(routes!(rotate_secret))
        .routes(routes!(test_endpoint))
        .routes(routes!(list_deliveries))
        .routes(routes!(get_delivery))
        .routes(routes!(dead_letters))
        .routes(routes!(retry_dead_letter))
        .routes(routes!(replay))
        .merge(inbound::routes())
}

/// How long the secret a rotation replaced still signs, by default.
const DEFAULT_GRACE_SECONDS: i64 = 24 * 3600;

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = WebhookEndpoint)]
pub(crate) struct Endpoint {
    endpoint_id: Id,
    url: String,
    description: Option<String>,
    /// The event types it subscribes to: names, or tail wildcards
    /// (`crm.*`, `*`).
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<String>)]
    event_types: JsonText,
    status: EndpointStatus,
    disabled_reason: Option<String>,
    /// Until then the secret a rotation replaced signs too.
    previous_secret_until: Option<Timestamp>,
    failure_streak: i64,
    last_success_at: Option<Timestamp>,
    last_failure_at: Option<Timestamp>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

stored_enum! {
    /// Whether an endpoint is delivered to.
    #[schema(as = WebhookEndpointStatus)]
    pub enum EndpointStatus { Active = "active", Disabled = "disabled" }
}

stored_enum! {
    /// Where a delivery is: still being attempted, delivered, or
    /// dead-lettered after its last attempt.
    #[schema(as = WebhookDeliveryStatus)]
    pub enum DeliveryStatus { Pending = "pending", Succeeded = "succeeded", Dead = "dead" }
}

/// The answer of an endpoint's delete.
#[derive(Serialize, ToSchema)]
#[schema(as = WebhookEndpointDeleted)]
struct Deleted {
    endpoint_id: Id,
    deleted: bool,
}

/// The answer of a replay: how many dead letters were requeued.
#[derive(Serialize, ToSchema)]
#[schema(as = WebhookReplayed)]
struct Replayed {
    replayed: u64,
}

const COLUMNS: &str = "endpoint_id, url, description, event_types, status, disabled_reason, previous_secret_until, failure_streak, \
     last_success_at, last_failure_at, created_at, updated_at";

/// An endpoint with its signing secret: the answer of a create and a
/// rotation, the only times the secret is shown.
#[derive(Serialize, ToSchema)]
#[schema(as = WebhookEndpointWithSecret)]
struct WithSecret {
    #[serde(flatten)]
    endpoint: Endpoint,
    /// `whsec_` and the base64 of 24 random bytes.
    secret: String,
}

/// A new signing secret: the key, and its `whsec_` form.
fn new_secret() -> (Vec<u8>, String) {
    let key = crypto::random_bytes(24);
    let text = format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(&key));
    (key, text)
}

/// Secrets are sealed under the master key, bound to their endpoint.
fn seal(state: &AppState, endpoint_id: &str, key: &[u8]) -> Vec<u8> {
    state.master.seal(key, format!("webhook-endpoint:{endpoint_id}").as_bytes())
}

pub(crate) fn unseal(state: &AppState, endpoint_id: &str, sealed: &[u8]) -> anyhow::Result<Vec<u8>> {
    state.master.open(sealed, format!("webhook-endpoint:{endpoint_id}").as_bytes())
}

/// A subscription pattern: `*`, a tail wildcard (`crm.*`, `crm.contact.*`)
/// or an event type; `(exact, prefix)` as the outbox matches it.
fn pattern(p: &str) -> Option<(bool, String)> {
    let segment = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-'));
    if p == "*" {
        return Some((false, String::new()));
    }
    if let Some(head) = p.strip_suffix(".*") {
        return head.split('.').all(segment).then(|| (false, format!("{head}.")));
    }
    (p.len() <= 200 && p.split('.').count() >= 2 && p.split('.').all(segment)).then(|| (true, p.to_string()))
}

fn check_event_types(check: &mut Check, items: &[String], form: &Pattern) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match Some(item.as_str()).filter(|p| form.is_match(p) && pattern(p).is_some()) {
            Some(p) if !out.iter().any(|o| o == p) => out.push(p.to_string()),
            Some(_) => {}
            None => check.fail(format!("event_types[{i}] must be an event type (crm.contact.created.v1), a tail wildcard (crm.*) or *")),
        }
    }
    out
}

async fn subscribe(tx: &mut Tx, tenant_id: &str, endpoint_id: &str, patterns: &[String]) -> ApiResult<()> {
    sqlx::query("DELETE FROM webhook_subscription WHERE endpoint_id = $1").bind(endpoint_id).execute(&mut **tx).await?;
    for p in patterns {
        let (exact, prefix) = pattern(p).expect("checked");
        sqlx::query("INSERT INTO webhook_subscription (endpoint_id, tenant_id, pattern, exact, prefix) VALUES ($1, $2, $3, $4, $5)")
            .bind(endpoint_id)
            .bind(tenant_id)
            .bind(p)
            .bind(i64::from(exact))
            .bind(prefix)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewWebhookEndpoint)]
struct NewEndpoint {
    /// `http` or `https`, without user information (`user:password@`; the
    /// receiver checks the signature); private, loopback and link-local
    /// addresses are refused outside development mode unless
    /// `HUB_WEBHOOK_ALLOWED_HOSTS` names them.
    url: String,
    /// Event types (`crm.contact.created.v1`) or patterns (`crm.*`, `*`).
    #[schema(min_items = 1, max_items = 100, max_length = 200, pattern = r"^(?:\*|[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.\*|[a-z0-9_-]+(?:\.[a-z0-9_-]+)+)$")]
    event_types: Vec<String>,
    #[schema(max_length = 500)]
    description: Option<String>,
}

/// Registers an endpoint; the answer carries its signing secret, shown
/// this once.
#[utoipa::path(post, path = "/api/webhooks/endpoints", tag = "sdk-webhook", request_body = NewEndpoint,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "url": "https://example.com/race", "event_types": ["races.never.sent.v1"] } }))),
    responses((status = 201, description = "the endpoint and its secret", body = Data<WithSecret>)))]
async fn create_endpoint(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewEndpoint>) -> ApiResult<Created<WithSecret>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let url = body.url.trim().to_string();
    if let Err(why) = target::check_url(&state.config, &url) {
        check.fail(why);
    }
    static EVENT_TYPES: Pattern = Pattern::of::<NewEndpoint>("event_types[]");
    let types = check_event_types(&mut check, &body.event_types, &EVENT_TYPES);
    let description = Check::optional(&body.description);
    check.finish()?;
    let id = db::new_id();
    let (key, secret) = new_secret();
    let now = db::now();
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO webhook_endpoint (endpoint_id, tenant_id, url, description, event_types, status, secret_sealed, failure_streak, created_by, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, 'active', $6, 0, $7, $8, $8) RETURNING {COLUMNS}"
    );
    let endpoint: Endpoint = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&id)
        .bind(&ctx.tenant_id)
        .bind(&url)
        .bind(&description)
        .bind(json!(types).to_string())
        .bind(seal(&state, &id, &key))
        .bind(audit::actor_of(&ctx).1)
        .bind(&now)
        .fetch_one(&mut *tx)
        .await?;
    subscribe(&mut tx, &ctx.tenant_id, &id, &types).await?;
    audit::record(&mut tx, &ctx, events::WEBHOOK_ENDPOINT_CREATED, json!({ "endpoint_id": id, "event_types": types })).await?;
    tx.commit().await?;
    Ok(created(WithSecret { endpoint, secret }))
}

/// The tenant's endpoints, newest first.
#[utoipa::path(get, path = "/api/webhooks/endpoints", tag = "sdk-webhook", params(Page),
    responses((status = 200, description = "one page of endpoints", body = ListOf<Endpoint>)))]
async fn list_endpoints(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page) -> ApiResult<ListOf<Endpoint>> {
    let listing = Listing { table: "webhook_endpoint", columns: COLUMNS, filter: "tenant_id = $1", order: "created_at DESC, endpoint_id DESC" };
    page.list::<Endpoint>(&state.db.read, &listing, &[&ctx.tenant_id]).await
}

async fn find(exec: &mut Tx, tenant_id: &str, id: &str) -> ApiResult<Endpoint> {
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM webhook_endpoint WHERE tenant_id = $1 AND endpoint_id = $2");
    let found: Option<Endpoint> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&id).fetch_optional(&mut **exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// One endpoint.
#[utoipa::path(get, path = "/api/webhooks/endpoints/{endpoint_id}", tag = "sdk-webhook", params(("endpoint_id" = String, Path, description = "the endpoint")),
    responses((status = 200, description = "the endpoint", body = Data<Endpoint>)))]
async fn get_endpoint(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Endpoint>> {
    let mut tx = state.db.read.begin().await?;
    let endpoint = find(&mut tx, &ctx.tenant_id, &id).await?;
    tx.commit().await?;
    Ok(ok(endpoint))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = WebhookEndpointUpdate)]
struct Update {
    /// A new URL, checked as on create.
    url: Option<String>,
    /// A new list of event types or patterns, replacing the old.
    #[schema(min_items = 1, max_items = 100, max_length = 200, pattern = r"^(?:\*|[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.\*|[a-z0-9_-]+(?:\.[a-z0-9_-]+)+)$")]
    event_types: Option<Vec<String>>,
    #[schema(max_length = 500)]
    description: Option<String>,
}

/// Writes an endpoint change with its event, answering the endpoint.
async fn changed(mut tx: Tx, ctx: &TenantCtx, id: &str, set: &str, args: &[Option<&str>], what: Value) -> ApiResult<Endpoint> {
    let n = args.len();
    let sql =
        format!("UPDATE webhook_endpoint SET {set}, updated_at = ${} WHERE tenant_id = ${} AND endpoint_id = ${} RETURNING {COLUMNS}", n + 1, n + 2, n + 3);
    let mut q = sqlx::query_as::<_, Endpoint>(sqlx::AssertSqlSafe(sql));
    for a in args {
        q = q.bind(*a);
    }
    let endpoint = q.bind(db::now()).bind(&ctx.tenant_id).bind(id).fetch_one(&mut *tx).await?;
    let mut payload = json!({ "endpoint_id": id });
    payload.as_object_mut().expect("an object").extend(what.as_object().cloned().unwrap_or_default());
    audit::record(&mut tx, ctx, events::WEBHOOK_ENDPOINT_UPDATED, payload).await?;
    tx.commit().await?;
    Ok(endpoint)
}

/// Changes an endpoint's URL, subscriptions or description (what is
/// absent stays).
#[utoipa::path(patch, path = "/api/webhooks/endpoints/{endpoint_id}", tag = "sdk-webhook", request_body = Update,
    params(("endpoint_id" = String, Path, description = "the endpoint")),
    extensions(("x-concurrency" = json!({ "outcome": "independent",
        "given": [["POST", "/api/webhooks/endpoints", { "url": "https://example.com/race", "event_types": ["races.never.sent.v1"] }]],
        "body": { "event_types": ["races.never.sent.v1", "races.never.*"], "description": "race" } }))),
    responses((status = 200, description = "the endpoint", body = Data<Endpoint>)))]
async fn update_endpoint(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<Update>) -> ApiResult<Data<Endpoint>> {
    let mut tx = state.db.begin().await?;
    // Changes of one endpoint queue on its row: the subscriptions are
    // replaced (deleted, then inserted) by one change at a time, never two
    // inserting the same pattern at once.
    ENDPOINT.lock::<String>(&mut tx, &ctx.tenant_id, &path_id(&id)?.to_string()).await?.ok_or(ApiError::NotFound)?;
    let current = find(&mut tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let mut check = Check::new();
    let url = Check::optional(&body.url);
    if let Some(u) = &url
        && let Err(why) = target::check_url(&state.config, u)
    {
        check.fail(why);
    }
    static EVENT_TYPES: Pattern = Pattern::of::<Update>("event_types[]");
    let types = body.event_types.as_deref().map(|v| check_event_types(&mut check, v, &EVENT_TYPES));
    let description = Check::optional(&body.description);
    check.finish()?;
    if let Some(t) = &types {
        subscribe(&mut tx, &ctx.tenant_id, &current.endpoint_id.to_string(), t).await?;
    }
    let types_text = types.as_ref().map(|t| json!(t).to_string());
    let set = "url = COALESCE($1, url), event_types = COALESCE($2, event_types), description = COALESCE($3, description)";
    let what = json!({ "url_changed": url.is_some(), "event_types": types });
    let endpoint = changed(tx, &ctx, &current.endpoint_id.to_string(), set, &[url.as_deref(), types_text.as_deref(), description.as_deref()], what).await?;
    Ok(ok(endpoint))
}

/// Deletes an endpoint with its deliveries.
#[utoipa::path(delete, path = "/api/webhooks/endpoints/{endpoint_id}", tag = "sdk-webhook", params(("endpoint_id" = String, Path, description = "the endpoint")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404,
        "given": [["POST", "/api/webhooks/endpoints", { "url": "https://example.com/race", "event_types": ["races.never.sent.v1"] }]] }))),
    responses((status = 200, description = "deleted", body = Data<Deleted>)))]
async fn delete_endpoint(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Deleted>> {
    let mut tx = state.db.begin().await?;
    let endpoint = find(&mut tx, &ctx.tenant_id, &id).await?;
    // Deliveries (with their attempts) go first, locked in the order the
    // delivery worker records them (by id, each before its endpoint).
    // Deleting the endpoint first would hold its row while the cascade
    // waits for a delivery the worker holds, as the worker waits for the
    // endpoint's row: a deadlock PostgreSQL breaks by failing one of the two.
    let lock = if state.db.backend == db::Backend::Postgres { " ORDER BY delivery_id FOR UPDATE" } else { "" };
    let sql =
        format!("DELETE FROM webhook_delivery WHERE delivery_id IN (SELECT delivery_id FROM webhook_delivery WHERE tenant_id = $1 AND endpoint_id = $2{lock})");
    sqlx::query(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(endpoint.endpoint_id).execute(&mut *tx).await?;
    // Subscriptions go with it (ON DELETE CASCADE). The delete itself says
    // whether this request removed the row: of two deletes at once, the
    // other finds nothing (404).
    let deleted: Option<String> = sqlx::query_scalar("DELETE FROM webhook_endpoint WHERE tenant_id = $1 AND endpoint_id = $2 RETURNING endpoint_id")
        .bind(&ctx.tenant_id)
        .bind(endpoint.endpoint_id)
        .fetch_optional(&mut *tx)
        .await?;
    deleted.ok_or(ApiError::NotFound)?;
    audit::record(&mut tx, &ctx, events::WEBHOOK_ENDPOINT_DELETED, json!({ "endpoint_id": endpoint.endpoint_id })).await?;
    tx.commit().await?;
    Ok(ok(Deleted { endpoint_id: endpoint.endpoint_id, deleted: true }))
}

/// Stops deliveries to an endpoint: events of the time it is disabled
/// are not delivered to it, and deliveries already pending wait until it
/// is enabled again. Disabling an endpoint the tenant disabled already
/// changes nothing and records no event.
#[utoipa::path(post, path = "/api/webhooks/endpoints/{endpoint_id}/disable", tag = "sdk-webhook", params(("endpoint_id" = String, Path, description = "the endpoint")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer",
        "given": [["POST", "/api/webhooks/endpoints", { "url": "https://example.com/race", "event_types": ["races.never.sent.v1"] }]] }))),
    responses((status = 200, description = "the endpoint, disabled", body = Data<Endpoint>)))]
async fn disable(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Endpoint>> {
    let tx = state.db.begin().await?;
    let set = "status = 'disabled', disabled_reason = $1";
    let unless = "status = 'disabled' AND COALESCE(disabled_reason, '') = $1";
    Ok(ok(switched(tx, &ctx, &id, set, unless, Some("disabled by the tenant"), json!({ "status": "disabled" })).await?))
}

/// Resumes deliveries to an endpoint, its failure streak cleared.
/// Enabling an active endpoint without a failure streak changes nothing
/// and records no event.
#[utoipa::path(post, path = "/api/webhooks/endpoints/{endpoint_id}/enable", tag = "sdk-webhook", params(("endpoint_id" = String, Path, description = "the endpoint")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [
        ["POST", "/api/webhooks/endpoints", { "url": "https://example.com/race", "event_types": ["races.never.sent.v1"] }],
        ["POST", "/api/webhooks/endpoints/{endpoint_id}/disable", null]] }))),
    responses((status = 200, description = "the endpoint, active", body = Data<Endpoint>)))]
async fn enable(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Endpoint>> {
    let tx = state.db.begin().await?;
    let set = "status = 'active', disabled_reason = $1, failure_streak = 0, failing_since = NULL";
    let unless = "status = 'active' AND disabled_reason IS NULL AND failure_streak = 0 AND failing_since IS NULL";
    Ok(ok(switched(tx, &ctx, &id, set, unless, None, json!({ "status": "active" })).await?))
}

/// The endpoint as guarded writes name it.
const ENDPOINT: Stateful = Stateful { noun: "endpoint", table: "webhook_endpoint", key: "endpoint_id", state: "status" };

/// Switches an endpoint on or off in one guarded statement (`set`, with
/// `arg` as `$1`, unless it already is as `unless` says): of two requests
/// at once, one changes it, with the event, and the other finds it
/// switched and answers it as committed, without an event (as a repeat
/// does).
async fn switched(mut tx: Tx, ctx: &TenantCtx, id: &str, set: &str, unless: &str, arg: Option<&str>, what: Value) -> ApiResult<Endpoint> {
    let id = path_id(id)?.to_string();
    let sql = format!("UPDATE webhook_endpoint SET {set}, updated_at = $2 WHERE tenant_id = $3 AND endpoint_id = $4 AND NOT ({unless}) RETURNING {COLUMNS}");
    let moved: Option<Endpoint> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(arg).bind(db::now()).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
    let Some(endpoint) = moved else {
        return find(&mut tx, &ctx.tenant_id, &id).await;
    };
    let mut payload = json!({ "endpoint_id": id });
    payload.as_object_mut().expect("an object").extend(what.as_object().cloned().unwrap_or_default());
    audit::record(&mut tx, ctx, events::WEBHOOK_ENDPOINT_UPDATED, payload).await?;
    tx.commit().await?;
    Ok(endpoint)
}

#[derive(Deserialize, ToSchema)]
#[schema(as = WebhookSecretRotation)]
struct Rotation {
    /// How long the replaced secret still signs, in seconds; 86400 when
    /// absent.
    #[schema(minimum = 0, maximum = 604_800)]
    grace_seconds: Option<i64>,
}

/// A new signing secret; the old one keeps signing beside it for the
/// grace period.
#[utoipa::path(post, path = "/api/webhooks/endpoints/{endpoint_id}/rotate-secret", tag = "sdk-webhook", request_body = Rotation,
    params(("endpoint_id" = String, Path, description = "the endpoint")),
    extensions(("x-concurrency" = json!({ "outcome": "independent",
        "given": [["POST", "/api/webhooks/endpoints", { "url": "https://example.com/race", "event_types": ["races.never.sent.v1"] }]], "body": {} }))),
    responses((status = 200, description = "the endpoint and its new secret", body = Data<WithSecret>)))]
async fn rotate_secret(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<Rotation>) -> ApiResult<Data<WithSecret>> {
    let mut tx = state.db.begin().await?;
    let current = find(&mut tx, &ctx.tenant_id, &id).await?;
    let grace = body.checked()?.grace_seconds.unwrap_or(DEFAULT_GRACE_SECONDS);
    let (key, secret) = new_secret();
    let until = db::format_time(chrono::Utc::now() + chrono::TimeDelta::seconds(grace));
    let sql = "UPDATE webhook_endpoint SET previous_secret_sealed = secret_sealed, previous_secret_until = $1, secret_sealed = $2 WHERE endpoint_id = $3";
    sqlx::query(sql).bind(&until).bind(seal(&state, &current.endpoint_id.to_string(), &key)).bind(current.endpoint_id).execute(&mut *tx).await?;
    let endpoint =
        changed(tx, &ctx, &current.endpoint_id.to_string(), "status = status", &[], json!({ "secret_rotated": true, "grace_seconds": grace })).await?;
    Ok(ok(WithSecret { endpoint, secret }))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = WebhookDelivery)]
struct Delivery {
    /// Also the `webhook-id` header of every attempt.
    delivery_id: Id,
    endpoint_id: Id,
    /// The audit entry delivered.
    entry_id: String,
    event_type: String,
    status: DeliveryStatus,
    /// Attempts since it was last (re)queued.
    attempts: i64,
    next_attempt_at: Timestamp,
    last_status_code: Option<i64>,
    last_error: Option<String>,
    created_at: Timestamp,
    finished_at: Option<Timestamp>,
    #[sqlx(skip)]
    #[schema(value_type = Option<Vec<Attempt>>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    attempt_history: Option<Vec<Attempt>>,
}

const DELIVERY_COLUMNS: &str =
    "delivery_id, endpoint_id, entry_id, event_type, status, attempts, next_attempt_at, last_status_code, last_error, created_at, finished_at";

/// Sends a signed test event to an endpoint: a `webhook.endpoint.tested.v1`
/// event is recorded and a delivery of it to this endpoint is enqueued,
/// whatever the endpoint subscribes to, for the delivery worker to sign and
/// attempt as any other (read it at `GET /api/webhooks/deliveries/{delivery_id}`).
/// Other endpoints subscribed to the event type get it as any event.
#[utoipa::path(post, path = "/api/webhooks/endpoints/{endpoint_id}/test", tag = "sdk-webhook", params(("endpoint_id" = String, Path, description = "the endpoint")),
    extensions(("x-concurrency" = json!({ "outcome": "independent",
        "given": [["POST", "/api/webhooks/endpoints", { "url": "https://example.com/race", "event_types": ["races.never.sent.v1"] }]] }))),
    responses((status = 201, description = "the test delivery, pending", body = Data<Delivery>),
        (status = 409, description = "Conflict: the endpoint is disabled (enable it first)", body = ErrorBody)))]
async fn test_endpoint(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Created<Delivery>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // A share lock on the endpoint: a disable or a delete waits for the
    // delivery to be enqueued (a delete then removes it with the others),
    // or this finds the endpoint deleted (404). The new delivery is locked
    // by nobody else, so the worker's and the delete's order (deliveries,
    // then the endpoint) is kept.
    let lock = if state.db.backend == db::Backend::Postgres { " FOR SHARE" } else { "" };
    let sql = format!("SELECT status FROM webhook_endpoint WHERE tenant_id = $1 AND endpoint_id = $2{lock}");
    let status: Option<EndpointStatus> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
    match status.ok_or(ApiError::NotFound)? {
        EndpointStatus::Active => {}
        EndpointStatus::Disabled => return Err(ApiError::Conflict("the endpoint is disabled; enable it to test it".into())),
    }
    let entry = audit::record(&mut tx, &ctx, events::WEBHOOK_ENDPOINT_TESTED, json!({ "endpoint_id": id, "test": true })).await?;
    let now = db::now();
    let sql = format!(
        "INSERT INTO webhook_delivery (delivery_id, tenant_id, endpoint_id, entry_id, event_type, status, attempts, next_attempt_at, created_at) \
         VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, $6) RETURNING {DELIVERY_COLUMNS}"
    );
    let delivery: Delivery = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&id)
        .bind(&entry.entry_id)
        .bind(&entry.event_type)
        .bind(&now)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(created(delivery))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = WebhookAttempt)]
struct Attempt {
    attempt: i64,
    started_at: Timestamp,
    duration_ms: i64,
    /// The receiver's status; null when none came (timeout, refused target).
    status_code: Option<i64>,
    error: Option<String>,
    /// The first KiB of the receiver's answer.
    response: Option<String>,
}

async fn delivery(exec: &mut Tx, tenant_id: &str, id: &str) -> ApiResult<Delivery> {
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {DELIVERY_COLUMNS} FROM webhook_delivery WHERE tenant_id = $1 AND delivery_id = $2");
    let found: Option<Delivery> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&id).fetch_optional(&mut **exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// A delivery with its attempts, oldest first.
#[utoipa::path(get, path = "/api/webhooks/deliveries/{delivery_id}", tag = "sdk-webhook", params(("delivery_id" = String, Path, description = "the delivery")),
    responses((status = 200, description = "the delivery", body = Data<Delivery>)))]
async fn get_delivery(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Delivery>> {
    let mut tx = state.db.read.begin().await?;
    let mut d = delivery(&mut tx, &ctx.tenant_id, &id).await?;
    let attempts: Vec<Attempt> =
        sqlx::query_as("SELECT attempt, started_at, duration_ms, status_code, error, response FROM webhook_attempt WHERE delivery_id = $1 ORDER BY attempt")
            .bind(d.delivery_id)
            .fetch_all(&mut *tx)
            .await?;
    tx.commit().await?;
    d.attempt_history = Some(attempts);
    Ok(ok(d))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct DeliveryQuery {
    /// Only this endpoint's.
    #[param(format = "uuid")]
    endpoint_id: Option<String>,
    /// Only deliveries in this state.
    #[param(inline)]
    status: Option<DeliveryStatus>,
    /// Only deliveries of this event type.
    #[param(max_length = 200)]
    event_type: Option<String>,
}

/// The tenant's deliveries in every state, newest first (attempts are
/// read per delivery).
#[utoipa::path(get, path = "/api/webhooks/deliveries", tag = "sdk-webhook", params(DeliveryQuery, Page),
    responses((status = 200, description = "one page of deliveries", body = ListOf<Delivery>)))]
async fn list_deliveries(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<DeliveryQuery>, page: Page) -> ApiResult<ListOf<Delivery>> {
    let endpoint = canonical_uuid_opt(&q.endpoint_id).unwrap_or_default();
    let status = q.status.map(|s| s.as_str().to_string()).unwrap_or_default();
    let event_type = Check::optional(&q.event_type).unwrap_or_default();
    let listing = Listing {
        table: "webhook_delivery",
        columns: DELIVERY_COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR endpoint_id = $2) AND ($3 = '' OR status = $3) AND ($4 = '' OR event_type = $4)",
        order: "created_at DESC, delivery_id DESC",
    };
    page.list::<Delivery>(&state.db.read, &listing, &[&ctx.tenant_id, &endpoint, &status, &event_type]).await
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct DeadLetterQuery {
    /// Required: the caller's tenant.
    #[param(format = "uuid")]
    tenant_id: String,
    /// Only this endpoint's.
    #[param(format = "uuid")]
    endpoint_id: Option<String>,
}

/// The tenant's dead-lettered deliveries, newest first.
#[utoipa::path(get, path = "/api/webhooks/deadletters", tag = "sdk-webhook", params(DeadLetterQuery, Page),
    responses((status = 200, description = "one page of dead letters", body = ListOf<Delivery>)))]
async fn dead_letters(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<DeadLetterQuery>, page: Page) -> ApiResult<ListOf<Delivery>> {
    ctx.required_tenant(&Some(q.tenant_id))?;
    let endpoint = canonical_uuid_opt(&q.endpoint_id).unwrap_or_default();
    let listing = Listing {
        table: "webhook_delivery",
        columns: DELIVERY_COLUMNS,
        filter: "tenant_id = $1 AND status = 'dead' AND ($2 = '' OR endpoint_id = $2)",
        order: "finished_at DESC, delivery_id DESC",
    };
    page.list::<Delivery>(&state.db.read, &listing, &[&ctx.tenant_id, &endpoint]).await
}

/// Requeues dead deliveries for an immediate first attempt, on the
/// schedule from its start; the attempt history is kept.
const REQUEUE: &str = "status = 'pending', attempts = 0, next_attempt_at = $1, leased_until = NULL, finished_at = NULL";

/// A delivery as guarded writes name it.
const DELIVERY: Stateful = Stateful { noun: "delivery", table: "webhook_delivery", key: "delivery_id", state: "status" };

/// Sends a dead-lettered delivery again.
#[utoipa::path(post, path = "/api/webhooks/deadletters/{delivery_id}/retry", tag = "sdk-webhook", params(("delivery_id" = String, Path, description = "a dead delivery")),
    extensions(("x-concurrency" = json!({ "outcome": "exempt", "reason": "a dead-lettered delivery exists only after the delivery worker's failed attempts at a receiver, which no request of this harness can bring about or wait for" }))),
    responses((status = 200, description = "the delivery, pending again", body = Data<Delivery>)))]
async fn retry_dead_letter(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Delivery>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // One guarded statement: of two retries at once, one requeues the
    // delivery and the other finds it pending (409).
    let sql = format!("UPDATE webhook_delivery SET {REQUEUE} WHERE tenant_id = $2 AND delivery_id = $3 AND status = 'dead' RETURNING {DELIVERY_COLUMNS}");
    let requeued: Option<Delivery> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(db::now()).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
    let d = DELIVERY.settle(&mut tx, &ctx.tenant_id, &id, requeued, "only a dead-lettered delivery can be retried").await?;
    tx.commit().await?;
    Ok(ok(d))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = WebhookReplay)]
struct Replay {
    /// Dead-lettered at or after.
    #[schema(format = DateTime)]
    from: String,
    /// Dead-lettered before; now when absent.
    #[schema(format = DateTime)]
    to: Option<String>,
    /// Only this endpoint's.
    #[schema(format = "uuid")]
    endpoint_id: Option<String>,
    /// At most this many (1000 when absent), oldest first.
    #[schema(minimum = 1, maximum = 10_000)]
    limit: Option<i64>,
}

/// Sends the dead letters of a time range again.
#[utoipa::path(post, path = "/api/webhooks/deadletters/replay", tag = "sdk-webhook", request_body = Replay,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "events": 0, "body": { "from": "2000-01-01T00:00:00Z" } }))),
    responses((status = 200, description = "how many were requeued", body = Data<Replayed>)))]
async fn replay(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<Replay>) -> ApiResult<Data<Replayed>> {
    let body = body.checked()?;
    // The schema checked the forms; these normalise them as stored.
    let mut check = Check::new();
    let from = check.optional_expiry("from", &Some(body.from));
    let to = check.optional_expiry("to", &body.to).unwrap_or_else(db::now);
    let endpoint = check.optional_uuid("endpoint_id", &body.endpoint_id).map(|u| u.to_string()).unwrap_or_default();
    let limit = body.limit.unwrap_or(1000);
    check.finish()?;
    let mut tx = state.db.begin().await?;
    // The outer `status = 'dead'` re-check makes replays at once on
    // PostgreSQL skip deliveries another replay requeued first: none is
    // counted twice.
    let sql = format!(
        "UPDATE webhook_delivery SET {REQUEUE} WHERE status = 'dead' AND delivery_id IN (SELECT delivery_id FROM webhook_delivery \
         WHERE tenant_id = $2 AND status = 'dead' AND finished_at >= $3 AND finished_at < $4 AND ($5 = '' OR endpoint_id = $5) \
         ORDER BY finished_at LIMIT $6)"
    );
    let done = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(db::now())
        .bind(&ctx.tenant_id)
        .bind(from.unwrap_or_default())
        .bind(&to)
        .bind(&endpoint)
        .bind(limit)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(ok(Replayed { replayed: done.rows_affected() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_types_tail_wildcards_or_everything() {
        assert_eq!(pattern("*"), Some((false, String::new())));
        assert_eq!(pattern("crm.*"), Some((false, "crm.".into())));
        assert_eq!(pattern("crm.contact.*"), Some((false, "crm.contact.".into())));
        assert_eq!(pattern("crm.contact.created.v1"), Some((true, "crm.contact.created.v1".into())));
        for bad in ["", "crm", "*.created", "crm.*.v1", "CRM.x", "crm..x", "crm.x y"] {
            assert_eq!(pattern(bad), None, "{bad}");
        }
    }
}
