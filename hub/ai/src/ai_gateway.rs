//! sdk-ai-gateway: non-streaming completions through the tenant's model
//! routes. A route names an OpenAI-compatible provider (its base URL, the
//! model) and the credential: a vault envelope bound to the tenant and a
//! sdk-secrets reference, stored as such and opened only for the call.
//! A completion resolves the route, redacts PII from every message,
//! unwraps the credential, calls `{base}/chat/completions` (a timeout per
//! attempt; transport errors, 408, 429 and 5xx retried with backoff), then
//! inserts its record and `ai-gateway.complete.v1` in one transaction.

use std::{
    collections::HashMap,
    sync::{LazyLock, Mutex},
    time::{Duration, Instant},
};

use axum::response::IntoResponse;
use hub_kernel::{crypto::envelope, nesting, prelude::*};
use hub_platform::webhook::target;

use crate::redact;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(put_route, list_routes))
        .routes(routes!(get_route, delete_route))
        .routes(routes!(complete, list_completions))
        .routes(routes!(get_completion))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ModelRoute)]
struct Route {
    route_id: Id,
    name: String,
    provider_base_url: String,
    model: String,
    /// The sdk-secrets reference the credential envelope is bound to.
    credential_ref: Option<String>,
    timeout_ms: i64,
    max_attempts: i64,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const COLUMNS: &str = "route_id, name, provider_base_url, model, credential_ref, timeout_ms, max_attempts, created_at, updated_at";

fn valid_name(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
}

/// A vault envelope as `POST /api/vault/encrypt` answers it.
#[derive(Deserialize, ToSchema)]
#[schema(as = ModelRouteCredentialEnvelope)]
struct EnvelopeIn {
    ciphertext_b64: String,
    wrapped_dek_b64: String,
    iv_b64: String,
    tag_b64: String,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewModelRoute)]
struct NewRoute {
    /// 1 to 64 of `a-z 0-9 . _ -`; a route of the same name is replaced.
    #[schema(max_length = 64)]
    name: String,
    /// The provider's OpenAI-compatible base (`https://api.openai.com/v1`);
    /// `/chat/completions` is appended. No user information (the key is
    /// `api_key`); private addresses follow the webhook policy
    /// (`HUB_WEBHOOK_ALLOWED_HOSTS`).
    provider_base_url: String,
    /// The provider's model name.
    #[schema(max_length = 200)]
    model: String,
    /// A sdk-secrets reference of the tenant; with exactly one of
    /// `api_key` or `credential_envelope`. No reference: no credential.
    credential_ref: Option<String>,
    /// The provider's key, sealed at once by the vault under
    /// `credential_ref` and never stored in clear.
    #[schema(max_length = 4096)]
    api_key: Option<String>,
    /// An envelope the vault made for `credential_ref`.
    credential_envelope: Option<EnvelopeIn>,
    /// Per attempt; 30000 when absent.
    #[schema(minimum = 1000, maximum = 120_000)]
    timeout_ms: Option<i64>,
    /// 3 when absent.
    #[schema(minimum = 1, maximum = 5)]
    max_attempts: Option<i64>,
}

/// Registers (or replaces, by name) a model route; a deleted route's name
/// brings its row back (200, its `route_id` and completion records kept).
#[utoipa::path(post, path = "/api/ai/routes", tag = "sdk-ai-gateway", request_body = NewRoute,
    extensions(("x-concurrency" = json!({ "outcome": "first-creates", "body": { "name": "r-{unique}", "provider_base_url": "https://llm.races.example.com/v1", "model": "race" } }))),
    responses((status = 201, description = "the route, new", body = Data<Route>), (status = 200, description = "the route, replaced", body = Data<Route>)))]
async fn put_route(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewRoute>) -> ApiResult<Response> {
    let body = body.checked()?;
    let mut check = Check::new();
    let name = body.name.trim();
    if !valid_name(name) {
        check.fail("name must be 1 to 64 of a-z, 0-9, '.', '_' or '-'");
    }
    let base = body.provider_base_url.trim();
    if let Err(e) = target::check_url(&state.config, base) {
        check.fail(e.replacen("url", "provider_base_url", 1));
    }
    let model = body.model.trim();
    let reference = Check::optional(&body.credential_ref);
    let api_key = Check::optional(&body.api_key);
    let envelope_in = body.credential_envelope.map(|e| [e.ciphertext_b64, e.wrapped_dek_b64, e.iv_b64, e.tag_b64].map(|p| p.trim().to_string()));
    match (&reference, api_key.is_some(), envelope_in.is_some()) {
        (Some(_), true, true) | (Some(_), false, false) => check.fail("credential_ref needs exactly one of api_key or credential_envelope"),
        (None, true, _) | (None, _, true) => check.fail("api_key and credential_envelope need a credential_ref"),
        _ => {}
    }
    let timeout = body.timeout_ms.unwrap_or(30_000);
    let attempts = body.max_attempts.unwrap_or(3);
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let sealed = match (&reference, api_key, envelope_in) {
        (Some(r), key, parts) => {
            let known: Option<i64> = sqlx::query_scalar("SELECT version FROM secrets_reference WHERE tenant_id = $1 AND ref = $2")
                .bind(&ctx.tenant_id)
                .bind(r)
                .fetch_optional(&mut *tx)
                .await?;
            if known.is_none() {
                return Err(ApiError::invalid(format!("credential_ref {r} is no secret reference of the tenant (POST /api/secrets/refs)")));
            }
            let sealed = match (key, parts) {
                (Some(key), _) => envelope::seal(&state.master, &mut tx, &ctx.tenant_id, r, key.as_bytes()).await?,
                (None, Some([ciphertext_b64, wrapped_dek_b64, iv_b64, tag_b64])) => {
                    let e = envelope::Envelope { reference: r.clone(), ciphertext_b64, wrapped_dek_b64, iv_b64, tag_b64 };
                    if envelope::open(&state.master, &mut tx, &ctx.tenant_id, &e).await?.is_none() {
                        return Err(ApiError::invalid("credential_envelope does not open for this tenant and credential_ref"));
                    }
                    e
                }
                (None, None) => unreachable!("checked above"),
            };
            Some(sealed)
        }
        (None, ..) => None,
    };
    let now = db::now();
    let id = db::new_id();
    let sql = format!(
        "INSERT INTO ai_gateway_route (route_id, tenant_id, name, provider_base_url, model, credential_ref, credential_ciphertext, credential_wrapped_dek, \
         credential_iv, credential_tag, timeout_ms, max_attempts, created_by, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14) \
         ON CONFLICT (tenant_id, name) DO UPDATE SET provider_base_url = excluded.provider_base_url, model = excluded.model, \
         credential_ref = excluded.credential_ref, credential_ciphertext = excluded.credential_ciphertext, credential_wrapped_dek = excluded.credential_wrapped_dek, \
         credential_iv = excluded.credential_iv, credential_tag = excluded.credential_tag, timeout_ms = excluded.timeout_ms, \
         max_attempts = excluded.max_attempts, updated_at = excluded.updated_at, deleted_at = NULL RETURNING {COLUMNS}"
    );
    let part = |f: fn(&envelope::Envelope) -> &String| sealed.as_ref().map(|e| f(e).clone());
    let route: Route = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&id)
        .bind(&ctx.tenant_id)
        .bind(name)
        .bind(base)
        .bind(model)
        .bind(&reference)
        .bind(part(|e| &e.ciphertext_b64))
        .bind(part(|e| &e.wrapped_dek_b64))
        .bind(part(|e| &e.iv_b64))
        .bind(part(|e| &e.tag_b64))
        .bind(timeout)
        .bind(attempts)
        .bind(audit::actor_of(&ctx).1)
        .bind(&now)
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "route_id": route.route_id, "name": name, "provider_base_url": base, "model": model, "credential_ref": reference });
    audit::record(&mut tx, &ctx, events::AI_GATEWAY_ROUTE_SET, payload).await?;
    tx.commit().await?;
    Ok(if route.route_id == id { created(route).into_response() } else { ok(route).into_response() })
}

#[derive(Deserialize, ToSchema)]
#[schema(as = CompletionRequest)]
struct CompletionRequest {
    /// The route by name; when absent, the newest route serving `model`;
    /// when both are absent, the route named `default`.
    route: Option<String>,
    model: Option<String>,
    /// The conversation; or `prompt` for one user message.
    #[schema(min_items = 1, max_items = 100)]
    messages: Option<Vec<Message>>,
    /// One user message (at most 200000 bytes), instead of `messages`.
    prompt: Option<String>,
    #[schema(minimum = 1, maximum = 1_000_000)]
    max_tokens: Option<i64>,
    #[schema(minimum = 0, maximum = 2)]
    temperature: Option<f64>,
}

/// One message of a completion's conversation.
#[derive(Deserialize, ToSchema)]
#[schema(as = AiChatMessage)]
struct Message {
    role: Role,
    /// At most 200000 bytes.
    content: String,
}

stored_enum! {
    /// Who speaks a message.
    #[schema(as = AiMessageRole)]
    pub enum Role { System = "system", User = "user", Assistant = "assistant", Tool = "tool" }
}

/// One thing redacted from a message before the prompt left.
#[derive(Serialize, ToSchema)]
#[schema(as = AiRedaction)]
struct Redaction {
    /// `email`, `phone` or `card`.
    kind: &'static str,
    /// The message it was redacted from (0 for a `prompt`).
    message_index: usize,
}

#[derive(Serialize, ToSchema)]
#[schema(as = Completion)]
struct Completion {
    completion_id: Id,
    route: String,
    model: String,
    content: String,
    finish_reason: Option<String>,
    /// `{ prompt_tokens, completion_tokens, total_tokens }` as the provider
    /// reported them.
    #[schema(value_type = Object)]
    usage: Value,
    /// What was redacted before the prompt left.
    redactions: Vec<Redaction>,
    attempts: i64,
}

const MAX_MESSAGE: usize = 200_000;

/// The messages asked for, checked.
fn messages(check: &mut Check, body: &CompletionRequest) -> Vec<(&'static str, String)> {
    if let Some(prompt) = Check::optional(&body.prompt) {
        if body.messages.is_some() {
            check.fail("give messages or prompt, not both");
        }
        if prompt.len() > MAX_MESSAGE {
            check.fail(format!("prompt must be at most {MAX_MESSAGE} bytes"));
        }
        return vec![("user", prompt)];
    }
    let Some(list) = &body.messages else {
        check.fail("messages must be an array of 1 to 100 messages (or give prompt)");
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, m) in list.iter().enumerate() {
        if m.content.len() > MAX_MESSAGE {
            check.fail(format!("messages[{i}].content must be a string of at most {MAX_MESSAGE} bytes"));
        }
        out.push((m.role.as_str(), m.content.clone()));
    }
    out
}

#[derive(FromRow)]
struct Resolved {
    route_id: String,
    name: String,
    provider_base_url: String,
    model: String,
    credential_ref: Option<String>,
    credential_ciphertext: Option<String>,
    credential_wrapped_dek: Option<String>,
    credential_iv: Option<String>,
    credential_tag: Option<String>,
    timeout_ms: i64,
    max_attempts: i64,
}

/// The route a request names, and its credential opened.
async fn resolve(state: &AppState, tenant_id: &str, route: Option<&str>, model: Option<&str>) -> ApiResult<(Resolved, Option<String>)> {
    let (filter, key) = match (route, model) {
        (Some(r), _) => ("name = $2", r),
        (None, Some(m)) => ("model = $2", m),
        (None, None) => ("name = $2", "default"),
    };
    let sql = format!(
        "SELECT route_id, name, provider_base_url, model, credential_ref, credential_ciphertext, credential_wrapped_dek, credential_iv, credential_tag, \
         timeout_ms, max_attempts FROM ai_gateway_route WHERE tenant_id = $1 AND deleted_at IS NULL AND {filter} ORDER BY updated_at DESC, route_id DESC LIMIT 1"
    );
    let mut tx = state.db.begin().await?;
    let found: Option<Resolved> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(key).fetch_optional(&mut *tx).await?;
    let found = found.ok_or_else(|| ApiError::invalid(format!("no model route matches {key}; register one with POST /api/ai/routes")))?;
    let credential = match (&found.credential_ref, &found.credential_ciphertext, &found.credential_wrapped_dek, &found.credential_iv, &found.credential_tag) {
        (Some(r), Some(c), Some(w), Some(i), Some(t)) => {
            let e = envelope::Envelope { reference: r.clone(), ciphertext_b64: c.clone(), wrapped_dek_b64: w.clone(), iv_b64: i.clone(), tag_b64: t.clone() };
            let opened = envelope::open(&state.master, &mut tx, tenant_id, &e)
                .await?
                .ok_or_else(|| ApiError::Conflict(format!("the credential of route {} no longer opens", found.name)))?;
            Some(String::from_utf8(opened).map_err(|_| ApiError::Conflict(format!("the credential of route {} is not text", found.name)))?)
        }
        _ => None,
    };
    tx.commit().await?;
    Ok((found, credential))
}

/// What the provider answered, or why it did not.
struct Outcome {
    attempts: i64,
    answer: Result<Value, String>,
}

/// The most a provider's answer may hold: a chat completion is text, and
/// the hub reads it whole before answering.
pub const MAX_ANSWER: usize = 4 << 20;

fn retryable(status: reqwest::StatusCode) -> bool {
    status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS || status == reqwest::StatusCode::REQUEST_TIMEOUT
}

/// The providers' HTTP client, built once per address policy (one in a
/// hub process; tests run hubs of several): its connections are reused
/// across completions. No redirects, the webhook targets' resolver guard;
/// each call sets its route's timeout.
fn client(config: &hub_kernel::config::Config) -> Result<reqwest::Client, String> {
    type Clients = Mutex<HashMap<(bool, Vec<String>), reqwest::Client>>;
    static CLIENTS: LazyLock<Clients> = LazyLock::new(Default::default);
    let key = (config.dev, config.webhook_allowed_hosts.clone());
    let mut clients = CLIENTS.lock().expect("client cache lock");
    if let Some(c) = clients.get(&key) {
        return Ok(c.clone());
    }
    let client = target::guarded_client(config).user_agent("hub-ai-gateway/1").build().map_err(|e| format!("the provider client: {e}"))?;
    clients.insert(key, client.clone());
    Ok(client)
}

/// `POST {base}/chat/completions`, up to the route's attempts.
async fn call(state: &AppState, route: &Resolved, credential: Option<&str>, request: &Value) -> Outcome {
    let client = match client(&state.config) {
        Ok(c) => c,
        Err(e) => return Outcome { attempts: 0, answer: Err(e) },
    };
    let url = format!("{}/chat/completions", route.provider_base_url.trim_end_matches('/'));
    // The client's resolver judges a name's addresses; a literal address is
    // never resolved, so it is judged here, at every call: a route saved
    // before the policy refused its address is not called.
    if let Err(why) = target::check_target(&state.config, &url) {
        return Outcome { attempts: 0, answer: Err(why.replacen("url", "provider_base_url", 1)) };
    }
    let mut last = String::new();
    for attempt in 1..=route.max_attempts {
        if attempt > 1 {
            tokio::time::sleep(Duration::from_millis(100 << (attempt - 2).min(4))).await;
        }
        let mut req = client.post(&url).timeout(Duration::from_millis(route.timeout_ms as u64)).json(request);
        if let Some(key) = credential {
            req = req.bearer_auth(key);
        }
        match hub_kernel::outbound::send(req).await {
            Ok(res) if res.status().is_success() => {
                // The provider is a tenant's choice: its answer is read
                // within a bound and its nesting checked before parsing.
                let answer = match target::read_bounded(res, MAX_ANSWER).await {
                    Err(target::Unread::TooLong) => Err(format!("the provider's answer is longer than {MAX_ANSWER} bytes")),
                    Err(target::Unread::Failed(_)) => Err("the provider's answer could not be read".into()),
                    Ok(bytes) if nesting::json_depth(&bytes, nesting::JSON_NESTING_LIMIT) > nesting::JSON_NESTING_LIMIT => {
                        Err(format!("the provider's answer nests more than {} levels deep", nesting::JSON_NESTING_LIMIT))
                    }
                    Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
                        Ok(v) if v.pointer("/choices/0/message").is_some() => Ok(v),
                        _ => Err("the provider answered no chat completion".into()),
                    },
                };
                return Outcome { attempts: attempt, answer };
            }
            Ok(res) if retryable(res.status()) => last = format!("the provider answered {}", res.status().as_u16()),
            Ok(res) => return Outcome { attempts: attempt, answer: Err(format!("the provider answered {}", res.status().as_u16())) },
            Err(e) if e.is_timeout() => last = format!("the provider did not answer within {} ms", route.timeout_ms),
            Err(_) => last = "the provider could not be reached".into(),
        }
    }
    Outcome { attempts: route.max_attempts, answer: Err(format!("{last} (after {} attempts)", route.max_attempts)) }
}

/// A completion through the tenant's model route.
#[utoipa::path(post, path = "/api/ai/completions", tag = "sdk-ai-gateway", request_body = CompletionRequest,
    extensions(("x-concurrency" = json!({ "outcome": "exempt", "reason": "a completion calls the route's model provider over the network, an outside service this harness cannot reach" }))),
    responses((status = 200, description = "the completion", body = Data<Completion>),
        (status = 502, description = "the provider failed after its retries (the failure is recorded)", body = ErrorBody)))]
async fn complete(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<CompletionRequest>) -> ApiResult<Data<Completion>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let asked = messages(&mut check, &body);
    let max_tokens = body.max_tokens;
    let route_name = Check::optional(&body.route);
    let model = Check::optional(&body.model);
    check.finish()?;
    let (route, credential) = resolve(&state, &ctx.tenant_id, route_name.as_deref(), model.as_deref()).await?;
    let mut redactions = Vec::new();
    let sent: Vec<Value> = asked
        .iter()
        .enumerate()
        .map(|(i, (role, content))| {
            let (clean, kinds) = redact::redact(content);
            redactions.extend(kinds.into_iter().map(|kind| Redaction { kind, message_index: i }));
            json!({ "role": role, "content": clean })
        })
        .collect();
    let mut request = json!({ "model": route.model, "messages": sent });
    if let Some(n) = max_tokens {
        request["max_tokens"] = json!(n);
    }
    if let Some(t) = body.temperature {
        request["temperature"] = json!(t);
    }
    let started = Instant::now();
    let outcome = call(&state, &route, credential.as_deref(), &request).await;
    let latency = started.elapsed().as_millis() as i64;
    let answer = outcome.answer.as_ref().ok();
    let usage = answer.and_then(|a| a.get("usage")).cloned().unwrap_or(json!({}));
    let tokens = |k: &str| usage.get(k).and_then(Value::as_i64);
    let finish = answer.and_then(|a| a.pointer("/choices/0/finish_reason")).and_then(Value::as_str).map(str::to_string);
    let content = answer.and_then(|a| a.pointer("/choices/0/message/content")).and_then(Value::as_str).unwrap_or_default().to_string();
    let status = if answer.is_some() { "completed" } else { "failed" };
    let error = outcome.answer.as_ref().err().cloned();
    let id = Id::new();
    let mut tx = state.db.begin().await?;
    sqlx::query(
        "INSERT INTO ai_gateway_completion (completion_id, tenant_id, route_id, model, status, attempts, redactions, finish_reason, prompt_tokens, \
         completion_tokens, total_tokens, latency_ms, error, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
    )
    .bind(id)
    .bind(&ctx.tenant_id)
    .bind(&route.route_id)
    .bind(&route.model)
    .bind(status)
    .bind(outcome.attempts)
    .bind(json!(redactions).to_string())
    .bind(&finish)
    .bind(tokens("prompt_tokens"))
    .bind(tokens("completion_tokens"))
    .bind(tokens("total_tokens"))
    .bind(latency)
    .bind(&error)
    .bind(audit::actor_of(&ctx).1)
    .bind(db::now())
    .execute(&mut *tx)
    .await?;
    if !redactions.is_empty() {
        let kinds: std::collections::BTreeSet<&str> = redactions.iter().map(|r| r.kind).collect();
        audit::record(&mut tx, &ctx, events::AI_GATEWAY_PII_REDACTED, json!({ "completion_id": id, "count": redactions.len(), "kinds": kinds })).await?;
    }
    let payload = json!({ "completion_id": id, "route_id": route.route_id, "model": route.model, "status": status, "attempts": outcome.attempts,
        "redactions": redactions.len(), "total_tokens": tokens("total_tokens"), "latency_ms": latency });
    audit::record(&mut tx, &ctx, events::AI_GATEWAY_COMPLETE, payload).await?;
    tx.commit().await?;
    if let Some(e) = error {
        return Err(ApiError::Upstream(e));
    }
    Ok(ok(Completion {
        completion_id: id,
        route: route.name,
        model: route.model,
        content,
        finish_reason: finish,
        usage,
        redactions,
        attempts: outcome.attempts,
    }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct RouteFilter {
    /// Only the routes serving this model.
    #[param(max_length = 200)]
    model: Option<String>,
    /// Only the routes whose credential is bound to this sdk-secrets
    /// reference.
    credential_ref: Option<String>,
}

/// The tenant's model routes (never their credential), newest first.
#[utoipa::path(get, path = "/api/ai/routes", tag = "sdk-ai-gateway", params(RouteFilter, Page),
    responses((status = 200, description = "one page of routes", body = ListOf<Route>)))]
async fn list_routes(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<RouteFilter>, page: Page) -> ApiResult<ListOf<Route>> {
    let model = Check::optional(&q.model).unwrap_or_default();
    let reference = Check::optional(&q.credential_ref).unwrap_or_default();
    let listing = Listing {
        table: "ai_gateway_route",
        columns: COLUMNS,
        filter: "tenant_id = $1 AND deleted_at IS NULL AND ($2 = '' OR model = $2) AND ($3 = '' OR credential_ref = $3)",
        order: "created_at DESC, route_id DESC",
    };
    page.list::<Route>(&state.db.read, &listing, &[&ctx.tenant_id, &model, &reference]).await
}

/// One model route by name (never its credential).
#[utoipa::path(get, path = "/api/ai/routes/{name}", tag = "sdk-ai-gateway", params(("name" = String, Path, description = "the route's name")),
    responses((status = 200, description = "the route", body = Data<Route>)))]
async fn get_route(State(state): State<AppState>, Tenant(ctx): Tenant, Path(name): Path<String>) -> ApiResult<Data<Route>> {
    if !valid_name(&name) {
        return Err(ApiError::NotFound);
    }
    let sql = format!("SELECT {COLUMNS} FROM ai_gateway_route WHERE tenant_id = $1 AND name = $2 AND deleted_at IS NULL");
    let route: Option<Route> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&name).fetch_optional(&state.db.read).await?;
    Ok(ok(route.ok_or(ApiError::NotFound)?))
}

/// What a route's deletion did.
#[derive(Serialize, ToSchema)]
#[schema(as = ModelRouteDeleted)]
struct Deleted {
    route_id: Id,
    name: String,
    /// Always true: the route is no longer listed or resolved.
    deleted: bool,
    /// Always true: its sealed credential is erased (the row stays for
    /// the completion records that name it).
    credential_erased: bool,
}

/// Deletes a model route: completions no longer resolve it and its sealed
/// credential is erased; its completion records stay readable. A deleted
/// route is 404.
#[utoipa::path(delete, path = "/api/ai/routes/{name}", tag = "sdk-ai-gateway", params(("name" = String, Path, description = "the route's name")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404, "given": [["POST", "/api/ai/routes", { "name": "r-{unique}", "provider_base_url": "https://llm.races.example.com/v1", "model": "race" }]] }))),
    responses((status = 200, description = "the route, deleted", body = Data<Deleted>)))]
async fn delete_route(State(state): State<AppState>, Tenant(ctx): Tenant, Path(name): Path<String>) -> ApiResult<Data<Deleted>> {
    if !valid_name(&name) {
        return Err(ApiError::NotFound);
    }
    let mut tx = state.db.begin().await?;
    let now = db::now();
    let deleted: Option<(Id, Option<String>)> = sqlx::query_as(
        "UPDATE ai_gateway_route SET deleted_at = $3, updated_at = $3, credential_ciphertext = NULL, credential_wrapped_dek = NULL, credential_iv = NULL, \
         credential_tag = NULL WHERE tenant_id = $1 AND name = $2 AND deleted_at IS NULL RETURNING route_id, credential_ref",
    )
    .bind(&ctx.tenant_id)
    .bind(&name)
    .bind(&now)
    .fetch_optional(&mut *tx)
    .await?;
    let (route_id, reference) = deleted.ok_or(ApiError::NotFound)?;
    let payload = json!({ "route_id": route_id, "name": name, "credential_ref": reference });
    audit::record(&mut tx, &ctx, events::AI_GATEWAY_ROUTE_DELETED, payload).await?;
    tx.commit().await?;
    Ok(ok(Deleted { route_id, name, deleted: true, credential_erased: true }))
}

stored_enum! {
    /// How a completion ended.
    #[schema(as = AiCompletionStatus)]
    pub enum CompletionStatus { Completed = "completed", Failed = "failed" }
}

/// The record a completion leaves: the route, the usage, the redactions
/// made; never the prompt or the answer.
#[derive(FromRow, Serialize, ToSchema)]
#[schema(as = AiCompletionRecord)]
struct Record {
    completion_id: Id,
    route_id: Id,
    /// The route's name.
    route: String,
    model: String,
    status: CompletionStatus,
    attempts: i64,
    /// `[{ kind, message_index }]`: what was redacted before the prompt left.
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<Object>)]
    redactions: JsonText,
    finish_reason: Option<String>,
    prompt_tokens: Option<i64>,
    completion_tokens: Option<i64>,
    total_tokens: Option<i64>,
    latency_ms: i64,
    /// Why a `failed` completion failed.
    error: Option<String>,
    created_by: String,
    created_at: Timestamp,
}

const RECORD_TABLE: &str = "ai_gateway_completion c JOIN ai_gateway_route r ON r.route_id = c.route_id";
const RECORD_COLUMNS: &str = "c.completion_id, c.route_id, r.name AS route, c.model, c.status, c.attempts, c.redactions, c.finish_reason, \
    c.prompt_tokens, c.completion_tokens, c.total_tokens, c.latency_ms, c.error, c.created_by, c.created_at";

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct CompletionFilter {
    /// Only the completions through the route of this name (a deleted
    /// route's included).
    #[param(max_length = 64)]
    route: Option<String>,
    #[param(inline)]
    status: Option<CompletionStatus>,
    /// Only the completions made at or after it.
    #[param(format = DateTime)]
    from: Option<String>,
    /// Only the completions made before it.
    #[param(format = DateTime)]
    to: Option<String>,
}

/// The tenant's completion records, newest first.
#[utoipa::path(get, path = "/api/ai/completions", tag = "sdk-ai-gateway", params(CompletionFilter, Page),
    responses((status = 200, description = "one page of completion records", body = ListOf<Record>)))]
async fn list_completions(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<CompletionFilter>, page: Page) -> ApiResult<ListOf<Record>> {
    let mut check = Check::new();
    let from = check.optional_expiry("from", &q.from).unwrap_or_default();
    let to = check.optional_expiry("to", &q.to).unwrap_or_default();
    check.finish()?;
    let route = Check::optional(&q.route).unwrap_or_default();
    let status = q.status.map_or("", CompletionStatus::as_str);
    let listing = Listing {
        table: RECORD_TABLE,
        columns: RECORD_COLUMNS,
        filter: "c.tenant_id = $1 AND ($2 = '' OR r.name = $2) AND ($3 = '' OR c.status = $3) AND ($4 = '' OR c.created_at >= $4) \
                 AND ($5 = '' OR c.created_at < $5)",
        order: "c.created_at DESC, c.completion_id DESC",
    };
    page.list::<Record>(&state.db.read, &listing, &[&ctx.tenant_id, &route, status, &from, &to]).await
}

/// One completion record of the tenant.
#[utoipa::path(get, path = "/api/ai/completions/{completion_id}", tag = "sdk-ai-gateway",
    params(("completion_id" = String, Path, description = "the completion")),
    responses((status = 200, description = "the completion record", body = Data<Record>)))]
async fn get_completion(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Record>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {RECORD_COLUMNS} FROM {RECORD_TABLE} WHERE c.tenant_id = $1 AND c.completion_id = $2");
    let record: Option<Record> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    Ok(ok(record.ok_or(ApiError::NotFound)?))
}
