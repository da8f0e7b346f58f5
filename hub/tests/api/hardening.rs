//! Hardening: what an attacker sends to crash the hub or pin its memory is
//! refused, and the hub answers the next request. Deeply nested text for
//! every recursive parser (Cedar, JSON, the contact extractor), bodies
//! that never finish, bodies that would take more memory than the bound.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{db_test, helpers::*};

/// Sends raw JSON text (which `serde_json` in the test could not even
/// build when deep enough).
async fn post_raw(app: &TestApp, path: &str, token: Option<&str>, body: String) -> (StatusCode, Value) {
    let mut req = app.client.post(format!("{}{path}", app.base)).header("content-type", "application/json").body(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let res = req.send().await.expect("request");
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn alive(app: &TestApp) {
    let (s, body) = app.get("/health", None).await;
    assert_eq!(s, StatusCode::OK, "{body}");
}

fn bundle(name: &str, condition: &str) -> Value {
    json!({ "name": name, "version": 1, "iql_source": format!("permit (principal, action, resource) when {{ {condition} }};") })
}

async fn deeply_nested_text_is_refused_by_every_parser_and_the_hub_stays_up(app: TestApp) {
    let t = app.two_tenants("nest").await;
    let a = t.a_token.as_str();

    // Cedar: brackets, if-expressions and operator chains past their bounds.
    let parens = format!("{}true{}", "(".repeat(150), ")".repeat(150));
    let b = assert_error(app.post("/api/policies/bundles", Some(a), bundle("parens", &parens)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["iql_source nests brackets and if-expressions more than 32 levels deep"]));
    for (name, deep) in [
        ("sets", format!("{}1{} == 1", "[".repeat(5000), "]".repeat(5000))),
        ("records", format!("{}1{} == 1", "{a:".repeat(5000), "}".repeat(5000))),
        ("ifs", "if true then true else ".repeat(1000) + "true"),
    ] {
        let b = assert_error(app.post("/api/policies/bundles", Some(a), bundle(name, &deep)).await, 400, "ValidationError");
        assert_eq!(b["details"], json!(["iql_source nests brackets and if-expressions more than 32 levels deep"]), "{name}");
    }
    for (name, chain) in [
        ("sums", format!("1{} == 1", " + 1".repeat(30_000))),
        ("calls", format!("[1]{} == 1", ".contains(1)".repeat(20_000))),
        ("attrs", format!("context{} == 1", ".a".repeat(30_000))),
    ] {
        let b = assert_error(app.post("/api/policies/bundles", Some(a), bundle(name, &chain)).await, 400, "ValidationError");
        assert_eq!(b["details"], json!(["iql_source chains more than 1024 operators in one expression"]), "{name}");
    }
    alive(&app).await;
    // Within the bounds the same shapes are accepted, and the gate compiles
    // and applies the bundle once active.
    let within = format!("{}context.method == \"GET\"{} && ({})", "(".repeat(30), ")".repeat(30), "if true then true else ".repeat(2) + "true");
    let (s, created) = app.post("/api/policies/bundles", Some(a), bundle("within", &within)).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    let brackets_in_strings = format!("context.path != \"{}\" // {}", "((((".repeat(100), "[[[[".repeat(100));
    let (s, created) = app
        .post(
            "/api/policies/bundles",
            Some(a),
            json!({ "name": "strings", "version": 1, "activate": true,
        "iql_source": format!("permit (principal, action, resource) when {{ {brackets_in_strings}\n }};") }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    let (s, me) = app.get("/api/me", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{me}");

    // An evaluation's context and entities: JSON that Cedar converts recursively.
    let mut deep = json!(1);
    for _ in 0..40 {
        deep = json!({ "a": deep });
    }
    let b = assert_error(
        app.post("/api/policies/evaluate", Some(a), json!({ "principal": "P::\"p\"", "action": "A::\"a\"", "resource": "R::\"r\"", "context": { "x": deep } }))
            .await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["context nests more than 32 levels deep"]));

    // JSON bodies, on a tenant route and on public ones, with the nesting in
    // a value and in the body itself.
    let nested = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
    for (path, token, body) in [
        ("/api/crm/contacts", Some(a), format!(r#"{{"name":"x","attributes":{{"a":{}}}}}"#, nested(100_000))),
        ("/api/auth/login", None, format!(r#"{{"email":"a@example.com","password":{}}}"#, nested(20_000))),
        ("/api/auth/signup-tenant", None, nested(20_000)),
        ("/api/auth/token", None, format!(r#"{{"grant_type":{}}}"#, nested(20_000))),
    ] {
        let b = assert_error(post_raw(&app, path, token, body).await, 400, "ValidationError");
        assert_eq!(b["details"], json!(["request body nests arrays and objects more than 64 levels deep"]), "{path}");
    }
    // The MCP endpoint, whose JSON-RPC messages rmcp parses.
    let message = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"x","arguments":{}}}}}"#, nested(100_000));
    let b = assert_error(post_raw(&app, "/mcp", Some(a), message).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["the JSON-RPC message nests arrays and objects more than 64 levels deep"]));
    // At the bound a body is read as usual.
    let (s, c) = post_raw(&app, "/api/crm/contacts", Some(a), format!(r#"{{"name":"x","attributes":{{"a":{}}}}}"#, nested(62))).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");

    // The contact extractor reads nested brackets and quotes without recursion.
    let raw = format!("{}{}{}", "<(\"".repeat(30_000), "jane@example.com", ">)\"".repeat(30_000));
    let (s, r) = app
        .post("/api/parsing/contacts/extract", Some(a), json!({ "captures": [{ "source_kind": "email", "raw": raw }, { "source_kind": "text", "raw": raw }] }))
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    alive(&app).await;
}
db_test!(deeply_nested_text_is_refused_by_every_parser_and_the_hub_stays_up);

/// Writes a request head and `sent` bytes of a body that claims `length`,
/// then waits; returns the answer read until the hub closes.
async fn trickle(base: &str, path: &str, token: Option<&str>, length: usize, sent: usize) -> tokio::net::TcpStream {
    let addr = base.trim_start_matches("http://");
    let mut tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let head = format!("POST {path} HTTP/1.1\r\nHost: hub\r\nContent-Type: application/json\r\n{auth}Content-Length: {length}\r\n\r\n");
    tcp.write_all(head.as_bytes()).await.expect("head");
    let chunk = vec![b' '; 64 * 1024];
    let mut left = sent;
    while left > 0 {
        let n = left.min(chunk.len());
        tcp.write_all(&chunk[..n]).await.expect("body");
        left -= n;
    }
    tcp
}

/// The answer on a raw connection: its status, its headers and body as text.
async fn answer(tcp: &mut tokio::net::TcpStream, within: Duration) -> (u16, String) {
    let mut text = Vec::new();
    let read = tokio::time::timeout(within, tcp.read_to_end(&mut text)).await;
    assert!(read.is_ok(), "the hub neither answered nor closed within {within:?}: {}", String::from_utf8_lossy(&text));
    let text = String::from_utf8_lossy(&text).to_string();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text)
}

async fn bodies_that_never_finish_are_answered_408_and_their_connections_closed(app: TestApp) {
    let app = app.variant(|c| c.body_read_timeout_ms = 600).await;
    let t = app.signup("slow@example.com", "slow").await;
    let token = t["token"].as_str().unwrap();
    let started = Instant::now();
    // All but the last byte of a body, on a public route and on a tenant route.
    let mut public = trickle(&app.base, "/api/auth/login", None, 1000, 999).await;
    let mut tenant = trickle(&app.base, "/api/crm/contacts", Some(token), 100_000, 99_999).await;
    for tcp in [&mut public, &mut tenant] {
        let (status, text) = answer(tcp, Duration::from_secs(5)).await;
        assert_eq!(status, 408, "{text}");
        assert!(text.to_ascii_lowercase().contains("connection: close"), "{text}");
        assert!(text.ends_with(r#"{"success":false,"error":"RequestTimeout","details":["the request body did not arrive in full within 600 ms"]}"#), "{text}");
    }
    assert!(started.elapsed() < Duration::from_secs(3), "closed after {:?}", started.elapsed());
    alive(&app).await;
}
db_test!(bodies_that_never_finish_are_answered_408_and_their_connections_closed);

async fn public_routes_read_no_more_of_a_body_than_they_need(app: TestApp) {
    let app = app.variant(|c| c.body_read_timeout_ms = 60_000).await;
    // A sign-up form declared at 100 KiB is refused before its body is read.
    let started = Instant::now();
    let mut big = trickle(&app.base, "/api/auth/login", None, 100 * 1024, 0).await;
    let (status, text) = answer(&mut big, Duration::from_secs(5)).await;
    assert_eq!(status, 413, "{text}");
    assert!(text.contains(r#""details":["request bodies of this route are limited to 65536 bytes"]"#), "{text}");
    // A body that grows past it without declaring its length likewise: the
    // hub answers once 64 KiB are read, without waiting for the rest.
    let mut chunked = tokio::net::TcpStream::connect(app.base.trim_start_matches("http://")).await.unwrap();
    let head = "POST /api/auth/signup-tenant HTTP/1.1\r\nHost: hub\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    chunked.write_all(head.as_bytes()).await.unwrap();
    for _ in 0..9 {
        let chunk = format!("2000\r\n{}\r\n", " ".repeat(8 * 1024));
        if chunked.write_all(chunk.as_bytes()).await.is_err() {
            break;
        }
    }
    let (status, text) = answer(&mut chunked, Duration::from_secs(5)).await;
    assert_eq!(status, 413, "{text}");
    assert!(text.contains(r#""details":["request bodies of this route are limited to 65536 bytes"]"#), "{text}");
    // An inbound webhook for no tenant's secret is refused on its head.
    let mut inbound =
        trickle(&app.base, "/api/webhooks/inbound/email/acme?tenant_id=00000000-0000-7000-8000-000000000000", None, 2 * 1024 * 1024 - 1, 1024).await;
    let (status, text) = answer(&mut inbound, Duration::from_secs(5)).await;
    assert_eq!(status, 401, "{text}");
    assert!(started.elapsed() < Duration::from_secs(5), "answered after {:?}", started.elapsed());
}
db_test!(public_routes_read_no_more_of_a_body_than_they_need);

async fn bodies_past_the_memory_bound_are_answered_503_while_small_ones_pass(app: TestApp) {
    // 4 MiB for all bodies: large bodies may hold 3 MiB of it.
    let app = app.variant(|c| (c.body_memory_mib, c.body_read_timeout_ms) = (4, 20_000)).await;
    let t = app.signup("mem@example.com", "mem").await;
    let token = t["token"].as_str().unwrap().to_string();
    // Two bodies of 2 MiB less a byte, each stalled after 1.6 MiB: the second crosses the bound.
    let length = 2 * 1024 * 1024 - 1;
    let mut first = trickle(&app.base, "/api/crm/contacts", Some(&token), length, 1600 * 1024).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut second = trickle(&app.base, "/api/crm/contacts", Some(&token), length, 1600 * 1024).await;
    let (status, text) = answer(&mut second, Duration::from_secs(5)).await;
    assert_eq!(status, 503, "{text}");
    assert!(text.to_ascii_lowercase().contains("retry-after: 1"), "{text}");
    assert!(text.contains(r#""error":"ServiceUnavailable""#) && text.contains("memory bound"), "{text}");
    // Meanwhile a small body is read and answered at once.
    let started = Instant::now();
    let (s, body) = app.post("/api/auth/login", None, json!({ "email": "mem@example.com", "password": "correct horse battery" })).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert!(started.elapsed() < Duration::from_secs(1));
    // The stalled first body still holds its share; once it ends, the memory is back.
    drop(first.shutdown().await);
    drop(first);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let big = format!(r#"{{"name":"big","attributes":{{"pad":"{}"}}}}"#, "x".repeat(1536 * 1024));
    let (s, c) = post_raw(&app, "/api/crm/contacts", Some(&token), big.clone()).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let (s, c) = post_raw(&app, "/api/crm/contacts", Some(&token), big).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
}
db_test!(bodies_past_the_memory_bound_are_answered_503_while_small_ones_pass);
