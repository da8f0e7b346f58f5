//! Operations: Prometheus metrics at `GET /metrics`, the request id every
//! request carries into its log lines and its answer, and `GET /ready` for
//! the load balancer in front of several replicas.
//!
//! Metrics go through the `metrics` facade to one process-wide Prometheus
//! recorder, except the per-request HTTP series, which each thread counts
//! on its own and the scrape adds up (see `SHARDS`). Labels are bounded:
//! route templates (never raw paths), status classes, the gate's fixed
//! refusal reasons; never a tenant or an id.

use std::{
    cell::Cell,
    collections::{BTreeMap, HashMap},
    fmt::Write,
    sync::{Arc, Mutex, OnceLock},
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
use tracing::{Instrument, field::Empty};
use utoipa_axum::{router::OpenApiRouter, routes};

use hub_kernel::{
    error::{ApiError, ApiResult},
    gate::MATCHED_ROUTE,
    state::AppState,
};

/// Latency buckets, in seconds.
const LATENCY: &[f64] = &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
/// Batch size buckets.
const SIZES: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0];

/// The process's recorder, installed on first use (one per process: the
/// hubs of a test process share it).
pub fn recorder() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let handle = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY)
            .and_then(|b| b.set_buckets_for_metric(Matcher::Full("hub_audit_commit_batch_size".into()), SIZES))
            .expect("static buckets")
            .install_recorder()
            .expect("the only metrics recorder of the process");
        describe_and_publish();
        handle
    })
}

/// The recorder's families: name, kind and help text (README.md's
/// Operations section lists them; the per-request HTTP series are
/// `render_http`'s).
const FAMILIES: &[(&str, Kind, &str)] = &[
    ("hub_gate_refusals_total", Kind::Counter, "Requests the gate refused, by reason: its fixed texts (the 401 reasons, rate limit, scope, role, policy)."),
    (
        "hub_audit_appends_total",
        Kind::Counter,
        "Audit entries appended, by path: transaction (in a request's transaction) or group_commit (the group-commit appender, at its commit).",
    ),
    ("hub_audit_commit_batch_size", Kind::Histogram, "Entries written by each commit of the audit group-commit appender."),
    ("hub_command_transitions_total", Kind::Counter, "Commands entering each state."),
    ("hub_commands", Kind::Gauge, "Commands not yet finished, by state; read from the database at a scrape, at most once a second."),
    ("hub_agents_connected", Kind::Gauge, "Edge agents connected to this hub now, by transport (quic, sse)."),
    ("hub_sync_batches_total", Kind::Counter, "Device sync batches received."),
    ("hub_sync_events_total", Kind::Counter, "Device sync events received, by outcome (accepted, duplicate, rejected)."),
    ("hub_db_pool_connections", Kind::Gauge, "Connections of each database pool (read, write), by state (idle, in_use)."),
    ("hub_db_pool_max_connections", Kind::Gauge, "The most connections each database pool (read, write) may open."),
    ("hub_db_pool_acquire_seconds", Kind::Histogram, "Time to acquire a connection from each database pool (read, write), sampled every 5 s."),
    ("hub_webhook_attempts_total", Kind::Counter, "Webhook delivery attempts, by outcome (succeeded, retry, dead, gone)."),
    (
        "hub_webhook_backlog",
        Kind::Gauge,
        "Webhook work waiting, by stage: outbox (events not yet fanned out), pending (deliveries awaiting an attempt); read at a scrape.",
    ),
];

/// What a family of [`FAMILIES`] is.
#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One series: its family, the family's kind, and its one label (name,
/// value) if it has one.
type Series = (&'static str, Kind, Option<(&'static str, &'static str)>);

/// The series published from the start, at zero until used: each
/// family's label values known in advance (the code that counts them names
/// them as constants). The gate's 401 reasons come from several places
/// and appear when first counted; its other refusals are these. The gauges
/// read at a scrape (`hub_commands`, `hub_webhook_backlog`, the pool
/// sizes) are set by every scrape before it renders.
fn zero_series() -> Vec<Series> {
    let mut series = Vec::new();
    let mut add = |name: &'static str, kind: Kind, label: &'static str, values: &[&'static str]| {
        series.extend(values.iter().map(|v| (name, kind, Some((label, *v)))));
    };
    add("hub_gate_refusals_total", Kind::Counter, "reason", &["rate limit", "scope", "role", "policy"]);
    add("hub_audit_appends_total", Kind::Counter, "path", &["transaction", "group_commit"]);
    add("hub_command_transitions_total", Kind::Counter, "state", hub_platform::command::STATES);
    add("hub_agents_connected", Kind::Gauge, "transport", &["quic", "sse"]);
    add("hub_sync_events_total", Kind::Counter, "outcome", &["accepted", "duplicate", "rejected"]);
    add("hub_db_pool_acquire_seconds", Kind::Histogram, "pool", &["read", "write"]);
    add("hub_webhook_attempts_total", Kind::Counter, "outcome", &["succeeded", "retry", "dead", "gone"]);
    series.push(("hub_audit_commit_batch_size", Kind::Histogram, None));
    series.push(("hub_sync_batches_total", Kind::Counter, None));
    series
}

/// Gives every family of the recorder its help text and publishes the
/// series of [`zero_series`]; once, when the recorder is installed.
fn describe_and_publish() {
    for &(name, kind, help) in FAMILIES {
        match kind {
            Kind::Counter => metrics::describe_counter!(name, help),
            Kind::Gauge => metrics::describe_gauge!(name, help),
            Kind::Histogram => metrics::describe_histogram!(name, help),
        }
    }
    for (name, kind, label) in zero_series() {
        let labels: Vec<metrics::Label> = label.map(|(k, v)| metrics::Label::new(k, v)).into_iter().collect();
        // Registering a series is enough: it renders at zero until used.
        match kind {
            Kind::Counter => metrics::counter!(name, labels).increment(0),
            Kind::Gauge => metrics::gauge!(name, labels).increment(0.0),
            Kind::Histogram => {
                let _ = metrics::histogram!(name, labels);
            }
        }
    }
}

/// Drains the recorder's histograms now and then, as its docs ask; once
/// per process.
pub fn spawn_upkeep() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| hub_kernel::db::every(Duration::from_secs(5), || async { recorder().run_upkeep() }));
}

/// Method labels: the standard methods by name; any other is `other` (a
/// client's invented method must not add series).
const METHODS: [&str; 8] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "other"];
/// Status labels: the class of the status code.
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// The answers of one (route, method, status class) counted on one thread:
/// how many, their total latency, and how many fell in each `LATENCY`
/// bucket (not cumulative; the scrape adds them up).
#[derive(Clone, Copy, Default)]
struct Tally {
    count: u64,
    sum: f64,
    buckets: [u64; LATENCY.len()],
}

impl Tally {
    fn record(&mut self, seconds: f64) {
        self.count += 1;
        self.sum += seconds;
        if let Some(b) = LATENCY.iter().position(|&le| seconds <= le) {
            self.buckets[b] += 1;
        }
    }

    fn add(&mut self, other: &Tally) {
        self.count += other.count;
        self.sum += other.sum;
        for (b, n) in self.buckets.iter_mut().zip(other.buckets) {
            *b += n;
        }
    }
}

/// One route's tallies, by `METHODS` index and then `CLASSES` index.
type RouteTallies = [Option<Tally>; METHODS.len() * CLASSES.len()];
/// One thread's tallies by route template. The templates are the
/// router's (and `unmatched`): a bounded set that callers cannot grow, so
/// the quicker hash is safe here.
type Shard = HashMap<Box<str>, Box<RouteTallies>, foldhash::fast::RandomState>;

/// Every thread's shard, which the scrape adds up. The HTTP series are
/// counted per thread rather than in the recorder's shared atomics: those
/// took every request's updates on cache lines that the two cores then
/// passed back and forth, about 1 µs a request (4-9% of a `GET /api/me`).
/// A thread's own shard lock is taken by that thread alone except during
/// a scrape.
static SHARDS: Mutex<Vec<Arc<Mutex<Shard>>>> = Mutex::new(Vec::new());

thread_local! {
    static SHARD: Arc<Mutex<Shard>> = {
        let shard = Arc::default();
        SHARDS.lock().expect("shards lock").push(Arc::clone(&shard));
        shard
    };
}

/// Counts one answer of `route` with its latency (`method` and `class`
/// index `METHODS` and `CLASSES`).
fn count(route: &str, method: usize, class: usize, seconds: f64) {
    let slot = method * CLASSES.len() + class;
    SHARD.with(|shard| {
        let mut map = shard.lock().expect("metrics shard lock");
        if let Some(tallies) = map.get_mut(route) {
            return tallies[slot].get_or_insert_default().record(seconds);
        }
        map.entry(route.into()).or_insert_with(|| Box::new([None; METHODS.len() * CLASSES.len()]))[slot].get_or_insert_default().record(seconds);
    });
}

/// The help and type lines of the two HTTP families.
const HTTP_REQUESTS_HEAD: &str = "# HELP hub_http_requests_total Answers of the HTTP API, by route template (unmatched before routing), method and status class.\n\
                                  # TYPE hub_http_requests_total counter\n";
const HTTP_DURATION_HEAD: &str = "# HELP hub_http_request_duration_seconds Time to answer a request of the HTTP API, by route template (unmatched before routing), method and status class.\n\
                                  # TYPE hub_http_request_duration_seconds histogram\n";

/// The HTTP series of every thread added up, in the Prometheus text
/// format: `hub_http_requests_total` and the histogram
/// `hub_http_request_duration_seconds`, by route, method and status class.
fn render_http() -> String {
    let mut all: BTreeMap<(Box<str>, usize), Tally> = BTreeMap::new();
    for shard in SHARDS.lock().expect("shards lock").iter() {
        for (route, tallies) in shard.lock().expect("metrics shard lock").iter() {
            for (slot, tally) in tallies.iter().enumerate() {
                if let Some(t) = tally {
                    all.entry((route.clone(), slot)).or_default().add(t);
                }
            }
        }
    }
    let series: Vec<(String, Tally)> = all
        .into_iter()
        .map(|((route, slot), t)| {
            let route = route.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
            (format!("route=\"{route}\",method=\"{}\",status=\"{}\"", METHODS[slot / CLASSES.len()], CLASSES[slot % CLASSES.len()]), t)
        })
        .collect();
    // The families are written even before their first answer, so a
    // scrape always describes them.
    let mut out = String::from(HTTP_REQUESTS_HEAD);
    for (labels, t) in &series {
        let _ = writeln!(out, "hub_http_requests_total{{{labels}}} {}", t.count);
    }
    out.push_str(HTTP_DURATION_HEAD);
    for (labels, t) in &series {
        let mut below = 0;
        for (le, n) in LATENCY.iter().zip(t.buckets) {
            below += n;
            let _ = writeln!(out, "hub_http_request_duration_seconds_bucket{{{labels},le=\"{le}\"}} {below}");
        }
        let _ = writeln!(out, "hub_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}", t.count);
        let _ = writeln!(out, "hub_http_request_duration_seconds_sum{{{labels}}} {}", t.sum);
        let _ = writeln!(out, "hub_http_request_duration_seconds_count{{{labels}}} {}", t.count);
    }
    out
}

/// The index in `METHODS` of a request's method.
fn method_index(m: &Method) -> usize {
    match *m {
        Method::GET => 0,
        Method::POST => 1,
        Method::PUT => 2,
        Method::PATCH => 3,
        Method::DELETE => 4,
        Method::HEAD => 5,
        Method::OPTIONS => 6,
        _ => 7,
    }
}

/// The index in `CLASSES` of a status code's class (anything past 5xx
/// counts as 5xx).
fn class_index(status: u16) -> usize {
    usize::from(status / 100).clamp(1, 5) - 1
}

/// What the outermost layer does besides the request id: count answers
/// for the metrics, and check each answer's status against the document.
#[derive(Clone, Default)]
pub struct Observing {
    pub metrics: bool,
    pub statuses: Option<Arc<Statuses>>,
}

/// The (method, route template, status) answers the document lists, and
/// the ones the hub gave that it does not: every status a route answers
/// must be in the document with its body. Debug builds check every answer
/// (the test suite drives every route, and a test whose hub answered an
/// undocumented status fails: `Server::undocumented_statuses`); release
/// builds do not check.
#[derive(Default)]
pub struct Statuses {
    documented: std::collections::HashSet<(String, String, u16)>,
    undocumented: Mutex<std::collections::BTreeSet<String>>,
}

impl Statuses {
    pub fn of(doc: &Value) -> Statuses {
        let mut documented = std::collections::HashSet::new();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            for method in crate::catalogue::METHODS {
                for status in item[method]["responses"].as_object().into_iter().flat_map(|r| r.keys()) {
                    if let Ok(code) = status.parse::<u16>() {
                        documented.insert((method.to_string(), path.clone(), code));
                    }
                }
            }
        }
        Statuses { documented, undocumented: Mutex::default() }
    }

    fn observe(&self, method: &str, route: &str, status: u16) {
        // HEAD is GET's answer without the body; an undocumented route
        // (a method the router answers 405) is the router's, not the document's.
        let method = if method == "head" { "get" } else { method };
        if self.documented.contains(&(method.to_string(), route.to_string(), status)) {
            return;
        }
        let documented_route = (100..600).any(|code| self.documented.contains(&(method.to_string(), route.to_string(), code)));
        if documented_route {
            let pair = format!("{} {route} answered {status}", method.to_uppercase());
            tracing::warn!(answer = %pair, "a status the document does not list");
            self.undocumented.lock().expect("statuses lock").insert(pair);
        }
    }

    /// The answers seen so far whose status the document lacks.
    pub fn undocumented(&self) -> Vec<String> {
        self.undocumented.lock().expect("statuses lock").iter().cloned().collect()
    }
}

/// Outermost layer: the request id, from `x-request-id` when the caller
/// sends a usable one (1 to 128 visible ASCII characters), otherwise a new
/// UUID; every log line of the request carries it (a span), and so does
/// the answer's `x-request-id`. Then, when metrics are on (the state), the
/// count of the answer by route template, method and status class, with
/// its latency; answers refused before routing (the gate's 401s, unknown
/// paths) have the route `unmatched`. When spans are exported, the span is
/// an HTTP server span with the route and the status of the answer (see
/// `telemetry::server_span`).
pub async fn observe(State(observing): State<Observing>, req: Request, next: Next) -> Response {
    let Observing { metrics: metrics_on, statuses } = observing;
    let given =
        req.headers().get("x-request-id").and_then(|v| v.to_str().ok()).filter(|v| (1..=128).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_graphic()));
    let id = given.map(str::to_owned).unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let method = method_index(req.method());
    // The fields OpenTelemetry's HTTP conventions name; the rest of the
    // server span's are for the export alone (`telemetry::server_span`).
    let span = tracing::info_span!("request", id = %id,
        http.request.method = %crate::telemetry::known_method(req.method()).unwrap_or("_OTHER"), url.path = %req.uri().path(),
        http.request.method_original = Empty, otel.name = Empty, otel.kind = Empty);
    let exported = crate::telemetry::server_span(&span, &req);
    let start = metrics_on.then(Instant::now);
    let checked = statuses.as_ref().map(|_| req.method().as_str().to_ascii_lowercase());
    let (mut res, route) = if metrics_on || exported.is_some() || checked.is_some() {
        // The gate's per-route layer fills the slot with the matched template.
        let answer = async move {
            let res = next.run(req).await;
            (res, MATCHED_ROUTE.with(Cell::take))
        };
        MATCHED_ROUTE.scope(Cell::new(None), answer).instrument(span).await
    } else {
        (next.run(req).instrument(span).await, None)
    };
    if let Some(start) = start {
        let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
        count(route, method, class_index(res.status().as_u16()), start.elapsed().as_secs_f64());
    }
    if let Some(exported) = exported {
        exported.end(route.as_ref().map(MatchedPath::as_str), res.status().as_u16());
    }
    if let (Some(statuses), Some(method), Some(route)) = (statuses, checked, route.as_ref()) {
        statuses.observe(&method, route.as_str(), res.status().as_u16());
    }
    if let Ok(value) = HeaderValue::from_str(&id) {
        res.headers_mut().insert("x-request-id", value);
    }
    res
}

/// Samples the time to acquire a connection from each of the state's
/// pools every five seconds (`hub_db_pool_acquire_seconds`): the wait a
/// query would have had at that moment. sqlx reports no acquire times of
/// its own but in its logs.
pub fn spawn_pool_probe(state: &AppState) {
    let db = state.db.clone();
    hub_kernel::db::every(Duration::from_secs(5), move || {
        let db = db.clone();
        async move {
            for (name, pool) in [("read", &db.read), ("write", db.writer())] {
                let start = Instant::now();
                if let Ok(Ok(conn)) = tokio::time::timeout(Duration::from_secs(30), pool.acquire()).await {
                    metrics::histogram!("hub_db_pool_acquire_seconds", "pool" => name).record(start.elapsed().as_secs_f64());
                    drop(conn);
                }
            }
        }
    });
}

/// Gauges read from the database at a scrape, at most once a second for
/// each database: commands not yet finished by state, and the webhook
/// backlog. A read that fails or times out leaves the figures as they were
/// and lets the next scrape try again at once.
async fn refresh_from_database(state: &AppState) {
    static LAST: Mutex<BTreeMap<String, Instant>> = Mutex::new(BTreeMap::new());
    let key = state.db.url.clone();
    {
        let mut last = LAST.lock().expect("refresh lock");
        if last.get(&key).is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
            return;
        }
        last.insert(key.clone(), Instant::now());
    }
    let read = &state.db.read;
    let work = async {
        let open: Vec<(String, i64)> =
            sqlx::query_as("SELECT status, COUNT(*) FROM command_command WHERE status IN ('awaiting_approval', 'queued', 'delivered') GROUP BY status")
                .fetch_all(read)
                .await?;
        for state in ["awaiting_approval", "queued", "delivered"] {
            let n = open.iter().find(|(s, _)| s == state).map_or(0, |(_, n)| *n);
            metrics::gauge!("hub_commands", "state" => state).set(n as f64);
        }
        let outbox: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM webhook_outbox").fetch_one(read).await?;
        let pending: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM webhook_delivery WHERE status = 'pending'").fetch_one(read).await?;
        metrics::gauge!("hub_webhook_backlog", "stage" => "outbox").set(outbox as f64);
        metrics::gauge!("hub_webhook_backlog", "stage" => "pending").set(pending as f64);
        Ok::<_, sqlx::Error>(())
    };
    let failed = match tokio::time::timeout(Duration::from_secs(5), work).await {
        Ok(Ok(())) => return,
        Ok(Err(e)) => e.to_string(),
        Err(_) => "took over 5 s".to_string(),
    };
    tracing::warn!(error = %failed, "metrics: reading command and webhook figures");
    LAST.lock().expect("refresh lock").remove(&key);
}

/// Prometheus metrics in the text format. For the operator
/// (`x-admin-ops-token`) unless `HUB_METRICS_PUBLIC` makes it public.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "the metrics, Prometheus text format 0.0.4", content_type = "text/plain", body = String),
        (status = 404, description = "NotFound: metrics are switched off (`HUB_METRICS=false`)", body = hub_kernel::catalogue::ErrorBody)))]
async fn metrics(State(state): State<AppState>) -> ApiResult<Response> {
    if !state.config.metrics {
        return Err(ApiError::NotFound);
    }
    for (name, pool) in [("read", &state.db.read), ("write", state.db.writer())] {
        let (size, idle) = (pool.size() as f64, pool.num_idle() as f64);
        metrics::gauge!("hub_db_pool_connections", "pool" => name, "state" => "idle").set(idle);
        metrics::gauge!("hub_db_pool_connections", "pool" => name, "state" => "in_use").set(size - idle);
        metrics::gauge!("hub_db_pool_max_connections", "pool" => name).set(f64::from(pool.options().get_max_connections()));
    }
    refresh_from_database(&state).await;
    let mut text = recorder().render();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&render_http());
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response())
}

/// Readiness: 200 when this replica answers requests and reaches its
/// database (`SELECT 1` on the read pool within two seconds), 503
/// otherwise. `hub serve` listens before it applies its migrations and
/// answers 503 here until they are done (see `Booting`). `/health` stays
/// the liveness answer.
#[utoipa::path(get, path = "/ready", tag = "operations",
    responses((status = 200, description = "ready to serve", body = Object), (status = 503, description = "migrations are running, or the database is unreachable", body = hub_kernel::catalogue::ErrorBody)))]
async fn ready(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let probe = sqlx::query_scalar::<_, i32>("SELECT 1").fetch_one(&state.db.read);
    match tokio::time::timeout(READY_TIMEOUT, probe).await {
        Ok(Ok(_)) => Ok(Json(json!({ "success": true, "data": { "status": "ready" } }))),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness: the database is unreachable");
            Err(ApiError::Unavailable("the database is unreachable"))
        }
        Err(_) => Err(ApiError::Unavailable("the database did not answer within 2 s")),
    }
}

/// How long readiness waits for the database.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// The answer of a hub still starting (its migrations running): `/health`
/// as always, anything else 503 (not logged as an error: a load balancer
/// asks often, and nothing is wrong).
pub fn starting(path: &str) -> Response {
    let why = match path {
        "/health" => return Json(crate::catalogue::health_answer()).into_response(),
        "/ready" => ApiError::Unavailable("migrations are running"),
        _ => ApiError::Unavailable("the hub is starting: migrations are running"),
    };
    (axum::http::StatusCode::SERVICE_UNAVAILABLE, Json(why.body())).into_response()
}

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(metrics)).routes(routes!(ready))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::{Router, body::Body, middleware, routing::get};
    use tower::ServiceExt;

    use super::*;

    #[test]
    fn methods_and_status_codes_map_to_their_labels() {
        let label = |m: Method| METHODS[method_index(&m)];
        assert_eq!(label(Method::GET), "GET");
        assert_eq!(label(Method::PATCH), "PATCH");
        assert_eq!(label(Method::OPTIONS), "OPTIONS");
        assert_eq!(label(Method::from_bytes(b"BREW").unwrap()), "other");
        let class = |s: u16| CLASSES[class_index(s)];
        assert_eq!([class(101), class(200), class(308), class(404), class(503), class(999)], ["1xx", "2xx", "3xx", "4xx", "5xx", "5xx"]);
    }

    /// Tallies from two threads add up at the scrape: cumulative buckets,
    /// `+Inf` at the count, the sum; a label value's quote escaped.
    #[test]
    fn the_http_series_of_every_thread_add_up_in_the_text_format() {
        let route = "/observe-test/{id}";
        for seconds in [0.0003, 0.0007, 20.0] {
            count(route, 0, 1, seconds);
        }
        std::thread::spawn(move || count(route, 0, 1, 0.0007)).join().unwrap();
        count("/observe-\"test\"", 1, 3, 0.01);
        let text = render_http();
        let labels = r#"route="/observe-test/{id}",method="GET",status="2xx""#;
        let lines: Vec<&str> = text.lines().filter(|l| l.contains(labels)).collect();
        let le = |bound: &str, n: u64| format!("hub_http_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {n}");
        assert!(lines.contains(&format!("hub_http_requests_total{{{labels}}} 4").as_str()), "{text}");
        for (bound, n) in [("0.0005", 1), ("0.001", 3), ("10", 3), ("+Inf", 4)] {
            assert!(lines.contains(&le(bound, n).as_str()), "{bound}: {text}");
        }
        assert!(lines.contains(&format!("hub_http_request_duration_seconds_count{{{labels}}} 4").as_str()), "{text}");
        let sum = lines.iter().find_map(|l| l.strip_prefix(&format!("hub_http_request_duration_seconds_sum{{{labels}}} "))).unwrap();
        assert!((sum.parse::<f64>().unwrap() - 20.0017).abs() < 1e-9, "{sum}");
        assert_eq!(lines.len(), 1 + LATENCY.len() + 3, "{text}");
        assert!(text.contains(r#"hub_http_requests_total{route="/observe-\"test\"",method="POST",status="4xx"} 1"#), "{text}");
        assert_eq!(text.matches("# TYPE hub_http_request_duration_seconds histogram").count(), 1);
    }

    /// A log sink the test reads back.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    async fn broken() -> Result<(), ApiError> {
        tracing::info!("about to fail");
        Err(ApiError::Internal(anyhow::anyhow!("the disk is on fire")))
    }

    /// The opaque 500 names nothing; its error log line carries the
    /// request's id, as does the answer, so the two can be matched.
    #[test]
    fn every_log_line_of_a_request_carries_its_id_the_error_log_of_an_opaque_500_included() {
        let sink = Sink::default();
        let writer = sink.clone();
        let subscriber = tracing_subscriber::fmt().json().with_writer(move || writer.clone()).finish();
        let _default = tracing::subscriber::set_default(subscriber);
        // One thread: the subscriber set here sees the whole request.
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let router = Router::new().route("/broken", get(broken)).layer(middleware::from_fn_with_state(Observing { metrics: true, statuses: None }, observe));
        let call = |id: Option<&str>| {
            let mut req = Request::get("/broken");
            if let Some(id) = id {
                req = req.header("x-request-id", id);
            }
            rt.block_on(router.clone().oneshot(req.body(Body::empty()).unwrap())).unwrap()
        };
        let res = call(Some("req-500-abc"));
        assert_eq!(res.status(), 500);
        assert_eq!(res.headers()["x-request-id"], "req-500-abc");
        let body = rt.block_on(axum::body::to_bytes(res.into_body(), 1024)).unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&body).unwrap(), json!({ "success": false, "error": "InternalError" }));
        let generated = call(None).headers()["x-request-id"].to_str().unwrap().to_string();

        let logs = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<Value> = logs.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        for id in ["req-500-abc", generated.as_str()] {
            let mine: Vec<&Value> = lines.iter().filter(|l| l["span"]["id"] == id).collect();
            assert_eq!(mine.len(), 2, "{id}: {logs}");
            assert_eq!(mine[0]["fields"]["message"], "about to fail");
            assert_eq!(mine[1]["level"], "ERROR");
            assert!(mine[1]["fields"]["error"].as_str().unwrap().contains("the disk is on fire"), "{}", mine[1]);
            assert_eq!(
                (mine[1]["span"]["name"].as_str(), mine[1]["span"]["http.request.method"].as_str(), mine[1]["span"]["url.path"].as_str()),
                (Some("request"), Some("GET"), Some("/broken"))
            );
        }
        assert_eq!(lines.len(), 4, "{logs}");
    }
}
