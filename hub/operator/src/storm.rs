//! Storm ingest: storm reports of a recent window, from the first
//! provider of a chain that answers, upserted idempotently.
//!
//! The chain is every feed of `HUB_STORM_FEED_URLS`, in order, then the
//! synthetic provider. A feed is asked `GET <url>?from=<RFC 3339>&to=<RFC
//! 3339>` and answers `{ "events": [{ "id", "kind", "occurred_at", "lat",
//! "lon", "magnitude" }] }`; a feed that fails (no answer within 10 s, a
//! status other than 2xx, a redirect among them, an answer longer than 4
//! MiB, a body of another shape, an address the outbound policy refuses)
//! passes the turn to the next. Feeds are called as webhook receivers
//! are: through the guarded client, so outside development mode a private
//! or loopback address needs `HUB_WEBHOOK_ALLOWED_HOSTS`. The synthetic provider always answers, so an outage of every
//! feed is no 4xx: it derives 0 to 2 reports for each whole UTC hour of
//! the window from a SHA-256 of the hour, the same for the same hour on
//! every run. Its reports are stored under the provider `synthetic` and
//! are not observations: consumers filter them out by provider.
//!
//! Reports are keyed by (provider, the provider's id): a repeated ingest
//! rewrites the same rows. Each report falls in a 0.1-degree grid cell;
//! a cell's count, largest magnitude and latest report are recomputed
//! from its reports, never incremented, so they stay right on a repeat.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use hub_kernel::gate::Operator;
use hub_kernel::prelude::*;
use hub_platform::webhook::target;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(ingest_now))
}

const KINDS: [&str; 3] = ["hail", "wind", "tornado"];
/// Reports taken from one answer at most.
const MAX_EVENTS: usize = 10_000;
const FEED_TIMEOUT: Duration = Duration::from_secs(10);
pub const SYNTHETIC: &str = "synthetic";

/// A storm report as a provider gives it.
#[derive(Clone, Debug, Deserialize)]
struct Report {
    id: String,
    kind: String,
    occurred_at: String,
    lat: f64,
    lon: f64,
    magnitude: f64,
}

#[derive(Deserialize)]
struct FeedAnswer {
    events: Vec<Report>,
}

impl Report {
    /// A report of a known kind, a valid place and time inside the window.
    fn usable(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Option<(DateTime<Utc>, String)> {
        let at = db::parse_time(&self.occurred_at)?;
        let valid = !self.id.is_empty()
            && self.id.len() <= 200
            && KINDS.contains(&self.kind.as_str())
            && (-90.0..=90.0).contains(&self.lat)
            && (-180.0..=180.0).contains(&self.lon)
            && self.magnitude.is_finite()
            && self.magnitude >= 0.0;
        (valid && at >= from && at <= to).then(|| (at, cell_of(self.lat, self.lon)))
    }
}

/// The 0.1-degree grid cell of a point: `<lat index>:<lon index>`.
fn cell_of(lat: f64, lon: f64) -> String {
    format!("{}:{}", (lat * 10.0).floor() as i64, (lon * 10.0).floor() as i64)
}

/// A feed's answer is read up to this many bytes (4 MiB: 10000 reports
/// of a hundred-odd bytes each fit with room); a longer one is refused
/// once read that far, so a feed cannot make the hub hold more.
pub const MAX_FEED_BYTES: usize = 4 << 20;

/// Asks one feed. Every failure is logged once, with the feed's URL
/// redacted, and passes the turn (`None`).
async fn from_feed(state: &AppState, client: &reqwest::Client, url: &str, from: DateTime<Utc>, to: DateTime<Utc>) -> Option<Vec<Report>> {
    let feed = hub_kernel::outbound::redact_url(url);
    // The client's resolver judges the addresses a name resolves to; a
    // literal address is never resolved, so it is judged here.
    if let Err(why) = target::check_target(&state.config, url) {
        tracing::warn!(feed, why, "storm feed refused: its address is not admitted");
        return None;
    }
    let res = hub_kernel::outbound::send(client.get(url).query(&[("from", db::format_time(from)), ("to", db::format_time(to))])).await;
    let res = match res {
        // A redirect is not followed (the guarded client's policy): it is
        // a non-2xx answer like any other.
        Ok(r) if r.status().is_success() => r,
        Ok(r) => {
            tracing::warn!(feed, status = %r.status(), "storm feed refused");
            return None;
        }
        Err(e) => {
            tracing::warn!(feed, error = %e.without_url(), "storm feed unreachable");
            return None;
        }
    };
    let too_long = || tracing::warn!(feed, limit = MAX_FEED_BYTES, "storm feed answer refused: longer than the limit");
    let body = match target::read_bounded(res, MAX_FEED_BYTES).await {
        Ok(body) => body,
        Err(target::Unread::TooLong) => {
            too_long();
            return None;
        }
        Err(target::Unread::Failed(e)) => {
            tracing::warn!(feed, error = %e.without_url(), "storm feed answer unreadable");
            return None;
        }
    };
    match serde_json::from_slice::<FeedAnswer>(&body) {
        Ok(a) => Some(a.events),
        Err(e) => {
            tracing::warn!(feed, error = %e, "storm feed answer unreadable");
            None
        }
    }
}

/// The synthetic provider's reports for the whole hours of the window.
fn synthetic(from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<Report> {
    let mut out = Vec::new();
    let mut hour = from.duration_trunc(TimeDelta::hours(1)).unwrap_or(from);
    while hour <= to {
        let stamp = db::format_time(hour);
        let seed = hub_kernel::crypto::sha256(format!("storm-synthetic-v1:{stamp}").as_bytes());
        let unit = |i: usize| f64::from(u16::from_be_bytes([seed[i], seed[i + 1]])) / f64::from(u16::MAX);
        for n in 0..usize::from(seed[0] % 3) {
            let base = 1 + n * 8;
            let kind = KINDS[usize::from(seed[base]) % 3];
            let magnitude = match kind {
                "hail" => 0.75 + unit(base + 1) * 3.25,
                "wind" => 58.0 + unit(base + 1) * 42.0,
                _ => (unit(base + 1) * 5.0).floor(),
            };
            out.push(Report {
                id: format!("{}-{n}", hex::encode(&seed[..8])),
                kind: kind.to_string(),
                occurred_at: db::format_time(hour + TimeDelta::minutes(i64::from(seed[base + 3] % 60))),
                lat: 25.0 + unit(base + 4) * 24.0,
                lon: -124.0 + unit(base + 6) * 57.0,
                magnitude: (magnitude * 100.0).round() / 100.0,
            });
        }
        hour += TimeDelta::hours(1);
    }
    out
}

#[derive(Deserialize, ToSchema)]
#[schema(as = StormIngestRequest)]
struct IngestRequest {
    /// Hours back from now, at most thirty days (default 24).
    #[schema(minimum = 1, maximum = 720)]
    lookback_hours: Option<i64>,
}

#[derive(Serialize, ToSchema)]
#[schema(as = StormIngestResult)]
struct IngestResult {
    /// The provider whose reports were ingested.
    events_from: String,
    /// Reports upserted (those of a known kind, place and time in the window).
    events_ingested: usize,
    /// Distinct grid cells those reports fall in.
    cells_ingested: usize,
    /// The providers asked, in order, the answering one last.
    providers_tried: Vec<String>,
}

/// Ingests the storm reports of the last `lookback_hours` now.
#[utoipa::path(post, path = "/admin/storm/ingest-now", tag = "admin-storm", request_body = IngestRequest,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "lookback_hours": 2 } }))),
    responses((status = 200, description = "what was ingested", body = Data<IngestResult>)))]
async fn ingest_now(State(state): State<AppState>, Operator(who): Operator, raw: axum::body::Bytes) -> ApiResult<Data<IngestResult>> {
    // The body is optional: none at all means every default.
    let body: IngestRequest = if raw.iter().all(u8::is_ascii_whitespace) {
        IngestRequest { lookback_hours: None }
    } else {
        let value = hub_kernel::nesting::parse_json(&raw, "request body")?;
        if value.is_object() {
            hub_kernel::nul::check_value(&value)?;
        }
        hub_kernel::contract::parse(value)?
    };
    let lookback = body.lookback_hours.unwrap_or(24);
    let to = Utc::now();
    let from = to - TimeDelta::hours(lookback);

    let mut tried = Vec::new();
    let mut answer = None;
    if !state.config.storm_feed_urls.is_empty() {
        // The guarded client of every call to a configured address: no
        // redirects, and a resolver that drops addresses the policy refuses.
        let client = target::guarded_client(&state.config).timeout(FEED_TIMEOUT).user_agent("hub-storm/1").build().map_err(anyhow::Error::from)?;
        for (i, url) in state.config.storm_feed_urls.iter().enumerate() {
            let name = format!("feed-{}", i + 1);
            tried.push(name.clone());
            if let Some(reports) = from_feed(&state, &client, url, from, to).await {
                answer = Some((name, reports));
                break;
            }
        }
    }
    let (provider, reports) = answer.unwrap_or_else(|| {
        tried.push(SYNTHETIC.to_string());
        (SYNTHETIC.to_string(), synthetic(from, to))
    });

    let now = db::now();
    let mut tx = state.db.begin().await?;
    let mut touched: BTreeSet<(String, String)> = BTreeSet::new();
    let mut cells: BTreeSet<String> = BTreeSet::new();
    let mut ingested = 0;
    for report in reports.iter().take(MAX_EVENTS) {
        let Some((at, cell)) = report.usable(from, to) else { continue };
        // A report that moved leaves its former cell to be recomputed too.
        let before: Option<(String, String)> = sqlx::query_as("SELECT cell_id, kind FROM storm_event WHERE provider = $1 AND source_id = $2")
            .bind(&provider)
            .bind(&report.id)
            .fetch_optional(&mut *tx)
            .await?;
        touched.extend(before);
        sqlx::query(
            "INSERT INTO storm_event (provider, source_id, kind, occurred_at, lat, lon, magnitude, cell_id, ingested_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (provider, source_id) DO UPDATE SET kind = excluded.kind, \
             occurred_at = excluded.occurred_at, lat = excluded.lat, lon = excluded.lon, magnitude = excluded.magnitude, cell_id = excluded.cell_id, \
             ingested_at = excluded.ingested_at",
        )
        .bind(&provider)
        .bind(&report.id)
        .bind(&report.kind)
        .bind(db::format_time(at))
        .bind(report.lat)
        .bind(report.lon)
        .bind(report.magnitude)
        .bind(&cell)
        .bind(&now)
        .execute(&mut *tx)
        .await?;
        touched.insert((cell.clone(), report.kind.clone()));
        cells.insert(cell);
        ingested += 1;
    }
    for (cell, kind) in &touched {
        let summary: (i64, Option<f64>, Option<String>) =
            sqlx::query_as("SELECT COUNT(*), MAX(magnitude), MAX(occurred_at) FROM storm_event WHERE cell_id = $1 AND kind = $2")
                .bind(cell)
                .bind(kind)
                .fetch_one(&mut *tx)
                .await?;
        match summary {
            (n, Some(max), Some(last)) if n > 0 => {
                sqlx::query(
                    "INSERT INTO storm_cell (cell_id, kind, event_count, max_magnitude, last_event_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6) \
                     ON CONFLICT (cell_id, kind) DO UPDATE SET event_count = excluded.event_count, max_magnitude = excluded.max_magnitude, \
                     last_event_at = excluded.last_event_at, updated_at = excluded.updated_at",
                )
                .bind(cell)
                .bind(kind)
                .bind(n)
                .bind(max)
                .bind(&last)
                .bind(&now)
                .execute(&mut *tx)
                .await?;
            }
            _ => {
                sqlx::query("DELETE FROM storm_cell WHERE cell_id = $1 AND kind = $2").bind(cell).bind(kind).execute(&mut *tx).await?;
            }
        }
    }
    let result = IngestResult { events_from: provider, events_ingested: ingested, cells_ingested: cells.len(), providers_tried: tried };
    let payload = json!({
        "events_from": result.events_from, "events_ingested": ingested, "cells_ingested": result.cells_ingested,
        "providers_tried": result.providers_tried, "from": db::format_time(from), "to": db::format_time(to),
    });
    audit::record_operator(&mut tx, &who, events::STORM_INGESTED, payload).await?;
    tx.commit().await?;
    Ok(ok(result))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_synthetic_provider_is_deterministic_and_inside_its_window() {
        let to = db::parse_time("2026-03-02T12:30:00Z").unwrap();
        let from = to - TimeDelta::hours(48);
        let a = synthetic(from, to);
        let b = synthetic(from, to);
        assert_eq!(a.iter().map(|r| &r.id).collect::<Vec<_>>(), b.iter().map(|r| &r.id).collect::<Vec<_>>());
        assert!(!a.is_empty(), "48 hours of 0 to 2 reports an hour");
        for r in &a {
            assert!(KINDS.contains(&r.kind.as_str()));
            assert!((25.0..=49.0).contains(&r.lat) && (-124.0..=-67.0).contains(&r.lon), "{r:?}");
        }
    }

    #[test]
    fn cells_are_a_tenth_of_a_degree() {
        assert_eq!(cell_of(35.47, -97.52), "354:-976");
        assert_eq!(cell_of(35.45, -97.45), "354:-975");
    }
}
