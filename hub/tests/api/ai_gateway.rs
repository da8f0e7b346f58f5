//! sdk-ai-gateway: model routes with a vault-sealed credential, and
//! completions through a fake OpenAI-compatible provider that fails as
//! scripted, then answers; the prompt it receives is redacted.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
};

use axum::{extract::State as AxumState, http::HeaderMap, routing::post};
use base64::{Engine, engine::general_purpose::STANDARD as B64};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

type Shared = (Arc<Mutex<Vec<(String, Value)>>>, Arc<Mutex<VecDeque<u16>>>);

/// A chat-completions provider: each request gets the next status of its
/// script (200 with a completion once the script is used up); it keeps
/// each request's Authorization header and body.
struct Provider {
    base: String,
    got: Arc<Mutex<Vec<(String, Value)>>>,
}

impl Provider {
    async fn start(script: Vec<u16>) -> Provider {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let got: Shared = (Arc::default(), Arc::new(Mutex::new(VecDeque::from(script))));
        let app = axum::Router::new()
            .route(
                "/v1/chat/completions",
                post(|AxumState((got, script)): AxumState<Shared>, headers: HeaderMap, axum::Json(body): axum::Json<Value>| async move {
                    let auth = headers.get("authorization").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
                    got.lock().unwrap().push((auth, body.clone()));
                    let status = script.lock().unwrap().pop_front().unwrap_or(200);
                    let answer = json!({
                        "id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
                        "choices": [{ "index": 0, "message": { "role": "assistant", "content": "Noted." }, "finish_reason": "stop" }],
                        "usage": { "prompt_tokens": 21, "completion_tokens": 2, "total_tokens": 23 }
                    });
                    (axum::http::StatusCode::from_u16(status).unwrap(), axum::Json(if status == 200 { answer } else { json!({ "error": "busy" }) }))
                }),
            )
            .with_state(got.clone());
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Provider { base, got: got.0 }
    }

    fn got(&self) -> Vec<(String, Value)> {
        self.got.lock().unwrap().clone()
    }
}

async fn secret_ref(app: &TestApp, token: &str, reference: &str) {
    let (s, r) = app.post("/api/secrets/refs", Some(token), json!({ "ref": reference, "kms_key_id": "kms://providers/openai" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
}

async fn completions_are_redacted_retried_recorded_and_audited(app: TestApp) {
    let t = app.two_tenants("aigw").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].clone());
    let provider = Provider::start(vec![503]).await;
    secret_ref(&app, a, "ai/openai").await;
    let (s, r) = app
        .post(
            "/api/ai/routes",
            Some(a),
            json!({ "tenant_id": tenant, "name": "default", "provider_base_url": provider.base, "model": "gpt-test", "credential_ref": "ai/openai", "api_key": "sk-test-123456" }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    assert_eq!(
        (r["data"]["name"].as_str(), r["data"]["model"].as_str(), r["data"]["credential_ref"].as_str()),
        (Some("default"), Some("gpt-test"), Some("ai/openai"))
    );
    assert_eq!((r["data"]["timeout_ms"].as_i64(), r["data"]["max_attempts"].as_i64()), (Some(30000), Some(3)));
    assert!(r["data"].get("api_key").is_none(), "{r}");
    // Stored sealed: no column holds the key.
    let row: (String, String) = sqlx::query_as("SELECT credential_ciphertext, credential_wrapped_dek FROM ai_gateway_route WHERE tenant_id = $1")
        .bind(tenant.as_str().unwrap())
        .fetch_one(&app.state().db.read)
        .await
        .unwrap();
    assert!(!row.0.contains("sk-test") && !String::from_utf8_lossy(&B64.decode(&row.0).unwrap()).contains("sk-test"));

    let prompt = "Reach Ana at ana.lopez@example.com or +33 6 12 34 56 78; card 4111 1111 1111 1111. Order 1234-5678 ships 2026-11-25.";
    let (s, c) = app
        .post(
            "/api/ai/completions",
            Some(a),
            json!({ "messages": [{ "role": "system", "content": "Be brief." }, { "role": "user", "content": prompt }], "max_tokens": 64 }),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{c}");
    let d = &c["data"];
    assert_eq!(
        (d["content"].as_str(), d["finish_reason"].as_str(), d["route"].as_str(), d["model"].as_str()),
        (Some("Noted."), Some("stop"), Some("default"), Some("gpt-test"))
    );
    assert_eq!(d["attempts"], 2, "the first attempt got 503");
    assert_eq!(d["usage"], json!({ "prompt_tokens": 21, "completion_tokens": 2, "total_tokens": 23 }));
    assert_eq!(
        d["redactions"],
        json!([{ "kind": "email", "message_index": 1 }, { "kind": "card", "message_index": 1 }, { "kind": "phone", "message_index": 1 }])
    );
    // What left the hub: twice the same redacted prompt, with the unwrapped key.
    let got = provider.got();
    assert_eq!(got.len(), 2);
    for (auth, body) in &got {
        assert_eq!(auth, "Bearer sk-test-123456");
        assert_eq!((body["model"].as_str(), body["max_tokens"].as_i64()), (Some("gpt-test"), Some(64)));
        assert_eq!(body["messages"][0], json!({ "role": "system", "content": "Be brief." }));
        assert_eq!(body["messages"][1]["content"], "Reach Ana at [EMAIL] or [PHONE]; card [CARD]. Order 1234-5678 ships 2026-11-25.");
    }
    let record: (String, String, i64, Option<i64>, String) =
        sqlx::query_as("SELECT status, model, attempts, total_tokens, redactions FROM ai_gateway_completion WHERE completion_id = $1")
            .bind(d["completion_id"].as_str().unwrap())
            .fetch_one(&app.state().db.read)
            .await
            .unwrap();
    assert_eq!((record.0.as_str(), record.1.as_str(), record.2, record.3), ("completed", "gpt-test", 2, Some(23)));
    assert_eq!(serde_json::from_str::<Value>(&record.4).unwrap(), d["redactions"]);
    let events = app.events_of(&tenant).await;
    let tail: Vec<&str> = events.iter().rev().take(3).rev().map(String::as_str).collect();
    assert_eq!(tail, ["ai-gateway.route.set.v1", "ai-gateway.pii.redacted.v1", "ai-gateway.complete.v1"]);

    // A provider that keeps failing: 502 after the route's attempts, recorded as failed.
    let down = Provider::start(vec![500, 500]).await;
    let (s, r) = app
        .post("/api/ai/routes", Some(a), json!({ "name": "flaky", "provider_base_url": down.base, "model": "m2", "max_attempts": 2, "timeout_ms": 2000 }))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let b = assert_error(app.post("/api/ai/completions", Some(a), json!({ "route": "flaky", "prompt": "hello" })).await, 502, "BadGateway");
    assert_eq!(b["details"], json!(["the provider answered 500 (after 2 attempts)"]));
    assert_eq!(down.got().len(), 2);
    assert_eq!(down.got()[0].0, "", "a route without a credential sends none");
    let failed: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM ai_gateway_completion WHERE tenant_id = $1 AND status = 'failed' AND attempts = 2")
        .bind(tenant.as_str().unwrap())
        .fetch_one(&app.state().db.read)
        .await
        .unwrap();
    assert_eq!(failed, 1);
    // Resolution by model; replacing a route by name answers 200.
    let (s, c) = app.post("/api/ai/completions", Some(a), json!({ "model": "m2", "prompt": "again" })).await;
    assert_eq!(s, StatusCode::OK, "{c}");
    assert_eq!((c["data"]["route"].as_str(), c["data"]["attempts"].as_i64(), c["data"]["redactions"].clone()), (Some("flaky"), Some(1), json!([])));
    let (s, r) = app.post("/api/ai/routes", Some(a), json!({ "name": "flaky", "provider_base_url": down.base, "model": "m3" })).await;
    assert_eq!((s, r["data"]["model"].as_str()), (StatusCode::OK, Some("m3")));

    // The other tenant has no route of that name, and cannot open A's credential.
    let b = assert_error(app.post("/api/ai/completions", Some(&t.b_token), json!({ "prompt": "hi" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["no model route matches default; register one with POST /api/ai/routes"]));
}
db_test!(completions_are_redacted_retried_recorded_and_audited);

async fn a_route_takes_a_vault_envelope_and_checks_its_fields(app: TestApp) {
    let t = app.two_tenants("aigwv").await;
    let a = t.a_token.as_str();
    let provider = Provider::start(vec![]).await;
    secret_ref(&app, a, "ai/vaulted").await;
    let (s, e) = app.post("/api/vault/encrypt", Some(a), json!({ "ref": "ai/vaulted", "plaintext_b64": B64.encode("sk-vaulted") })).await;
    assert_eq!(s, StatusCode::OK, "{e}");
    let envelope = json!({ "ciphertext_b64": e["data"]["ciphertext_b64"], "wrapped_dek_b64": e["data"]["wrapped_dek_b64"], "iv_b64": e["data"]["iv_b64"], "tag_b64": e["data"]["tag_b64"] });
    let route = json!({ "name": "vaulted", "provider_base_url": provider.base, "model": "m", "credential_ref": "ai/vaulted", "credential_envelope": envelope });
    let (s, r) = app.post("/api/ai/routes", Some(a), route.clone()).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let (s, c) = app.post("/api/ai/completions", Some(a), json!({ "route": "vaulted", "prompt": "no pii here" })).await;
    assert_eq!(s, StatusCode::OK, "{c}");
    assert_eq!(provider.got()[0].0, "Bearer sk-vaulted");
    assert_eq!(provider.got()[0].1["messages"], json!([{ "role": "user", "content": "no pii here" }]));

    // The envelope is bound to its ref and tenant.
    secret_ref(&app, a, "ai/other").await;
    let mut wrong = route.clone();
    wrong["credential_ref"] = json!("ai/other");
    let b = assert_error(app.post("/api/ai/routes", Some(a), wrong).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["credential_envelope does not open for this tenant and credential_ref"]));
    secret_ref(&app, &t.b_token, "ai/vaulted").await;
    let b = assert_error(app.post("/api/ai/routes", Some(&t.b_token), route).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["credential_envelope does not open for this tenant and credential_ref"]));
    let b = assert_error(
        app.post(
            "/api/ai/routes",
            Some(a),
            json!({ "name": "x", "provider_base_url": provider.base, "model": "m", "credential_ref": "ai/unknown", "api_key": "k" }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["credential_ref ai/unknown is no secret reference of the tenant (POST /api/secrets/refs)"]));

    // The body against its schema first ...
    let b = assert_error(
        app.post(
            "/api/ai/routes",
            Some(a),
            json!({ "name": "Bad Name", "provider_base_url": "ftp://x", "api_key": "k", "max_attempts": 9, "timeout_ms": 5, "credential_envelope": { "iv_b64": "x" } }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "model is required",
            "credential_envelope.ciphertext_b64 is required",
            "credential_envelope.wrapped_dek_b64 is required",
            "credential_envelope.tag_b64 is required",
            "timeout_ms must be an integer from 1000 to 120000",
            "max_attempts must be an integer from 1 to 5"
        ])
    );
    // ... then what a schema cannot say.
    let b = assert_error(
        app.post("/api/ai/routes", Some(a), json!({ "name": "Bad Name", "provider_base_url": "ftp://x", "model": "m", "api_key": "k" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "name must be 1 to 64 of a-z, 0-9, '.', '_' or '-'",
            "provider_base_url must be an http or https URL of at most 2000 characters",
            "api_key and credential_envelope need a credential_ref",
        ])
    );
    let b = assert_error(
        app.post("/api/ai/completions", Some(a), json!({ "messages": [{ "role": "robot", "content": 1 }], "temperature": 3.0, "max_tokens": 0 })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "messages[0].role must be one of: system, user, assistant, tool",
            "messages[0].content must be a string",
            "max_tokens must be an integer from 1 to 1000000",
            "temperature must be a number from 0 to 2"
        ])
    );
    let b = assert_error(app.post("/api/ai/completions", Some(a), json!({ "messages": [] })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["messages must hold 1 to 100 items"]));
    let long = "x".repeat(200_001);
    let b = assert_error(
        app.post("/api/ai/completions", Some(a), json!({ "messages": [{ "role": "user", "content": long }], "prompt": "p" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["give messages or prompt, not both"]));
    let b = assert_error(app.post("/api/ai/completions", Some(a), json!({ "messages": [{ "role": "user", "content": long }] })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["messages[0].content must be a string of at most 200000 bytes"]));
    let b = assert_error(app.post("/api/ai/completions", Some(a), json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["messages must be an array of 1 to 100 messages (or give prompt)"]));
}
db_test!(a_route_takes_a_vault_envelope_and_checks_its_fields);

/// A provider that answers 200 with `answer` as its body, whatever it is asked.
async fn answering(answer: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let app = axum::Router::new().route("/v1/chat/completions", post(move || async move { ([("content-type", "application/json")], answer) }));
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

async fn a_providers_answer_is_read_within_a_bound_of_size_and_nesting(app: TestApp) {
    let t = app.two_tenants("aibound").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].clone());
    secret_ref(&app, a, "ai/openai").await;
    let limit = hub_ai::ai_gateway::MAX_ANSWER;
    let long = format!(r#"{{"choices":[{{"message":{{"role":"assistant","content":"{}"}}}}]}}"#, "x".repeat(limit));
    let deep = format!(r#"{{"choices":[{{"message":{{"role":"assistant","content":"x"}}}}],"extra":{}1{}}}"#, "[".repeat(100_000), "]".repeat(100_000));
    for (name, answer, why) in [
        ("long", long, format!("the provider's answer is longer than {limit} bytes")),
        ("deep", deep, "the provider's answer nests more than 64 levels deep".to_string()),
    ] {
        let base = answering(answer).await;
        let route = json!({ "tenant_id": tenant, "name": name, "provider_base_url": base, "model": "m", "credential_ref": "ai/openai", "api_key": "sk-test-123456", "max_attempts": 1 });
        let (s, r) = app.post("/api/ai/routes", Some(a), route).await;
        assert_eq!(s, StatusCode::CREATED, "{r}");
        let b = assert_error(
            app.post("/api/ai/completions", Some(a), json!({ "route": name, "messages": [{ "role": "user", "content": "hi" }] })).await,
            502,
            "BadGateway",
        );
        assert!(b["details"][0].as_str().unwrap().contains(&why), "{b}");
    }
    let (s, _) = app.get("/health", None).await;
    assert_eq!(s, StatusCode::OK);
}
db_test!(a_providers_answer_is_read_within_a_bound_of_size_and_nesting);

async fn routes_and_completion_records_are_listed_read_and_deleted(app: TestApp) {
    let t = app.two_tenants("aigw-life").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].clone());
    let provider = Provider::start(vec![500]).await;
    secret_ref(&app, a, "ai/key").await;
    let (s, alpha) = app
        .post(
            "/api/ai/routes",
            Some(a),
            json!({ "name": "alpha", "provider_base_url": provider.base, "model": "m1", "credential_ref": "ai/key", "api_key": "sk-life-123456" }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{alpha}");
    let (s, beta) = app
        .post("/api/ai/routes", Some(a), json!({ "name": "beta", "provider_base_url": provider.base, "model": "m2", "max_attempts": 1, "timeout_ms": 2000 }))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{beta}");

    // Listed newest first, filtered, never with the credential.
    let (s, list) = app.get("/api/ai/routes", Some(a)).await;
    assert_eq!((s, list["total"].as_i64()), (StatusCode::OK, Some(2)), "{list}");
    let names: Vec<&str> = list["data"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["beta", "alpha"]);
    let fields = |r: &Value| r.as_object().unwrap().keys().cloned().collect::<std::collections::BTreeSet<_>>();
    let expected =
        ["created_at", "credential_ref", "max_attempts", "model", "name", "provider_base_url", "route_id", "timeout_ms", "updated_at"].map(String::from).into();
    assert!(list["data"].as_array().unwrap().iter().all(|r| fields(r) == expected), "{list}");
    assert!(!list.to_string().contains("sk-life"), "{list}");
    let (_, by_model) = app.get("/api/ai/routes?model=m1", Some(a)).await;
    assert_eq!((by_model["total"].as_i64(), by_model["data"][0]["name"].as_str()), (Some(1), Some("alpha")));
    let (_, by_ref) = app.get("/api/ai/routes?credential_ref=ai/key&limit=1", Some(a)).await;
    assert_eq!((by_ref["total"].as_i64(), by_ref["data"][0]["route_id"].clone()), (Some(1), alpha["data"]["route_id"].clone()));
    let (_, paged) = app.get("/api/ai/routes?limit=1&offset=1", Some(a)).await;
    assert_eq!((paged["total"].as_i64(), paged["data"][0]["name"].as_str()), (Some(2), Some("alpha")));
    let (s, one) = app.get("/api/ai/routes/alpha", Some(a)).await;
    assert_eq!((s, &one["data"]), (StatusCode::OK, &alpha["data"]));
    assert_eq!(fields(&one["data"]), expected);
    assert_error(app.get("/api/ai/routes/gamma", Some(a)).await, 404, "NotFound");
    assert_error(app.get("/api/ai/routes/Not%20A%20Name", Some(a)).await, 404, "NotFound");
    assert_error(app.get("/api/ai/routes/alpha", Some(&t.b_token)).await, 404, "NotFound");
    let (_, b_list) = app.get("/api/ai/routes", Some(&t.b_token)).await;
    assert_eq!(b_list["total"], 0);

    // Completion records: a failed one, then a completed one with a redaction.
    assert_error(app.post("/api/ai/completions", Some(a), json!({ "route": "beta", "prompt": "hello" })).await, 502, "BadGateway");
    let (s, c) = app.post("/api/ai/completions", Some(a), json!({ "route": "alpha", "prompt": "mail ana@example.com" })).await;
    assert_eq!(s, StatusCode::OK, "{c}");
    let completion_id = c["data"]["completion_id"].as_str().unwrap().to_string();
    let (s, records) = app.get("/api/ai/completions", Some(a)).await;
    assert_eq!((s, records["total"].as_i64()), (StatusCode::OK, Some(2)), "{records}");
    let done = &records["data"][0];
    assert_eq!(
        (done["completion_id"].as_str(), done["route"].as_str(), done["route_id"].clone(), done["status"].as_str(), done["model"].as_str()),
        (Some(completion_id.as_str()), Some("alpha"), alpha["data"]["route_id"].clone(), Some("completed"), Some("m1"))
    );
    assert_eq!((done["prompt_tokens"].as_i64(), done["completion_tokens"].as_i64(), done["total_tokens"].as_i64()), (Some(21), Some(2), Some(23)));
    assert_eq!((done["attempts"].as_i64(), done["finish_reason"].as_str(), done["error"].clone()), (Some(1), Some("stop"), Value::Null));
    assert_eq!(done["redactions"], json!([{ "kind": "email", "message_index": 0 }]));
    assert!(done["latency_ms"].as_i64().is_some() && !records.to_string().contains("ana@example.com"), "{records}");
    let failed = &records["data"][1];
    assert_eq!(
        (failed["route"].as_str(), failed["status"].as_str(), failed["error"].as_str(), failed["total_tokens"].clone()),
        (Some("beta"), Some("failed"), Some("the provider answered 500 (after 1 attempts)"), Value::Null)
    );
    let (_, only_failed) = app.get("/api/ai/completions?status=failed", Some(a)).await;
    assert_eq!((only_failed["total"].as_i64(), only_failed["data"][0]["route"].as_str()), (Some(1), Some("beta")));
    let (_, by_route) = app.get("/api/ai/completions?route=alpha", Some(a)).await;
    assert_eq!((by_route["total"].as_i64(), by_route["data"][0]["completion_id"].as_str()), (Some(1), Some(completion_id.as_str())));
    let (_, future) = app.get("/api/ai/completions?from=2100-01-01T00:00:00Z", Some(a)).await;
    assert_eq!(future["total"], 0);
    let (_, until) = app.get("/api/ai/completions?from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z", Some(a)).await;
    assert_eq!(until["total"], 2);
    let (_, before) = app.get("/api/ai/completions?to=2000-01-01T00:00:00Z", Some(a)).await;
    assert_eq!(before["total"], 0);
    let b = assert_error(app.get("/api/ai/completions?from=yesterday&to=soon", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["from must be an RFC 3339 timestamp", "to must be an RFC 3339 timestamp"]));
    let b = assert_error(app.get("/api/ai/completions?status=running", Some(a)).await, 400, "ValidationError");
    assert!(b["details"].to_string().contains("status"), "{b}");
    let (s, one) = app.get(&format!("/api/ai/completions/{completion_id}"), Some(a)).await;
    assert_eq!((s, &one["data"]), (StatusCode::OK, done));
    assert_error(app.get(&format!("/api/ai/completions/{completion_id}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/ai/completions/0190a000-0000-7000-8000-000000000000", Some(a)).await, 404, "NotFound");
    assert_error(app.get("/api/ai/completions/first", Some(a)).await, 404, "NotFound");
    let (_, b_records) = app.get("/api/ai/completions", Some(&t.b_token)).await;
    assert_eq!(b_records["total"], 0);

    // Deleting a route: gone from lists and resolution, its sealed key
    // erased, its completion records kept.
    assert_error(app.call(reqwest::Method::DELETE, "/api/ai/routes/alpha", Some(&t.b_token), None).await, 404, "NotFound");
    let (s, gone) = app.call(reqwest::Method::DELETE, "/api/ai/routes/alpha", Some(a), None).await;
    assert_eq!(s, StatusCode::OK, "{gone}");
    assert_eq!(gone["data"], json!({ "route_id": alpha["data"]["route_id"], "name": "alpha", "deleted": true, "credential_erased": true }));
    let sealed: (Option<String>, Option<String>, Option<String>) =
        sqlx::query_as("SELECT credential_ciphertext, credential_wrapped_dek, deleted_at FROM ai_gateway_route WHERE tenant_id = $1 AND name = 'alpha'")
            .bind(tenant.as_str().unwrap())
            .fetch_one(&app.state().db.read)
            .await
            .unwrap();
    assert!(sealed.0.is_none() && sealed.1.is_none() && sealed.2.is_some(), "{sealed:?}");
    assert_error(app.get("/api/ai/routes/alpha", Some(a)).await, 404, "NotFound");
    assert_error(app.call(reqwest::Method::DELETE, "/api/ai/routes/alpha", Some(a), None).await, 404, "NotFound");
    assert_error(app.call(reqwest::Method::DELETE, "/api/ai/routes/Bad!", Some(a), None).await, 404, "NotFound");
    let (_, list) = app.get("/api/ai/routes", Some(a)).await;
    assert_eq!((list["total"].as_i64(), list["data"][0]["name"].as_str()), (Some(1), Some("beta")));
    let b = assert_error(app.post("/api/ai/completions", Some(a), json!({ "route": "alpha", "prompt": "hi" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["no model route matches alpha; register one with POST /api/ai/routes"]));
    let b = assert_error(app.post("/api/ai/completions", Some(a), json!({ "model": "m1", "prompt": "hi" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["no model route matches m1; register one with POST /api/ai/routes"]));
    let (s, kept) = app.get(&format!("/api/ai/completions/{completion_id}"), Some(a)).await;
    assert_eq!((s, kept["data"]["route"].as_str()), (StatusCode::OK, Some("alpha")));
    // Its name registered again brings the row back (200), without a credential.
    let (s, back) = app.post("/api/ai/routes", Some(a), json!({ "name": "alpha", "provider_base_url": provider.base, "model": "m1" })).await;
    assert_eq!((s, &back["data"]["route_id"], &back["data"]["credential_ref"]), (StatusCode::OK, &alpha["data"]["route_id"], &Value::Null), "{back}");
    let (_, list) = app.get("/api/ai/routes", Some(a)).await;
    assert_eq!(list["total"], 2);

    let events = app.events_of(&tenant).await;
    let ours: Vec<&str> = events.iter().map(String::as_str).filter(|e| e.starts_with("ai-gateway.route")).collect();
    assert_eq!(ours, ["ai-gateway.route.set.v1", "ai-gateway.route.set.v1", "ai-gateway.route.deleted.v1", "ai-gateway.route.set.v1"]);
}
db_test!(routes_and_completion_records_are_listed_read_and_deleted);
