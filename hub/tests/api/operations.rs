//! Operations: `/metrics` (Prometheus text, for the operator unless made
//! public), request ids, readiness.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

/// Scrapes `/metrics`, with the operator token if given, and parses it with
/// the official Prometheus client's parser: `{ families, samples }`.
async fn scrape(app: &TestApp, token: Option<&str>) -> (StatusCode, Value) {
    let mut req = app.client.get(format!("{}/metrics", app.base));
    if let Some(t) = token {
        req = req.header("x-admin-ops-token", t);
    }
    let res = req.send().await.unwrap();
    let status = res.status();
    if status != StatusCode::OK {
        return (status, Value::Null);
    }
    assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/plain"), "{:?}", res.headers());
    let text = res.text().await.unwrap();
    (status, run_python("prometheus_parse.py", &[], json!(text)).await)
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
    let at_least_one = |name: &str, labels: &[(&str, &str)]| {
        let n = sample(&scraped, name, labels).unwrap_or_else(|| panic!("{name}{labels:?} in {}", scraped["families"]));
        assert!(n >= 1.0, "{name}{labels:?} = {n}");
    };
    at_least_one("hub_http_requests_total", &[("route", "/api/me"), ("method", "GET"), ("status", "2xx")]);
    at_least_one("hub_http_requests_total", &[("route", "/api/geo/addresses/{address_id}"), ("status", "4xx")]);
    at_least_one("hub_gate_refusals_total", &[("reason", "missing bearer token")]);
    at_least_one("hub_http_request_duration_seconds_count", &[("route", "/api/me"), ("status", "2xx")]);
    at_least_one("hub_http_request_duration_seconds_bucket", &[("route", "/api/me"), ("status", "2xx"), ("le", "+Inf")]);
    assert_eq!(scraped["families"]["hub_http_request_duration_seconds"], "histogram");
    assert_eq!(scraped["families"]["hub_http_requests"], "counter");
    for pool in ["read", "write"] {
        assert!(sample(&scraped, "hub_db_pool_connections", &[("pool", pool), ("state", "in_use")]).is_some(), "{pool}");
    }
    // Labels are templates: no raw id, no tenant.
    let tenant = t["tenant_id"].as_str().unwrap();
    for s in scraped["samples"].as_array().unwrap() {
        let labels = s["labels"].to_string();
        assert!(!labels.contains(&unknown) && !labels.contains(tenant), "{s}");
    }

    // Made public by its setting, it needs no credential.
    let public = app.variant(|c| c.metrics_public = true).await;
    assert_eq!(scrape(&public, None).await.0, StatusCode::OK);
}
db_test!(metrics_count_requests_by_route_template_for_the_operator);

async fn every_answer_carries_a_request_id_and_readiness_answers(app: TestApp) {
    let get = |id: Option<&str>| {
        let mut req = app.client.get(format!("{}/ready", app.base));
        if let Some(id) = id {
            req = req.header("x-request-id", id);
        }
        req.send()
    };
    let res = get(Some("trace-abc-123")).await.unwrap();
    assert_eq!(res.headers()["x-request-id"], "trace-abc-123");
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.json::<serde_json::Value>().await.unwrap(), json!({ "success": true, "data": { "status": "ready" } }));
    // None sent, or one unusable: a fresh UUID.
    for id in [None, Some("x".repeat(129).as_str()), Some("has space")] {
        let res = get(id).await.unwrap();
        let given = res.headers()["x-request-id"].to_str().unwrap().to_string();
        assert!(uuid::Uuid::parse_str(&given).is_ok(), "{given}");
    }
    // Errors carry it too, and readiness needs no credential.
    let res = app.client.get(format!("{}/api/me", app.base)).header("x-request-id", "r-401").send().await.unwrap();
    assert_eq!((res.status(), res.headers()["x-request-id"].to_str().unwrap()), (StatusCode::UNAUTHORIZED, "r-401"));
}
db_test!(every_answer_carries_a_request_id_and_readiness_answers);
