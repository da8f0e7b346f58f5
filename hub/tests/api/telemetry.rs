//! Traces, as a collector sees them: the `hub` binary exports to a stand-in
//! OpenTelemetry collector (OTLP over HTTP/protobuf, decoded here with the
//! project's own message types). Its request spans follow the HTTP server
//! conventions and continue an incoming W3C `traceparent`; its own requests
//! (a model provider's completion, a webhook delivery) go out in exported
//! client spans whose context they carry in `traceparent`.

use std::{
    collections::BTreeMap,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{Router, body::Bytes, extract::State as AxumState, http::HeaderMap, routing::post};
use opentelemetry_proto::tonic::{
    collector::trace::v1::ExportTraceServiceRequest,
    common::v1::any_value::Value as Any,
    trace::v1::{Span, span::SpanKind, status::StatusCode as SpanStatus},
};
use prost::Message;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::fresh_postgres_url;

/// The path of a request to a stand-in, and its `traceparent`.
type Sent = (String, Option<String>);

/// What the stand-in servers got: the spans exported, with their
/// service's name, and the `traceparent` of each request to the provider
/// and the webhook receiver, by path.
#[derive(Clone, Default)]
struct Got {
    spans: Arc<Mutex<Vec<(String, Span)>>>,
    traceparents: Arc<Mutex<Vec<Sent>>>,
}

/// One server standing in for the collector (`/v1/traces`), a model
/// provider that fails (`/provider/chat/completions`: 500) and a webhook
/// receiver (`/hook`: 204). Answers its base URL.
async fn stand_ins(got: Got) -> String {
    async fn traces(AxumState(got): AxumState<Got>, body: Bytes) -> StatusCode {
        let Ok(export) = ExportTraceServiceRequest::decode(body) else { return StatusCode::BAD_REQUEST };
        let mut spans = got.spans.lock().unwrap();
        for batch in export.resource_spans {
            let service = batch
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                    Any::StringValue(s) => Some(s.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            spans.extend(batch.scope_spans.into_iter().flat_map(|s| s.spans).map(|span| (service.clone(), span)));
        }
        StatusCode::OK
    }
    fn keep(got: &Got, path: &str, headers: &HeaderMap) {
        let traceparent = headers.get("traceparent").map(|v| v.to_str().unwrap().to_string());
        got.traceparents.lock().unwrap().push((path.to_string(), traceparent));
    }
    let app = Router::new()
        .route("/v1/traces", post(traces))
        .route(
            "/provider/chat/completions",
            post(|AxumState(got): AxumState<Got>, headers: HeaderMap| async move {
                keep(&got, "/provider/chat/completions", &headers);
                (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(json!({ "error": "down" })))
            }),
        )
        .route(
            "/hook",
            post(|AxumState(got): AxumState<Got>, headers: HeaderMap| async move {
                keep(&got, "/hook", &headers);
                StatusCode::NO_CONTENT
            }),
        )
        .with_state(got);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

impl Got {
    /// The first span `pick` chooses, once exported (within 20 s).
    async fn span(&self, what: &str, pick: impl Fn(&Span) -> bool) -> (String, Span) {
        let start = Instant::now();
        loop {
            if let Some(found) = self.spans.lock().unwrap().iter().find(|(_, s)| pick(s)) {
                return found.clone();
            }
            assert!(start.elapsed() < Duration::from_secs(20), "no exported span is {what}; got {:#?}", self.spans.lock().unwrap());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The `traceparent` of the first request to `path` (within 20 s).
    async fn traceparent(&self, path: &str) -> Option<String> {
        let start = Instant::now();
        loop {
            if let Some((_, tp)) = self.traceparents.lock().unwrap().iter().find(|(p, _)| p == path) {
                return tp.clone();
            }
            assert!(start.elapsed() < Duration::from_secs(20), "no request to {path}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A span's attributes, as JSON values.
fn attributes(span: &Span) -> BTreeMap<String, Value> {
    span.attributes
        .iter()
        .filter_map(|kv| {
            let value = match kv.value.as_ref()?.value.as_ref()? {
                Any::StringValue(s) => json!(s),
                Any::IntValue(i) => json!(i),
                Any::BoolValue(b) => json!(b),
                Any::DoubleValue(d) => json!(d),
                other => json!(format!("{other:?}")),
            };
            Some((kv.key.clone(), value))
        })
        .collect()
}

/// The attributes of `span` named in `expected`, beside `expected`.
fn pick(span: &Span, expected: &Value) -> Value {
    let all = attributes(span);
    expected.as_object().unwrap().keys().map(|k| (k.clone(), all.get(k).cloned().unwrap_or(Value::Null))).collect()
}

/// A W3C `traceparent`: (trace id, parent id), both in lowercase hex.
fn parse_traceparent(header: &str) -> (String, String) {
    let parts: Vec<&str> = header.split('-').collect();
    assert_eq!(parts.len(), 4, "{header}");
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    assert!(parts[0] == "00" && hex(parts[1], 32) && hex(parts[2], 16) && parts[3] == "01", "{header}");
    assert!(parts[1] != "0".repeat(32) && parts[2] != "0".repeat(16), "{header}");
    (parts[1].to_string(), parts[2].to_string())
}

/// A new trace id and parent span id, in hex.
fn new_ids() -> (String, String) {
    let id = uuid::Uuid::new_v4().simple().to_string();
    (id, uuid::Uuid::new_v4().simple().to_string()[..16].to_string())
}

/// The `hub` binary, serving until dropped.
struct Hub {
    child: Child,
    base: String,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Hub {
    async fn start(database_url: Option<String>, collector: &str) -> Hub {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let log = dir.path().join("hub.log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_hub"));
        command
            .arg("serve")
            .env("HUB_LISTEN", format!("127.0.0.1:{port}"))
            .env("HUB_DATA_DIR", dir.path())
            // Development mode: the provider and the receiver are on loopback.
            .env("HUB_DEV", "1")
            .env("HUB_LOG", "info")
            .env("HUB_QUIC_LISTEN", "127.0.0.1:0")
            .env("HUB_OTLP_ENDPOINT", collector)
            // Batches every 100 ms rather than every 5 s.
            .env("OTEL_BSP_SCHEDULE_DELAY", "100")
            .env_remove("OTEL_SERVICE_NAME")
            .env_remove("HUB_MASTER_KEY")
            .env_remove("AUTH_GATE_MODE")
            .stdout(Stdio::from(std::fs::File::create(&log).unwrap()))
            .stderr(Stdio::from(std::fs::File::options().append(true).open(&log).unwrap()));
        match database_url {
            Some(url) => command.env("DATABASE_URL", url),
            None => command.env_remove("DATABASE_URL"),
        };
        let hub = Hub { child: command.spawn().unwrap(), base: format!("http://127.0.0.1:{port}"), log, _dir: dir };
        let client = reqwest::Client::new();
        let start = Instant::now();
        while !client.get(format!("{}/ready", hub.base)).send().await.is_ok_and(|r| r.status() == StatusCode::OK) {
            assert!(start.elapsed() < Duration::from_secs(60), "the hub did not start: {}", hub.logs());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        hub
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

async fn traces_follow_the_http_conventions_and_carry_the_context(database_url: Option<String>) {
    let got = Got::default();
    let stand_in = stand_ins(got.clone()).await;
    let hub = Hub::start(database_url, &stand_in).await;
    let port: i64 = hub.base.rsplit(':').next().unwrap().parse().unwrap();
    let client = reqwest::Client::new();
    let send = |req: reqwest::RequestBuilder| async move {
        let res = req.send().await.unwrap();
        let (status, id) = (res.status(), res.headers()["x-request-id"].to_str().unwrap().to_string());
        (status, id, res.json::<Value>().await.unwrap())
    };
    let (s, _, signup) = send(client.post(format!("{}/api/auth/signup-tenant", hub.base)).json(&json!({
        "email": "trace@example.com", "password": "correct horse battery", "org_name": "Traced",
        "app_id": "traced", "display_name": "Ada", "region": "eu-west-1",
    })))
    .await;
    assert_eq!(s, StatusCode::CREATED, "{signup}");
    let token = signup["data"]["token"].as_str().unwrap().to_string();

    // A request that continues a caller's trace: the server span is the
    // child of the caller's span, named after the matched route.
    let (trace, parent) = new_ids();
    let contact = uuid::Uuid::new_v4();
    let (s, request_id, body) = send(
        client
            .get(format!("{}/api/crm/contacts/{contact}", hub.base))
            .bearer_auth(&token)
            .header("traceparent", format!("00-{trace}-{parent}-01"))
            .header("user-agent", "trace-test/1"),
    )
    .await;
    assert_eq!((s, body), (StatusCode::NOT_FOUND, json!({ "success": false, "error": "NotFound" })));
    let (service, span) = got.span("the contact's GET", |s| hex::encode(&s.trace_id) == trace).await;
    assert_eq!(service, "hub");
    assert_eq!((span.kind(), span.name.as_str()), (SpanKind::Server, "GET /api/crm/contacts/{contact_id}"));
    assert_eq!(hex::encode(&span.parent_span_id), parent, "the caller's span is the parent");
    let expected = json!({
        "http.request.method": "GET", "url.path": format!("/api/crm/contacts/{contact}"), "url.scheme": "http",
        "http.route": "/api/crm/contacts/{contact_id}", "http.response.status_code": 404,
        "server.address": "127.0.0.1", "server.port": port, "user_agent.original": "trace-test/1",
        "network.protocol.version": "1.1", "id": request_id, "error.type": null,
    });
    assert_eq!(pick(&span, &expected), expected);
    // A 4xx is the client's: no error status on a server span.
    assert_eq!(span.status.as_ref().map_or(SpanStatus::Unset, |s| s.code()), SpanStatus::Unset);

    // No route matched, no caller's trace: a root span named by its method.
    let (s, _, body) = send(client.get(format!("{}/nowhere", hub.base)).bearer_auth(&token)).await;
    assert_eq!((s, body), (StatusCode::NOT_FOUND, json!({ "success": false, "error": "NotFound" })));
    let (_, span) = got.span("the GET of /nowhere", |s| attributes(s).get("url.path") == Some(&json!("/nowhere"))).await;
    assert_eq!((span.kind(), span.name.as_str(), span.parent_span_id.is_empty()), (SpanKind::Server, "GET", true));
    assert_eq!(pick(&span, &json!({ "http.route": null, "http.response.status_code": 0 })), json!({ "http.route": null, "http.response.status_code": 404 }));

    // A method outside HTTP's own: `_OTHER`, the method itself beside it.
    let brew = reqwest::Method::from_bytes(b"BREW").unwrap();
    let (s, _, body) = send(client.request(brew, format!("{}/api/crm/contacts", hub.base)).bearer_auth(&token)).await;
    assert_eq!((s, body["error"].as_str()), (StatusCode::METHOD_NOT_ALLOWED, Some("MethodNotAllowed")), "{body}");
    let (_, span) = got.span("the BREW", |s| attributes(s).get("http.request.method_original") == Some(&json!("BREW"))).await;
    assert_eq!((span.kind(), span.name.as_str()), (SpanKind::Server, "HTTP /api/crm/contacts"));
    let expected =
        json!({ "http.request.method": "_OTHER", "url.path": "/api/crm/contacts", "http.route": "/api/crm/contacts", "http.response.status_code": 405 });
    assert_eq!(pick(&span, &expected), expected);

    // A tool call of MCP, on either endpoint, runs its route's request
    // through the router: that span is INTERNAL, inside the call's.
    let tool = json!({ "name": "hdk_measure_list_by_capture", "arguments": { "capture_id": "cap-traced" } });
    let rpc = json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": tool });
    for (path, message) in [("/mcp/v1/call", &tool), ("/mcp", &rpc)] {
        let (trace, parent) = new_ids();
        let (s, _, body) = send(
            client
                .post(format!("{}{path}", hub.base))
                .bearer_auth(&token)
                .header("accept", "application/json")
                .header("traceparent", format!("00-{trace}-{parent}-01"))
                .json(message),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{path}: {body}");
        let (_, outer) = got.span("the tool call", |s| hex::encode(&s.trace_id) == trace && s.kind() == SpanKind::Server).await;
        assert_eq!((outer.name.as_str(), hex::encode(&outer.parent_span_id)), (format!("POST {path}").as_str(), parent.clone()));
        // (The SDK's own spans are INTERNAL too; the route's has a route.)
        let (_, inner) = got
            .span("the tool's request", |s| hex::encode(&s.trace_id) == trace && s.kind() == SpanKind::Internal && attributes(s).contains_key("http.route"))
            .await;
        assert_eq!((inner.name.as_str(), &inner.parent_span_id), ("GET /api/hdk/measure/measurements", &outer.span_id), "{path}");
        let expected = json!({ "http.route": "/api/hdk/measure/measurements", "http.response.status_code": 200 });
        assert_eq!(pick(&inner, &expected), expected, "{path}");
    }

    // A completion the provider fails: the provider's request carries the
    // context of its client span, a child of the server span of the
    // caller's trace; the 502 is an error of the server span.
    let route = json!({ "name": "down", "provider_base_url": format!("{stand_in}/provider"), "model": "m", "max_attempts": 1, "timeout_ms": 5000 });
    let (s, _, made) = send(client.post(format!("{}/api/ai/routes", hub.base)).bearer_auth(&token).json(&route)).await;
    assert_eq!(s, StatusCode::CREATED, "{made}");
    let (trace, parent) = new_ids();
    let (s, _, body) = send(
        client
            .post(format!("{}/api/ai/completions", hub.base))
            .bearer_auth(&token)
            .header("traceparent", format!("00-{trace}-{parent}-01"))
            .json(&json!({ "route": "down", "prompt": "hello" })),
    )
    .await;
    assert_eq!((s, body["error"].as_str()), (StatusCode::BAD_GATEWAY, Some("BadGateway")), "{body}");
    let sent = got.traceparent("/provider/chat/completions").await.expect("the provider's request carries a traceparent");
    let (sent_trace, sent_span) = parse_traceparent(&sent);
    assert_eq!(sent_trace, trace, "the provider's request is in the caller's trace");
    let (_, server) = got.span("the completion's POST", |s| hex::encode(&s.trace_id) == trace && s.kind() == SpanKind::Server).await;
    assert_eq!((server.name.as_str(), hex::encode(&server.parent_span_id)), ("POST /api/ai/completions", parent));
    let expected = json!({ "http.route": "/api/ai/completions", "http.response.status_code": 502, "error.type": "502" });
    assert_eq!(pick(&server, &expected), expected);
    assert_eq!(server.status.as_ref().map(|s| s.code()), Some(SpanStatus::Error));
    let (_, call) = got.span("the provider's request", |s| hex::encode(&s.span_id) == sent_span).await;
    assert_eq!((call.kind(), call.name.as_str(), hex::encode(&call.trace_id)), (SpanKind::Client, "POST", trace));
    assert_eq!(call.parent_span_id, server.span_id, "the client span is inside the server span");
    let expected = json!({
        "http.request.method": "POST", "url.full": format!("{stand_in}/provider/chat/completions"),
        "server.address": "127.0.0.1", "server.port": stand_in.rsplit(':').next().unwrap().parse::<i64>().unwrap(),
        "http.response.status_code": 500, "error.type": "500",
    });
    assert_eq!(pick(&call, &expected), expected);
    assert_eq!(call.status.as_ref().map(|s| s.code()), Some(SpanStatus::Error));

    // A webhook delivery: the worker sends it after the request that made
    // the event, in a trace of its own whose root is the delivery's client
    // span; the receiver gets that span's context.
    let hook = format!("{stand_in}/hook");
    let (s, _, endpoint) =
        send(client.post(format!("{}/api/webhooks/endpoints", hub.base)).bearer_auth(&token).json(&json!({ "url": hook, "event_types": ["workflow.*"] })))
            .await;
    assert_eq!(s, StatusCode::CREATED, "{endpoint}");
    let (s, _, made) = send(
        client
            .post(format!("{}/api/workflows/definitions", hub.base))
            .bearer_auth(&token)
            .json(&json!({ "name": "traced", "step_specs": [{ "name": "one" }] })),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{made}");
    let sent = got.traceparent("/hook").await.expect("the delivery carries a traceparent");
    let (sent_trace, sent_span) = parse_traceparent(&sent);
    let (_, delivery) = got.span("the delivery's request", |s| hex::encode(&s.span_id) == sent_span).await;
    assert_eq!((delivery.kind(), delivery.name.as_str(), hex::encode(&delivery.trace_id)), (SpanKind::Client, "POST", sent_trace));
    assert!(delivery.parent_span_id.is_empty(), "the delivery's span is the root of its trace");
    let expected =
        json!({ "http.request.method": "POST", "url.full": hook, "server.address": "127.0.0.1", "http.response.status_code": 204, "error.type": null });
    assert_eq!(pick(&delivery, &expected), expected);
    assert_eq!(delivery.status.as_ref().map_or(SpanStatus::Unset, |s| s.code()), SpanStatus::Unset);
    drop(hub);
}

mod traces_follow_the_http_conventions_and_carry_the_context {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        super::traces_follow_the_http_conventions_and_carry_the_context(None).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        if let Some(url) = super::fresh_postgres_url().await {
            super::traces_follow_the_http_conventions_and_carry_the_context(Some(url)).await
        }
    }
}

/// sdk-diagnostic-telemetry: the health snapshots of a tenant's devices,
/// with their metrics, listed latest first by device and time.
async fn health_snapshots_are_listed_with_their_metrics(app: crate::helpers::TestApp) {
    use crate::helpers::assert_error;
    let t = app.two_tenants("snapshots").await;
    let a = t.a_token.as_str();
    let mut devices = Vec::new();
    for _ in 0..2 {
        let id = uuid::Uuid::now_v7().to_string();
        let (s, d) = app.post("/api/devices", Some(a), json!({ "device_uuid": id, "platform": "ios" })).await;
        assert_eq!(s, StatusCode::CREATED, "{d}");
        devices.push(id);
    }
    for (device, status, at) in [(0, "ok", "2026-01-01T00:00:00Z"), (0, "degraded", "2026-01-02T00:00:00Z"), (1, "critical", "2026-01-03T00:00:00Z")] {
        let body = json!({ "device_uuid": devices[device], "status": status, "metrics": { "battery_pct": 12 }, "taken_at": at });
        let (s, b) = app.post("/api/diagnostic/snapshots", Some(a), body).await;
        assert_eq!(s, StatusCode::CREATED, "{b}");
    }
    let listed = async |q: &str| {
        let (s, b) = app.get(&format!("/api/diagnostic/snapshots{q}"), Some(a)).await;
        assert_eq!(s, StatusCode::OK, "{b}");
        let statuses: Vec<String> = b["data"].as_array().unwrap().iter().map(|x| x["status"].as_str().unwrap().to_string()).collect();
        (b["total"].as_i64().unwrap(), statuses)
    };
    let (_, all) = app.get("/api/diagnostic/snapshots", Some(a)).await;
    assert_eq!(all["total"], 3);
    let first = &all["data"][0];
    assert_eq!((first["device_uuid"].as_str(), first["metrics"].clone()), (Some(devices[1].as_str()), json!({ "battery_pct": 12 })));
    assert_eq!(first["taken_at"], "2026-01-03T00:00:00.000000Z");
    assert!(first.get("tenant_id").is_none(), "{first}");
    assert_eq!(listed("").await, (3, vec!["critical".into(), "degraded".into(), "ok".into()]), "latest first");
    assert_eq!(listed(&format!("?device_uuid={}", devices[0])).await, (2, vec!["degraded".into(), "ok".into()]));
    assert_eq!(listed("?from=2026-01-02T00:00:00Z").await, (2, vec!["critical".into(), "degraded".into()]));
    assert_eq!(listed("?to=2026-01-02T00:00:00Z").await, (1, vec!["ok".into()]), "to is exclusive");
    assert_eq!(listed(&format!("?device_uuid={}&from=2026-01-01T12:00:00Z&to=2026-01-03T00:00:00Z", devices[0])).await, (1, vec!["degraded".into()]));
    assert_eq!(listed("?limit=1&offset=2").await, (3, vec!["ok".into()]));
    let (_, theirs) = app.get("/api/diagnostic/snapshots", Some(&t.b_token)).await;
    assert_eq!(theirs["total"], 0);
    let (_, theirs) = app.get(&format!("/api/diagnostic/snapshots?device_uuid={}", devices[0]), Some(&t.b_token)).await;
    assert_eq!(theirs["total"], 0, "another tenant's device lists nothing");
    assert_error(app.get("/api/diagnostic/snapshots?device_uuid=not-a-uuid", Some(a)).await, 400, "ValidationError");
    assert_error(app.get("/api/diagnostic/snapshots?from=yesterday", Some(a)).await, 400, "ValidationError");
}
crate::db_test!(health_snapshots_are_listed_with_their_metrics);
