//! The delivery worker: leases due deliveries (`FOR UPDATE SKIP LOCKED` on
//! PostgreSQL, so each attempt is made by one hub of several; SQLite has
//! one writer), posts each signed (Standard Webhooks: `webhook-id`,
//! `webhook-timestamp`, `webhook-signature` v1 over `id.timestamp.body`,
//! with the previous secret too during a rotation's grace), and records
//! every attempt. Only a 2xx within the timeout succeeds. Failures retry
//! on Svix's schedule with ±20% jitter, a 429 or 503's `Retry-After`
//! waiting longer; after the eighth attempt the delivery is dead-lettered.
//! A 410 disables the endpoint, as does failing for five days. A lease
//! outlives the timeout, so a hub that dies mid-attempt (even `kill -9`)
//! leaves the delivery to be attempted again: at least once.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use futures_util::future::join_all;
use hub_kernel::{
    audit::{self, events},
    db::{self, Backend},
    error::ApiResult,
    state::AppState,
    types::Timestamp,
};
use serde_json::{Value, json};
use sqlx::FromRow;

use super::target;

/// Seconds to wait before attempts 2 to 8 (the first is immediate):
/// 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h.
pub const SCHEDULE: [i64; 7] = [5, 300, 1800, 7200, 18_000, 36_000, 36_000];
/// Deliveries leased per round, attempted concurrently.
const BATCH: i64 = 64;
/// An endpoint failing without a success for this long is disabled.
const FAILING_DAYS: i64 = 5;
/// Bytes of a receiver's answer kept with the attempt.
const RESPONSE_EXCERPT: usize = 1024;
/// How long a lease outlasts the timeout: time to record the round. A
/// hub that died holding leases delays those deliveries by this much more.
const LEASE_MARGIN_SECONDS: i64 = 10;
/// The longest `Retry-After` honoured: a day.
const MAX_RETRY_AFTER: i64 = 86_400;

/// What follows an attempt.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Next {
    Succeeded,
    /// Retry `seconds` from now.
    Retry(i64),
    Dead,
    /// 410: dead, and the endpoint disabled.
    Gone,
}

/// The step after attempt number `attempts` (1-based) answered `status`
/// (None: no answer), with the receiver's `Retry-After` seconds; `jitter`
/// in 0..1 spreads the wait by ±20%.
pub fn next(attempts: i64, status: Option<u16>, retry_after: Option<i64>, jitter: f64) -> Next {
    match status {
        Some(s) if (200..300).contains(&s) => return Next::Succeeded,
        Some(410) => return Next::Gone,
        _ => {}
    }
    let Some(&base) = usize::try_from(attempts - 1).ok().and_then(|i| SCHEDULE.get(i)) else {
        return Next::Dead;
    };
    let wait = (base as f64 * (0.8 + 0.4 * jitter)).round() as i64;
    let asked = match status {
        Some(429 | 503) => retry_after.map_or(0, |r| r.clamp(0, MAX_RETRY_AFTER)),
        _ => 0,
    };
    Next::Retry(wait.max(asked))
}

/// `Retry-After` in seconds: a number, or an HTTP date.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<i64> {
    let v = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    v.parse::<i64>().ok().or_else(|| DateTime::parse_from_rfc2822(v).ok().map(|t| (t.with_timezone(&Utc) - Utc::now()).num_seconds()))
}

/// The delivery client: no redirects, the policy's resolver, the timeout.
pub fn client(state: &AppState) -> reqwest::Client {
    target::guarded_client(&state.config)
        .timeout(Duration::from_secs(state.config.webhook_timeout_seconds))
        .user_agent("hub-webhooks/1")
        .build()
        .expect("the webhook client builds")
}

/// Runs rounds for the life of the process: at once after a full batch,
/// 50 ms after a partial one (so deliveries trickling in are attempted in
/// batches rather than a write transaction each), every 200 ms when idle.
pub fn spawn(state: &AppState) {
    let state = state.clone();
    tokio::spawn(async move {
        let client = client(&state);
        loop {
            let pause = match round(&state, &client).await {
                Ok(n) if n as i64 >= BATCH => continue,
                Ok(0) => 200,
                Ok(_) => 50,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook deliveries");
                    200
                }
            };
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
    });
}

#[derive(FromRow)]
struct Job {
    delivery_id: String,
    tenant_id: String,
    endpoint_id: String,
    attempts: i64,
    event_type: String,
    entry_id: String,
    occurred_at: String,
    payload: Option<String>,
    url: String,
    secret_sealed: Vec<u8>,
    previous_secret_sealed: Option<Vec<u8>>,
    previous_secret_until: Option<Timestamp>,
}

struct Outcome {
    job: Job,
    started_at: String,
    duration_ms: i64,
    status: Option<u16>,
    retry_after: Option<i64>,
    error: Option<String>,
    response: Option<String>,
}

/// Events fanned out per round at most.
const FAN_OUT: i64 = 500;

/// A random (v4) UUID computed by the database, one per inserted row.
fn uuid_sql(backend: Backend) -> &'static str {
    match backend {
        Backend::Postgres => "gen_random_uuid()::text",
        Backend::Sqlite => {
            "lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-' || \
             substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)))"
        }
    }
}

/// Turns outbox rows into deliveries, one per active endpoint subscribed
/// to the event's type, and removes them, in one transaction (the rows
/// locked on PostgreSQL, so two hubs never fan out one event).
async fn fan_out(state: &AppState) -> ApiResult<usize> {
    let waiting: Option<i64> = sqlx::query_scalar("SELECT 1 FROM webhook_outbox LIMIT 1").fetch_optional(&state.db.read).await?;
    if waiting.is_none() {
        return Ok(0);
    }
    let backend = state.db.backend;
    let lock = backend.skip_locked();
    let mut tx = state.db.begin().await?;
    let sql = format!("SELECT entry_id FROM webhook_outbox ORDER BY entry_id LIMIT $1{lock}");
    let ids: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(FAN_OUT).fetch_all(&mut *tx).await?;
    if ids.is_empty() {
        return Ok(0);
    }
    let marks = db::placeholders(2, ids.len());
    let sql = format!(
        "INSERT INTO webhook_delivery (delivery_id, tenant_id, endpoint_id, entry_id, event_type, status, attempts, next_attempt_at, created_at) \
         SELECT {uuid}, a.tenant_id, e.endpoint_id, a.entry_id, a.event_type, 'pending', 0, $1, $1 \
         FROM audit_entry a \
         JOIN webhook_subscription s ON s.tenant_id = a.tenant_id AND {matches} \
         JOIN webhook_endpoint e ON e.endpoint_id = s.endpoint_id AND e.status = 'active' \
         WHERE a.entry_id IN ({marks}) \
         ON CONFLICT (endpoint_id, entry_id) DO NOTHING",
        uuid = uuid_sql(backend),
        matches = hub_kernel::audit::outbox::MATCHES,
    );
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(db::now());
    for id in &ids {
        q = q.bind(id);
    }
    q.execute(&mut *tx).await?;
    let sql = format!("DELETE FROM webhook_outbox WHERE entry_id IN ({})", db::placeholders(1, ids.len()));
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
    for id in &ids {
        q = q.bind(id);
    }
    q.execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(ids.len())
}

/// One round: fan out, lease, attempt, record. Answers how many were
/// attempted.
pub async fn round(state: &AppState, client: &reqwest::Client) -> ApiResult<usize> {
    fan_out(state).await?;
    let jobs = lease(state).await?;
    if jobs.is_empty() {
        return Ok(0);
    }
    let outcomes = join_all(jobs.into_iter().map(|job| attempt(state, client, job))).await;
    let n = outcomes.len();
    record(state, outcomes).await?;
    Ok(n)
}

async fn lease(state: &AppState) -> ApiResult<Vec<Job>> {
    let now = Utc::now();
    // A lease outlives an attempt (the timeout) with room to record it.
    let until = db::format_time(now + TimeDelta::seconds(i64::try_from(state.config.webhook_timeout_seconds).unwrap_or(300) + LEASE_MARGIN_SECONDS));
    // A read first: an idle hub takes no write lock every round.
    let due: Option<i64> = sqlx::query_scalar("SELECT 1 FROM webhook_delivery WHERE status = 'pending' AND next_attempt_at <= $1 LIMIT 1")
        .bind(db::format_time(now))
        .fetch_optional(&state.db.read)
        .await?;
    if due.is_none() {
        return Ok(Vec::new());
    }
    let lock = if state.db.backend == Backend::Postgres { " FOR UPDATE OF d SKIP LOCKED" } else { "" };
    // The outer conditions repeat the lease's: PostgreSQL re-checks them
    // (not the subquery's) on a row another replica leased meanwhile.
    let sql = format!(
        "UPDATE webhook_delivery SET leased_until = $2 WHERE delivery_id IN (\
         SELECT d.delivery_id FROM webhook_delivery d JOIN webhook_endpoint e ON e.endpoint_id = d.endpoint_id AND e.status = 'active' \
         WHERE d.status = 'pending' AND d.next_attempt_at <= $1 AND (d.leased_until IS NULL OR d.leased_until <= $1) \
         ORDER BY d.next_attempt_at LIMIT $3{lock}) AND status = 'pending' AND (leased_until IS NULL OR leased_until <= $1) RETURNING delivery_id"
    );
    let ids: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(db::format_time(now)).bind(until).bind(BATCH).fetch_all(state.db.writer()).await?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!(
        "SELECT d.delivery_id, d.tenant_id, d.endpoint_id, d.attempts, d.event_type, a.entry_id, a.occurred_at, a.payload, \
         e.url, e.secret_sealed, e.previous_secret_sealed, e.previous_secret_until \
         FROM webhook_delivery d JOIN webhook_endpoint e ON e.endpoint_id = d.endpoint_id JOIN audit_entry a ON a.entry_id = d.entry_id \
         WHERE d.delivery_id IN ({})",
        db::placeholders(1, ids.len())
    );
    let mut q = sqlx::query_as::<_, Job>(sqlx::AssertSqlSafe(sql));
    for id in &ids {
        q = q.bind(id);
    }
    Ok(q.fetch_all(state.db.writer()).await?)
}

/// The message: Standard Webhooks' `{ type, timestamp, data }`, with the
/// audit entry's id.
fn body(job: &Job) -> String {
    let data = job.payload.as_deref().and_then(|p| serde_json::from_str::<Value>(p).ok()).unwrap_or(Value::Null);
    json!({ "type": job.event_type, "timestamp": job.occurred_at, "event_id": job.entry_id, "tenant_id": job.tenant_id, "data": data }).to_string()
}

/// `webhook-signature`: v1 with the current secret, and with the previous
/// one while its grace lasts.
fn signatures(state: &AppState, job: &Job, timestamp: i64, body: &str) -> anyhow::Result<String> {
    let mut keys = vec![super::unseal(state, &job.endpoint_id, &job.secret_sealed)?];
    if let (Some(prev), Some(until)) = (&job.previous_secret_sealed, job.previous_secret_until.map(|t| t.0))
        && until > Utc::now()
    {
        keys.push(super::unseal(state, &job.endpoint_id, prev)?);
    }
    let mut out = Vec::new();
    for key in keys {
        out.push(standardwebhooks::Webhook::from_bytes(key)?.sign(&job.delivery_id, timestamp, body.as_bytes())?);
    }
    Ok(out.join(" "))
}

async fn attempt(state: &AppState, client: &reqwest::Client, job: Job) -> Outcome {
    let started = Utc::now();
    let clock = std::time::Instant::now();
    let mut out = Outcome { job, started_at: db::format_time(started), duration_ms: 0, status: None, retry_after: None, error: None, response: None };
    let body = body(&out.job);
    let signed = signatures(state, &out.job, started.timestamp(), &body);
    // The address is checked again at every attempt (a name's addresses are
    // checked by the client's resolver); user information is refused when
    // an endpoint is saved, not here, so an endpoint saved before goes on.
    let refused = super::target::check_target(&state.config, &out.job.url).err();
    match (signed, refused) {
        (Err(e), _) => out.error = Some(format!("signing failed: {e}")),
        (_, Some(why)) => out.error = Some(why),
        (Ok(signature), None) => {
            let request = client
                .post(&out.job.url)
                .header("content-type", "application/json")
                .header("webhook-id", &out.job.delivery_id)
                .header("webhook-timestamp", started.timestamp().to_string())
                .header("webhook-signature", signature)
                .body(body);
            let sent = hub_kernel::outbound::send(request).await;
            match sent {
                Ok(mut res) => {
                    out.status = Some(res.status().as_u16());
                    out.retry_after = retry_after(res.headers());
                    let mut excerpt = Vec::new();
                    while excerpt.len() < RESPONSE_EXCERPT {
                        match res.chunk().await {
                            Ok(Some(chunk)) => excerpt.extend_from_slice(&chunk[..chunk.len().min(RESPONSE_EXCERPT - excerpt.len())]),
                            _ => break,
                        }
                    }
                    out.response = (!excerpt.is_empty()).then(|| String::from_utf8_lossy(&excerpt).into_owned());
                    if !res.status().is_success() {
                        out.error = Some(format!("the receiver answered {}", res.status()));
                    }
                }
                Err(e) => out.error = Some(describe(&e)),
            }
        }
    }
    out.duration_ms = i64::try_from(clock.elapsed().as_millis()).unwrap_or(i64::MAX);
    out
}

fn describe(e: &reqwest::Error) -> String {
    let mut text = if e.is_timeout() { "no answer within the timeout".to_string() } else { e.to_string() };
    // reqwest names the URL it failed on; the text is stored and shown to
    // the tenant and the operator, so it names it as the log would.
    if let Some(url) = e.url() {
        text = text.replace(url.as_str(), &hub_kernel::outbound::redact(url));
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text.chars().take(500).collect()
}

/// Records a round's attempts and their consequences in one transaction.
async fn record(state: &AppState, mut outcomes: Vec<Outcome>) -> ApiResult<()> {
    // By delivery id: the order an endpoint's deletion locks them in, so
    // the two never wait for each other in a circle.
    outcomes.sort_by(|a, b| a.job.delivery_id.cmp(&b.job.delivery_id));
    let now = Utc::now();
    let now_text = db::format_time(now);
    let cutoff = db::format_time(now - TimeDelta::days(FAILING_DAYS));
    let mut tx = state.db.begin().await?;
    let mut counted = Vec::with_capacity(outcomes.len());
    for o in outcomes {
        let j = &o.job;
        let attempts = j.attempts + 1;
        sqlx::query(
            "INSERT INTO webhook_attempt (delivery_id, attempt, tenant_id, started_at, duration_ms, status_code, error, response) \
             VALUES ($1, (SELECT COALESCE(MAX(attempt), 0) + 1 FROM webhook_attempt WHERE delivery_id = $1), $2, $3, $4, $5, $6, $7)",
        )
        .bind(&j.delivery_id)
        .bind(&j.tenant_id)
        .bind(&o.started_at)
        .bind(o.duration_ms)
        .bind(o.status.map(i64::from))
        .bind(&o.error)
        .bind(&o.response)
        .execute(&mut *tx)
        .await?;
        let step = next(attempts, o.status, o.retry_after, rand_unit());
        counted.push(match step {
            Next::Succeeded => "succeeded",
            Next::Retry(_) => "retry",
            Next::Dead => "dead",
            Next::Gone => "gone",
        });
        let (status, next_at, finished) = match step {
            Next::Succeeded => ("succeeded", now_text.clone(), Some(now_text.clone())),
            Next::Retry(secs) => ("pending", db::format_time(now + TimeDelta::seconds(secs)), None),
            Next::Dead | Next::Gone => ("dead", now_text.clone(), Some(now_text.clone())),
        };
        sqlx::query(
            "UPDATE webhook_delivery SET status = $2, attempts = $3, next_attempt_at = $4, finished_at = $5, leased_until = NULL, \
             last_status_code = $6, last_error = $7 WHERE delivery_id = $1",
        )
        .bind(&j.delivery_id)
        .bind(status)
        .bind(attempts)
        .bind(&next_at)
        .bind(&finished)
        .bind(o.status.map(i64::from))
        .bind(&o.error)
        .execute(&mut *tx)
        .await?;
        if step == Next::Succeeded {
            sqlx::query("UPDATE webhook_endpoint SET failure_streak = 0, failing_since = NULL, last_success_at = $2 WHERE endpoint_id = $1")
                .bind(&j.endpoint_id)
                .bind(&now_text)
                .execute(&mut *tx)
                .await?;
            continue;
        }
        sqlx::query(
            "UPDATE webhook_endpoint SET failure_streak = failure_streak + 1, failing_since = COALESCE(failing_since, $2), last_failure_at = $2 \
             WHERE endpoint_id = $1",
        )
        .bind(&j.endpoint_id)
        .bind(&now_text)
        .execute(&mut *tx)
        .await?;
        let reason = if step == Next::Gone { "the receiver answered 410 Gone".to_string() } else { format!("failing for {FAILING_DAYS} days") };
        sqlx::query(
            "UPDATE webhook_endpoint SET status = 'disabled', disabled_reason = $2 WHERE endpoint_id = $1 AND status = 'active' AND ($3 = 1 OR failing_since <= $4)",
        )
        .bind(&j.endpoint_id)
        .bind(&reason)
        .bind(i64::from(step == Next::Gone))
        .bind(&cutoff)
        .execute(&mut *tx)
        .await?;
        if matches!(step, Next::Dead | Next::Gone) {
            let payload = json!({ "delivery_id": j.delivery_id, "endpoint_id": j.endpoint_id, "event_type": j.event_type, "attempts": attempts, "last_status_code": o.status });
            audit::record_system(&mut tx, &j.tenant_id, "hub", events::WEBHOOK_DELIVERY_DEAD_LETTERED, payload).await?;
        }
    }
    tx.commit().await?;
    for outcome in counted {
        metrics::counter!("hub_webhook_attempts_total", "outcome" => outcome).increment(1);
    }
    Ok(())
}

/// A number in 0..1 for the jitter.
fn rand_unit() -> f64 {
    let b = hub_kernel::crypto::random_bytes(4);
    f64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])) / f64::from(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_follow_the_schedule_then_die() {
        assert_eq!(next(1, Some(204), None, 0.5), Next::Succeeded);
        assert_eq!(next(1, Some(500), None, 0.5), Next::Retry(5));
        assert_eq!(next(2, None, None, 0.5), Next::Retry(300));
        assert_eq!(next(7, Some(502), None, 0.5), Next::Retry(36_000));
        assert_eq!(next(8, Some(500), None, 0.5), Next::Dead, "eight attempts in all");
        assert_eq!(next(3, Some(410), None, 0.5), Next::Gone);
        // ±20% jitter.
        assert_eq!((next(2, Some(500), None, 0.0), next(2, Some(500), None, 1.0)), (Next::Retry(240), Next::Retry(360)));
        // Retry-After on 429 and 503 waits longer, never shorter, at most a day.
        assert_eq!(next(1, Some(429), Some(120), 0.5), Next::Retry(120));
        assert_eq!(next(1, Some(503), Some(1), 0.5), Next::Retry(5));
        assert_eq!(next(1, Some(503), Some(10_000_000), 0.5), Next::Retry(86_400));
        assert_eq!(next(1, Some(500), Some(120), 0.5), Next::Retry(5), "only 429 and 503 ask for a wait");
        assert_eq!(next(1, Some(302), None, 0.5), Next::Retry(5), "a redirect is not followed and not a success");
    }
}
