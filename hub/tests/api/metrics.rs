//! `GET /metrics`: the Prometheus text format (parsed by the official
//! client's parser), for the operator unless made public, with bounded
//! labels; and the setting that switches metrics off.

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{assets::robot, db_test, helpers::*};

/// The exposition at `{base}/metrics`, with the operator token if given:
/// its status and, when 200, its text.
async fn exposition(base: &str, token: Option<&str>) -> (StatusCode, String) {
    let mut req = reqwest::Client::new().get(format!("{base}/metrics"));
    if let Some(t) = token {
        req = req.header("x-admin-ops-token", t);
    }
    let res = req.send().await.unwrap();
    let status = res.status();
    if status != StatusCode::OK {
        return (status, String::new());
    }
    assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/plain"), "{:?}", res.headers());
    (status, res.text().await.unwrap())
}

/// Scrapes `/metrics`, with the operator token if given, and parses it with
/// the official Prometheus client's parser: `{ families, samples }`.
async fn scrape(app: &TestApp, token: Option<&str>) -> (StatusCode, Value) {
    let (status, text) = exposition(&app.base, token).await;
    if status != StatusCode::OK {
        return (status, Value::Null);
    }
    (status, run_python("prometheus_parse.py", &[], json!(text)).await)
}

/// promtool, from Debian's `prometheus` package (`.ci/run` installs it):
/// `HUB_TEST_PROMTOOL`, else `promtool` on the PATH. Without it the check
/// fails under CI (`CI` set) and is skipped elsewhere, saying why.
fn promtool() -> Option<PathBuf> {
    let tool = std::env::var_os("HUB_TEST_PROMTOOL").map_or_else(|| PathBuf::from("promtool"), PathBuf::from);
    if Command::new(&tool).arg("--version").output().is_ok_and(|o| o.status.success()) {
        return Some(tool);
    }
    assert!(std::env::var_os("CI").is_none(), "CI is set but promtool ({}) does not run: install Debian's prometheus package", tool.display());
    eprintln!("promtool ({}) is not installed (Debian's prometheus package): the exposition is not linted", tool.display());
    None
}

/// Asserts `promtool check metrics` finds nothing wrong with an
/// exposition (help text, counter names, units, reserved suffixes...).
async fn assert_promtool_accepts(text: &str) {
    let Some(tool) = promtool() else { return };
    let text = text.to_string();
    let (status, report) = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(&tool).args(["check", "metrics"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        (out.status, format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    })
    .await
    .unwrap();
    assert!(status.success(), "promtool check metrics: {status}\n{report}");
}

/// Every family with a `# TYPE` line has its `# HELP` line.
fn assert_every_family_has_help(text: &str) {
    for line in text.lines() {
        if let Some(family) = line.strip_prefix("# TYPE ").and_then(|t| t.split(' ').next()) {
            assert!(text.contains(&format!("\n# HELP {family} ")) || text.starts_with(&format!("# HELP {family} ")), "{family} has no help: {text}");
        }
    }
}

/// The series README.md's metrics entry names (its `hub_...` words).
fn documented_series() -> Vec<String> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let entry = &readme[readme.find("- `GET /metrics`").expect("README's metrics entry")..];
    let entry = &entry[..entry[1..].find("\n- ").map_or(entry.len(), |end| end + 1)];
    let mut names: Vec<String> =
        entry.split('`').filter(|w| w.starts_with("hub_") && w.bytes().all(|b| b == b'_' || b.is_ascii_lowercase())).map(String::from).collect();
    names.dedup();
    names
}

/// The value of the first sample named `name` with all of `labels`.
fn sample(scraped: &Value, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scraped["samples"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name && labels.iter().all(|(k, v)| s["labels"][*k] == *v))
        .map(|s| s["value"].as_f64().unwrap())
}

/// Asserts a sample named `name` with `labels` is at least 1.
fn at_least_one_in(scraped: &Value, name: &str, labels: &[(&str, &str)]) {
    let n = sample(scraped, name, labels).unwrap_or_else(|| panic!("{name}{labels:?} in {}", scraped["families"]));
    assert!(n >= 1.0, "{name}{labels:?} = {n}");
}

async fn metrics_count_requests_by_route_template_for_the_operator(app: TestApp) {
    let t = app.signup("ops@example.com", "ops").await;
    let token = t["token"].as_str().unwrap();
    // Without the operator token, or with a tenant's credential: 401.
    let (s, _) = scrape(&app, None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, _) = scrape(&app, Some("wrong")).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_error(app.get("/metrics", Some(token)).await, 401, "Unauthorized");

    assert_eq!(app.get("/api/me", Some(token)).await.0, StatusCode::OK);
    assert_error(app.get("/api/me", None).await, 401, "Unauthorized");
    let unknown = uuid::Uuid::now_v7().to_string();
    assert_error(app.get(&format!("/api/geo/addresses/{unknown}"), Some(token)).await, 404, "NotFound");

    let (s, scraped) = scrape(&app, Some("test-ops-token")).await;
    assert_eq!(s, StatusCode::OK);
    // The metrics are the process's: other tests' hubs count too.
    let at_least_one = |name: &str, labels: &[(&str, &str)]| at_least_one_in(&scraped, name, labels);
    at_least_one("hub_http_requests_total", &[("route", "/api/me"), ("method", "GET"), ("status", "2xx")]);
    at_least_one("hub_http_requests_total", &[("route", "/api/geo/addresses/{address_id}"), ("status", "4xx")]);
    at_least_one("hub_gate_refusals_total", &[("reason", "missing bearer token")]);
    at_least_one("hub_http_request_duration_seconds_count", &[("route", "/api/me"), ("status", "2xx")]);
    at_least_one("hub_http_request_duration_seconds_bucket", &[("route", "/api/me"), ("status", "2xx"), ("le", "+Inf")]);
    assert_eq!(scraped["families"]["hub_http_request_duration_seconds"], "histogram");
    assert_eq!(scraped["families"]["hub_http_requests"], "counter");
    for pool in ["read", "write"] {
        assert!(sample(&scraped, "hub_db_pool_connections", &[("pool", pool), ("state", "in_use")]).is_some(), "{pool}");
        at_least_one("hub_db_pool_max_connections", &[("pool", pool)]);
        // The acquire probe samples each pool when a hub starts.
        at_least_one("hub_db_pool_acquire_seconds_count", &[("pool", pool)]);
    }
    assert_eq!(scraped["families"]["hub_db_pool_acquire_seconds"], "histogram");
    // The signup's audit entries were written in its transaction.
    at_least_one("hub_audit_appends_total", &[("path", "transaction")]);
    // Buckets are cumulative and end at the count.
    let buckets: Vec<f64> = scraped["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["name"] == "hub_http_request_duration_seconds_bucket"
                && s["labels"]["route"] == "/api/me"
                && s["labels"]["method"] == "GET"
                && s["labels"]["status"] == "2xx"
        })
        .map(|s| s["value"].as_f64().unwrap())
        .collect();
    assert!(buckets.len() > 5 && buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
    let total = sample(&scraped, "hub_http_request_duration_seconds_count", &[("route", "/api/me"), ("method", "GET"), ("status", "2xx")]).unwrap();
    assert_eq!(buckets.last().copied(), Some(total));
    // Labels are templates: no raw id, no tenant.
    let tenant = t["tenant_id"].as_str().unwrap();
    for s in scraped["samples"].as_array().unwrap() {
        let labels = s["labels"].to_string();
        assert!(!labels.contains(&unknown) && !labels.contains(tenant), "{s}");
    }

    // A method a client invents adds no series: it is `other`.
    let odd = reqwest::Method::from_bytes(b"BREW").unwrap();
    let res = app.client.request(odd, format!("{}/api/me", app.base)).bearer_auth(token).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::METHOD_NOT_ALLOWED);
    let (_, scraped) = scrape(&app, Some("test-ops-token")).await;
    assert!(sample(&scraped, "hub_http_requests_total", &[("method", "BREW")]).is_none());
    at_least_one_in(&scraped, "hub_http_requests_total", &[("method", "other"), ("status", "4xx")]);

    // Made public by its setting, it needs no credential.
    let public = app.variant(|c| c.metrics_public = true).await;
    assert_eq!(scrape(&public, None).await.0, StatusCode::OK);
}
db_test!(metrics_count_requests_by_route_template_for_the_operator);

async fn commands_and_audit_batches_are_counted(app: TestApp) {
    let t = app.signup("fleet@example.com", "fleet").await;
    let token = t["token"].as_str().unwrap();
    let (asset, cred) = robot(&app, token, json!({ "display_name": "R" })).await;
    let (s, c) = app.post("/api/commands", Some(token), json!({ "type": "beep", "risk_class": "low", "target_asset_id": asset })).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let (s, high) = app.post("/api/commands", Some(token), json!({ "type": "cut", "risk_class": "high", "target_asset_id": asset })).await;
    assert_eq!(s, StatusCode::CREATED, "{high}");
    let id = c["data"]["command_id"].as_str().unwrap();
    let (s, acked) = app.post(&format!("/api/commands/{id}/ack"), Some(&cred), json!({ "ok": true })).await;
    assert_eq!(s, StatusCode::OK, "{acked}");

    // Three appends at once through the group-commit appender.
    let event = |i: i64| hub_kernel::audit::appender::OwnedEvent {
        tenant_id: t["tenant_id"].as_str().unwrap().to_string(),
        pool_index: 0,
        event_type: "crm.call.logged.v1".into(),
        actor_kind: "service".into(),
        actor_id: "metrics-test".into(),
        actor_chain: None,
        payload: json!({ "i": i }),
        retention_class: None,
    };
    let audit = &app.state().audit;
    let (a, b, c) = tokio::join!(audit.append(event(1)), audit.append(event(2)), audit.append(event(3)));
    for appended in [a, b, c] {
        appended.unwrap();
    }

    let (s, scraped) = scrape(&app, Some("test-ops-token")).await;
    assert_eq!(s, StatusCode::OK);
    at_least_one_in(&scraped, "hub_audit_appends_total", &[("path", "group_commit")]);
    at_least_one_in(&scraped, "hub_audit_commit_batch_size_count", &[]);
    assert_eq!(scraped["families"]["hub_audit_commit_batch_size"], "histogram");
    let batched = sample(&scraped, "hub_audit_commit_batch_size_sum", &[]).unwrap();
    assert!(batched >= 3.0, "{batched}");
    for state in ["queued", "awaiting_approval", "acknowledged_ok"] {
        at_least_one_in(&scraped, "hub_command_transitions_total", &[("state", state)]);
    }
    // Gauges read from the database: present, whole and not negative.
    for (name, label, values) in
        [("hub_commands", "state", &["awaiting_approval", "queued", "delivered"][..]), ("hub_webhook_backlog", "stage", &["outbox", "pending"][..])]
    {
        for v in values {
            let n = sample(&scraped, name, &[(label, v)]).unwrap_or_else(|| panic!("{name}{{{label}={v}}}"));
            assert!(n >= 0.0 && n.fract() == 0.0, "{name}{{{label}={v}}} = {n}");
        }
    }
    assert_eq!(scraped["families"]["hub_command_transitions"], "counter");
    assert_eq!(scraped["families"]["hub_commands"], "gauge");
}
db_test!(commands_and_audit_batches_are_counted);

async fn metrics_switched_off_answer_404_and_requests_still_carry_their_id(app: TestApp) {
    let off = app.variant(|c| c.metrics = false).await;
    let res = off.client.get(format!("{}/metrics", off.base)).header("x-admin-ops-token", "test-ops-token").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    assert_eq!(res.json::<Value>().await.unwrap(), json!({ "success": false, "error": "NotFound" }));
    // Still the operator's route: 401 without the token.
    assert_error(off.get("/metrics", None).await, 401, "Unauthorized");
    let res = off.client.get(format!("{}/health", off.base)).header("x-request-id", "off-1").send().await.unwrap();
    assert_eq!((res.status(), res.headers()["x-request-id"].to_str().unwrap()), (StatusCode::OK, "off-1"));
}
db_test!(metrics_switched_off_answer_404_and_requests_still_carry_their_id);

/// promtool accepts the exposition of a hub that has answered requests
/// (the process's recorder: other tests' hubs count too), and every family
/// in it has help text.
async fn promtool_accepts_the_exposition(app: TestApp) {
    let t = app.signup("lint@example.com", "lint").await;
    assert_eq!(app.get("/api/me", t["token"].as_str()).await.0, StatusCode::OK);
    assert_error(app.get("/api/me", None).await, 401, "Unauthorized");
    let (s, text) = exposition(&app.base, Some("test-ops-token")).await;
    assert_eq!(s, StatusCode::OK);
    assert!(text.contains("hub_http_requests_total{route=\"/api/me\",method=\"GET\",status=\"2xx\"}"), "{text}");
    assert_every_family_has_help(&text);
    assert_promtool_accepts(&text).await;
}
db_test!(promtool_accepts_the_exposition);

/// A hub process of its own (a recorder of its own): every series
/// README.md documents is described and present from the start, at zero
/// where nothing has happened yet, and promtool accepts the exposition.
async fn a_fresh_hub_publishes_every_documented_series(database_url: Option<String>) {
    let env: Vec<(&str, &str)> = database_url.iter().map(|url| ("DATABASE_URL", url.as_str())).collect();
    let hub = HubProcess::spawn(&env).await;
    let (s, text) = exposition(&hub.base, Some("test-ops-token")).await;
    assert_eq!(s, StatusCode::OK);
    assert_every_family_has_help(&text);
    assert_promtool_accepts(&text).await;
    let scraped = run_python("prometheus_parse.py", &[], json!(text)).await;

    let documented = documented_series();
    assert!(documented.len() >= 15 && documented.contains(&"hub_webhook_attempts_total".to_string()), "{documented:?}");
    for name in &documented {
        assert!(text.contains(&format!("# HELP {name} ")), "{name} is described: {text}");
        // The parser names a counter's family without `_total`.
        let family = name.strip_suffix("_total").unwrap_or(name);
        assert!(scraped["families"].get(family).is_some(), "{name} is published: {}", scraped["families"]);
    }
    // Nothing has happened yet: zero, not absent.
    let mut zero: Vec<(&str, Vec<(&str, &str)>)> =
        vec![("hub_audit_commit_batch_size_count", vec![]), ("hub_audit_commit_batch_size_sum", vec![]), ("hub_sync_batches_total", vec![])];
    let labelled: [(&str, &str, &[&str]); 8] = [
        ("hub_gate_refusals_total", "reason", &["rate limit", "scope", "role", "policy"]),
        ("hub_audit_appends_total", "path", &["transaction", "group_commit"]),
        (
            "hub_command_transitions_total",
            "state",
            &["awaiting_approval", "queued", "delivered", "acknowledged_ok", "acknowledged_failed", "rejected", "expired"],
        ),
        ("hub_commands", "state", &["awaiting_approval", "queued", "delivered"]),
        ("hub_agents_connected", "transport", &["quic", "sse"]),
        ("hub_sync_events_total", "outcome", &["accepted", "duplicate", "rejected"]),
        ("hub_webhook_attempts_total", "outcome", &["succeeded", "retry", "dead", "gone"]),
        ("hub_webhook_backlog", "stage", &["outbox", "pending"]),
    ];
    for (name, label, values) in labelled {
        zero.extend(values.iter().map(|v| (name, vec![(label, *v)])));
    }
    for (name, labels) in &zero {
        assert_eq!(sample(&scraped, name, labels), Some(0.0), "{name}{labels:?} in {}", scraped["samples"]);
    }
    for pool in ["read", "write"] {
        at_least_one_in(&scraped, "hub_db_pool_max_connections", &[("pool", pool)]);
        for state in ["idle", "in_use"] {
            assert!(sample(&scraped, "hub_db_pool_connections", &[("pool", pool), ("state", state)]).is_some(), "{pool} {state}");
        }
        assert!(sample(&scraped, "hub_db_pool_acquire_seconds_count", &[("pool", pool)]).is_some(), "{pool}");
    }
    assert_eq!(scraped["families"]["hub_audit_commit_batch_size"], "histogram");
    // The readiness checks that waited for the hub were counted.
    at_least_one_in(&scraped, "hub_http_requests_total", &[("route", "/ready"), ("method", "GET"), ("status", "2xx")]);
}

mod a_fresh_hub_publishes_every_documented_series {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        super::a_fresh_hub_publishes_every_documented_series(None).await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        if let Some(url) = crate::helpers::fresh_postgres_url().await {
            super::a_fresh_hub_publishes_every_documented_series(Some(url)).await
        }
    }
}
