//! Operations: Prometheus metrics at `GET /metrics`, the request id every
//! request carries into its log lines and its answer, and `GET /ready` for
//! the load balancer in front of several replicas.
//!
//! Metrics go through the `metrics` facade to one process-wide Prometheus
//! recorder. Labels are bounded: route templates (never raw paths), status
//! classes, the gate's fixed refusal reasons; never a tenant or an id.

use std::{
    collections::HashMap,
    sync::{Arc, LazyLock, OnceLock, RwLock},
    time::{Duration, Instant},
};

use axum::{
    Json,
    extract::{MatchedPath, Request, State},
    http::{HeaderValue, Method, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use serde_json::{Value, json};
use tracing::Instrument;
use utoipa_axum::{router::OpenApiRouter, routes};

use hub_kernel::{error::ApiError, state::AppState};

/// Latency buckets, in seconds.
const LATENCY: &[f64] = &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
/// Batch size buckets.
const SIZES: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0];

/// The process's recorder, installed on first use (one per process: the
/// hubs of a test process share it).
pub fn recorder() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY)
            .and_then(|b| b.set_buckets_for_metric(Matcher::Full("hub_audit_commit_batch_size".into()), SIZES))
            .expect("static buckets")
            .install_recorder()
            .expect("the only metrics recorder of the process")
    })
}

/// Drains the recorder's histograms now and then, as its docs ask; once
/// per process.
pub fn spawn_upkeep() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| hub_kernel::db::every(Duration::from_secs(5), || async { recorder().run_upkeep() }));
}

/// The route template a request matched, carried out on its answer.
#[derive(Clone)]
struct Route(MatchedPath);

/// Per route (inner layer): puts the matched template on the answer.
pub async fn mark_route(req: Request, next: Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().cloned().map(Route);
    let mut res = next.run(req).await;
    if let Some(route) = route {
        res.extensions_mut().insert(route);
    }
    res
}

/// The two series of one (route, method, status class), registered once:
/// a request then costs a read lock and two atomic updates, not a label
/// set built and hashed anew.
type Series = (metrics::Counter, metrics::Histogram);
type SeriesKey = (Arc<str>, Method, &'static str);
static SERIES: LazyLock<RwLock<HashMap<SeriesKey, Series>>> = LazyLock::new(Default::default);

fn series(route: Arc<str>, method: Method, status: &'static str) -> Series {
    let key = (route, method, status);
    if let Some(s) = SERIES.read().expect("series lock").get(&key) {
        return s.clone();
    }
    let labels = [("route", key.0.to_string()), ("method", key.1.as_str().to_owned()), ("status", status.to_owned())];
    let made = (metrics::counter!("hub_http_requests_total", &labels), metrics::histogram!("hub_http_request_duration_seconds", &labels));
    SERIES.write().expect("series lock").entry(key).or_insert(made).clone()
}

/// Outermost layer: the request id, from `x-request-id` when the caller
/// sends a usable one (1 to 128 visible ASCII characters), otherwise a new
/// UUID; every log line of the request carries it (a span), and so does
/// the answer's `x-request-id`. Then the count of the answer by route
/// template, method and status class, with its latency; answers refused
/// before routing (the gate's 401s, unknown paths) have the route
/// `unmatched`.
pub async fn observe(req: Request, next: Next) -> Response {
    let given =
        req.headers().get("x-request-id").and_then(|v| v.to_str().ok()).filter(|v| (1..=128).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_graphic()));
    let id = given.map(str::to_owned).unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let method = req.method().clone();
    let span = tracing::info_span!("request", id = %id, method = %method, path = %req.uri().path());
    let start = Instant::now();
    let mut res = next.run(req).instrument(span).await;
    let status = match res.status().as_u16() {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    };
    let route: Arc<str> = match res.extensions().get::<Route>() {
        Some(Route(m)) => Arc::from(m.as_str()),
        None => Arc::from("unmatched"),
    };
    let (count, latency) = series(route, method, status);
    count.increment(1);
    latency.record(start.elapsed().as_secs_f64());
    if let Ok(value) = HeaderValue::from_str(&id) {
        res.headers_mut().insert("x-request-id", value);
    }
    res
}

/// Prometheus metrics in the text format. For the operator
/// (`x-admin-ops-token`) unless `HUB_METRICS_PUBLIC` makes it public.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "the metrics, Prometheus text format 0.0.4", content_type = "text/plain", body = String)))]
async fn metrics(State(state): State<AppState>) -> Response {
    for (name, pool) in [("read", &state.db.read), ("write", state.db.writer())] {
        let (size, idle) = (pool.size() as f64, pool.num_idle() as f64);
        metrics::gauge!("hub_db_pool_connections", "pool" => name, "state" => "idle").set(idle);
        metrics::gauge!("hub_db_pool_connections", "pool" => name, "state" => "in_use").set(size - idle);
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], recorder().render()).into_response()
}

/// Readiness: 200 when this replica can reach its database within two
/// seconds, 503 otherwise. A replica listens only once its migrations are
/// applied, so it is never ready before. `/health` stays the liveness answer.
#[utoipa::path(get, path = "/ready", tag = "operations",
    responses((status = 200, description = "ready to serve", body = Object), (status = 503, description = "the database is unreachable", body = hub_kernel::catalogue::ErrorBody)))]
async fn ready(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let probe = sqlx::query_scalar::<_, i32>("SELECT 1").fetch_one(state.db.writer());
    match tokio::time::timeout(Duration::from_secs(2), probe).await {
        Ok(Ok(_)) => Ok(Json(json!({ "success": true, "data": { "status": "ready" } }))),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness: the database is unreachable");
            Err(ApiError::Unavailable("the database is unreachable"))
        }
        Err(_) => Err(ApiError::Unavailable("the database did not answer within 2 s")),
    }
}

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(metrics)).routes(routes!(ready))
}
