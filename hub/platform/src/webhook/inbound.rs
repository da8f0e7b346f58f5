//! Signed inbound webhooks: `POST /api/webhooks/inbound/{kind}/{provider}`
//! (public: the signature is the credential) verifies a Standard Webhooks
//! signature against the tenant's secret for that provider, refuses stale
//! timestamps (5 minutes), and hands the payload to the handler the kind's
//! group registered (`hub_kernel::inbound`), in the transaction that
//! records the receipt. A `webhook-id` handled before is not handed on
//! again: a resend (Standard Webhooks senders retry whatever is not 2xx)
//! is answered the receipt its first delivery got, stored with the id in
//! the transaction that applied it; the same id with another body is 409.
//! Tenants register their secrets per (kind, provider).

use axum::{http::HeaderMap, response::IntoResponse};
use base64::Engine;
use chrono::{TimeDelta, Utc};
use hub_kernel::{crypto, prelude::*};
use standardwebhooks::WebhookError;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(set_secret, list_secrets)).routes(routes!(delete_secret)).routes(routes!(receive))
}

/// How long a `webhook-id` (with its body's digest and its answer) is
/// remembered. A sender signs every attempt anew, with that attempt's
/// timestamp, so the 5-minute tolerance does not bound a resend: Standard
/// Webhooks schedules (this hub's own: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h,
/// 10 h, ±20%) retry for about a day and a half, and a dead letter may be
/// resent by hand later. Three days covers them.
const SEEN_HOURS: i64 = 72;

/// Forgets the ids remembered more than `SEEN_HOURS` and one hour before
/// `now`, at most 500 at a time until none is left (the hub's hourly
/// sweep; a request takes an expired id's row over itself, so this only
/// bounds the table). The extra hour keeps a row a request has just found
/// from being deleted before it reads it.
pub async fn forget_expired(db: &Db, now: chrono::DateTime<Utc>) -> Result<u64, sqlx::Error> {
    let cutoff = db::format_time(now - TimeDelta::hours(SEEN_HOURS + 1));
    let mut forgotten = 0;
    loop {
        let n = sqlx::query(
            "DELETE FROM webhook_inbound_seen WHERE (tenant_id, kind, provider, webhook_id) IN \
             (SELECT tenant_id, kind, provider, webhook_id FROM webhook_inbound_seen WHERE received_at < $1 LIMIT 500)",
        )
        .bind(&cutoff)
        .execute(db.writer())
        .await?
        .rows_affected();
        forgotten += n;
        if n < 500 {
            return Ok(forgotten);
        }
    }
}

fn valid_name(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-'))
}

fn aad(tenant_id: &str, kind: &str, provider: &str) -> Vec<u8> {
    format!("webhook-inbound:{tenant_id}:{kind}:{provider}").into_bytes()
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = WebhookInboundSecret)]
struct Registered {
    kind: String,
    provider: String,
    created_at: Timestamp,
    updated_at: Timestamp,
}

#[derive(Serialize, ToSchema)]
#[schema(as = WebhookInboundSecretSet)]
struct SetAnswer {
    #[serde(flatten)]
    registered: Registered,
    /// The secret the hub generated (give it to the provider); absent when
    /// the request brought its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewWebhookInboundSecret)]
struct NewSecret {
    /// The receiving group's kind (`voice`, `email`, `notification`, ...):
    /// 1 to 64 of `a-z 0-9 _ -`.
    #[schema(max_length = 64)]
    kind: String,
    /// The provider, as in the inbound path: 1 to 64 of `a-z 0-9 _ -`.
    #[schema(max_length = 64)]
    provider: String,
    /// The provider's `whsec_` secret (16 to 64 bytes); generated when
    /// absent.
    secret: Option<String>,
}

/// Sets the secret a provider signs a kind's inbound webhooks with for
/// this tenant (replacing one set before).
#[utoipa::path(post, path = "/api/webhooks/inbound-secrets", tag = "sdk-webhook", request_body = NewSecret,
    extensions(("x-concurrency" = json!({ "outcome": "first-creates", "given": [], "body": { "kind": "race", "provider": "p-{unique}" } }))),
    responses((status = 201, description = "set", body = Data<SetAnswer>), (status = 200, description = "replaced", body = Data<SetAnswer>)))]
async fn set_secret(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewSecret>) -> ApiResult<Response> {
    let body = body.checked()?;
    let mut check = Check::new();
    let kind = body.kind.trim().to_string();
    let provider = body.provider.trim().to_string();
    for (field, v) in [("kind", &kind), ("provider", &provider)] {
        if !valid_name(v) {
            check.fail(format!("{field} must be 1 to 64 of a-z, 0-9, '_' or '-'"));
        }
    }
    let given = Check::optional(&body.secret);
    let key = match &given {
        Some(s) => {
            let decoded = base64::engine::general_purpose::STANDARD.decode(s.strip_prefix("whsec_").unwrap_or(s)).ok().filter(|k| (16..=64).contains(&k.len()));
            if decoded.is_none() {
                check.fail("secret must be whsec_ followed by the base64 of 16 to 64 bytes");
            }
            decoded.unwrap_or_default()
        }
        None => crypto::random_bytes(24),
    };
    check.finish()?;
    let now = db::now();
    let mut tx = state.db.begin().await?;
    // The first set inserts the secret (201); any other, concurrent or
    // later, finds it and replaces it (200).
    let sealed = state.master.seal(&key, &aad(&ctx.tenant_id, &kind, &provider));
    let (registered, written): (Registered, _) = insert_or_read(
        &mut tx,
        sqlx::query_as(
            "INSERT INTO webhook_inbound_secret (tenant_id, kind, provider, secret_sealed, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5) \
             ON CONFLICT (tenant_id, kind, provider) DO NOTHING RETURNING kind, provider, created_at, updated_at",
        )
        .bind(&ctx.tenant_id)
        .bind(&kind)
        .bind(&provider)
        .bind(&sealed)
        .bind(&now),
        sqlx::query_as(
            "UPDATE webhook_inbound_secret SET secret_sealed = $4, updated_at = $5 WHERE tenant_id = $1 AND kind = $2 AND provider = $3 \
             RETURNING kind, provider, created_at, updated_at",
        )
        .bind(&ctx.tenant_id)
        .bind(&kind)
        .bind(&provider)
        .bind(&sealed)
        .bind(&now),
    )
    .await?;
    audit::record(&mut tx, &ctx, events::WEBHOOK_INBOUND_SECRET_SET, json!({ "kind": kind, "provider": provider })).await?;
    tx.commit().await?;
    let secret = given.is_none().then(|| format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(&key)));
    let answer = SetAnswer { registered, secret };
    Ok(if written == Written::Found { ok(answer).into_response() } else { created(answer).into_response() })
}

/// The (kind, provider) pairs the tenant has a secret for (never the
/// secrets).
#[utoipa::path(get, path = "/api/webhooks/inbound-secrets", tag = "sdk-webhook", params(Page),
    responses((status = 200, description = "one page of registrations", body = ListOf<Registered>)))]
async fn list_secrets(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page) -> ApiResult<ListOf<Registered>> {
    let listing =
        Listing { table: "webhook_inbound_secret", columns: "kind, provider, created_at, updated_at", filter: "tenant_id = $1", order: "kind, provider" };
    page.list::<Registered>(&state.db.read, &listing, &[&ctx.tenant_id]).await
}

/// The answer of a secret's delete.
#[derive(Serialize, ToSchema)]
#[schema(as = WebhookInboundSecretDeleted)]
struct Deleted {
    kind: String,
    provider: String,
    deleted: bool,
}

/// Stops accepting a provider's webhooks of a kind: the secret is erased,
/// and its webhooks are refused (401) from then on.
#[utoipa::path(delete, path = "/api/webhooks/inbound-secrets/{kind}/{provider}", tag = "sdk-webhook",
    params(("kind" = String, Path, description = "the receiving group's kind"), ("provider" = String, Path, description = "the provider")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404,
        "given": [["POST", "/api/webhooks/inbound-secrets", { "kind": "race", "provider": "p-{unique}" }]] }))),
    responses((status = 200, description = "deleted", body = Data<Deleted>)))]
async fn delete_secret(State(state): State<AppState>, Tenant(ctx): Tenant, Path((kind, provider)): Path<(String, String)>) -> ApiResult<Data<Deleted>> {
    if !valid_name(&kind) || !valid_name(&provider) {
        return Err(ApiError::NotFound);
    }
    let mut tx = state.db.begin().await?;
    // One statement: of two deletes at once, the other finds nothing (404).
    let deleted: Option<String> =
        sqlx::query_scalar("DELETE FROM webhook_inbound_secret WHERE tenant_id = $1 AND kind = $2 AND provider = $3 RETURNING provider")
            .bind(&ctx.tenant_id)
            .bind(&kind)
            .bind(&provider)
            .fetch_optional(&mut *tx)
            .await?;
    deleted.ok_or(ApiError::NotFound)?;
    audit::record(&mut tx, &ctx, events::WEBHOOK_INBOUND_SECRET_DELETED, json!({ "kind": kind, "provider": provider })).await?;
    tx.commit().await?;
    Ok(ok(Deleted { kind, provider, deleted: true }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Receiver {
    /// The tenant whose secret signs the message.
    #[param(format = "uuid")]
    tenant_id: String,
}

#[derive(Serialize, ToSchema)]
#[schema(as = WebhookInboundReceipt)]
struct Receipt {
    received: bool,
    webhook_id: String,
    /// What the kind's handler answered.
    #[schema(value_type = Object)]
    result: Value,
}

/// A remembered `webhook-id`: the digest of the body it came with and the
/// handler's answer (JSON).
#[derive(FromRow)]
struct Seen {
    body_sha256: String,
    answer: String,
}

const NO_MATCH: &str = "the webhook does not verify: webhook-signature does not match";

fn refused(e: WebhookError) -> ApiError {
    ApiError::Unauthorized(match e {
        WebhookError::TimestampTooOldError => "the webhook does not verify: webhook-timestamp is more than 5 minutes old",
        WebhookError::FutureTimestampError => "the webhook does not verify: webhook-timestamp is more than 5 minutes ahead",
        WebhookError::MissingHeader(_) | WebhookError::InvalidHeader(_) | WebhookError::InvalidTimestamp => {
            "the webhook does not verify: webhook-id, webhook-timestamp and webhook-signature are required"
        }
        _ => NO_MATCH,
    })
}

/// Receives a provider's signed webhook for a tenant: verified, then
/// handed to the kind's group, once per `webhook-id`: a resend is answered
/// the first delivery's receipt.
#[utoipa::path(post, path = "/api/webhooks/inbound/{kind}/{provider}", tag = "sdk-webhook",
    params(("kind" = String, Path, description = "the receiving group's kind"), ("provider" = String, Path, description = "the sender"), Receiver),
    request_body(content = Object, description = "the provider's JSON payload, signed with webhook-id, webhook-timestamp and webhook-signature"),
    extensions(("x-concurrency" = json!({ "outcome": "exempt", "reason": "the provider signs the body with the tenant's inbound secret (webhook-signature), which this harness cannot compute" }))),
    responses((status = 200, description = "verified and handled; or a resend (the same webhook-id and body within three days): the first delivery's receipt, unchanged, handled once", body = Data<Receipt>),
        (status = 401, description = "Unauthorized: the signature does not verify with the tenant's inbound secret, or the timestamp is outside the tolerance", body = ErrorBody),
        (status = 409, description = "Conflict: this webhook-id was received already with a different body (a resend of the same body is answered 200 with the first delivery's receipt, and not handled again)", body = ErrorBody)))]
async fn receive(
    State(state): State<AppState>,
    Path((kind, provider)): Path<(String, String)>,
    Params(q): Params<Receiver>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> ApiResult<Data<Receipt>> {
    let tenant_id = canonical_uuid(&q.tenant_id);
    let handler = state.inbound.get(&kind).filter(|_| valid_name(&kind) && valid_name(&provider)).ok_or(ApiError::NotFound)?;
    let sealed: Option<Vec<u8>> = sqlx::query_scalar("SELECT secret_sealed FROM webhook_inbound_secret WHERE tenant_id = $1 AND kind = $2 AND provider = $3")
        .bind(&tenant_id)
        .bind(&kind)
        .bind(&provider)
        .fetch_optional(&state.db.read)
        .await?;
    // An unknown tenant or provider answers as a bad signature does.
    let Some(sealed) = sealed else {
        return Err(ApiError::Unauthorized(NO_MATCH));
    };
    // The body is read only now that the receiver is known: a request for
    // no tenant's secret costs the hub no more than its head.
    let body = axum::body::to_bytes(body, hub_kernel::error::BODY_LIMIT).await.map_err(|_| ApiError::PayloadTooLarge)?;
    let key = state.master.open(&sealed, &aad(&tenant_id, &kind, &provider)).map_err(ApiError::Internal)?;
    standardwebhooks::Webhook::from_bytes(key).map_err(refused)?.verify(&body, &headers).map_err(refused)?;
    let payload = hub_kernel::nesting::parse_json(&body, "the payload")?;
    // The kind's handler stores what it reads of the payload.
    hub_kernel::nul::check_value(&payload)?;
    let webhook_id = headers.get("webhook-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    if webhook_id.is_empty() || webhook_id.len() > 256 {
        return Err(ApiError::invalid("webhook-id must be 1 to 256 characters"));
    }
    let now = Utc::now();
    // An id remembered before `expired` is forgotten: its row is taken
    // over by this delivery (the hourly `forget_expired` deletes such rows
    // later, with an older cutoff, so none vanishes under a request).
    let expired = db::format_time(now - TimeDelta::hours(SEEN_HOURS));
    let digest = crypto::sha256_hex(&body);
    let mut tx = state.db.begin().await?;
    // The id first: of deliveries of one id at once, one inserts it and
    // goes on; the others wait for its transaction (PostgreSQL; SQLite has
    // one writer) and read what it stored, or insert it themselves if it
    // rolled back (a refused payload is not remembered: a resend is
    // handled anew).
    let (seen, written): (Seen, _) = insert_or_read(
        &mut tx,
        sqlx::query_as(
            "INSERT INTO webhook_inbound_seen (tenant_id, kind, provider, webhook_id, received_at, body_sha256, answer) \
             VALUES ($1, $2, $3, $4, $5, $6, 'null') ON CONFLICT (tenant_id, kind, provider, webhook_id) \
             DO UPDATE SET received_at = excluded.received_at, body_sha256 = excluded.body_sha256, answer = excluded.answer \
             WHERE webhook_inbound_seen.received_at < $7 RETURNING body_sha256, answer",
        )
        .bind(&tenant_id)
        .bind(&kind)
        .bind(&provider)
        .bind(&webhook_id)
        .bind(db::format_time(now))
        .bind(&digest)
        .bind(&expired),
        sqlx::query_as(
            "SELECT body_sha256, answer FROM webhook_inbound_seen WHERE tenant_id = $1 AND kind = $2 AND provider = $3 AND webhook_id = $4 AND received_at >= $5",
        )
        .bind(&tenant_id)
        .bind(&kind)
        .bind(&provider)
        .bind(&webhook_id)
        .bind(&expired),
    )
    .await?;
    if written == Written::Found {
        // An id remembered from before its digest was kept (empty) takes
        // any body.
        if !seen.body_sha256.is_empty() && !crypto::constant_time_eq(seen.body_sha256.as_bytes(), digest.as_bytes()) {
            return Err(ApiError::Conflict(format!("webhook-id {webhook_id} was received already with a different body")));
        }
        let result = serde_json::from_str(&seen.answer).map_err(|e| ApiError::Internal(e.into()))?;
        return Ok(ok(Receipt { received: true, webhook_id, result }));
    }
    let result = handler.handle(&mut tx, &tenant_id, &provider, &payload).await?;
    let actor = format!("{kind}:{provider}");
    let record = json!({ "kind": kind, "provider": provider, "webhook_id": webhook_id });
    audit::record_system(&mut tx, &tenant_id, &actor, events::WEBHOOK_INBOUND_RECEIVED, record).await?;
    // The answer a resend gets, with the id and what the handler wrote.
    sqlx::query("UPDATE webhook_inbound_seen SET answer = $5 WHERE tenant_id = $1 AND kind = $2 AND provider = $3 AND webhook_id = $4")
        .bind(&tenant_id)
        .bind(&kind)
        .bind(&provider)
        .bind(&webhook_id)
        .bind(result.to_string())
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(ok(Receipt { received: true, webhook_id, result }))
}
