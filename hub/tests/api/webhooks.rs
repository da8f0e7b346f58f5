//! sdk-webhook: deliveries enqueued with their events, signed the Standard
//! Webhooks way (checked by the Rust crate and the official Python
//! package), retried, dead-lettered and replayed; secret rotation; the
//! operator's view. A real receiver (an axum server in the test) answers.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{extract::State as AxumState, http::HeaderMap, routing::post};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

/// One request a receiver got.
#[derive(Clone, Debug)]
struct Received {
    id: String,
    timestamp: String,
    signature: String,
    body: String,
}

/// What a receiver shares with its handler: what it got, and its script.
type Shared = (Arc<Mutex<Vec<Received>>>, Arc<Mutex<VecDeque<u16>>>);

/// A webhook receiver: answers each request with the next status of its
/// script (204 once the script is used up) and keeps what it got.
#[derive(Clone)]
struct Receiver {
    url: String,
    got: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    async fn start(script: Vec<u16>) -> Receiver {
        Self::start_on(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(), script).await
    }

    async fn start_on(listener: tokio::net::TcpListener, script: Vec<u16>) -> Receiver {
        let got: Arc<Mutex<Vec<Received>>> = Arc::default();
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let state = (got.clone(), script);
        let app = axum::Router::new()
            .route(
                "/hook",
                post(|AxumState((got, script)): AxumState<Shared>, headers: HeaderMap, body: String| async move {
                    let h = |n: &str| headers.get(n).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
                    got.lock().unwrap().push(Received { id: h("webhook-id"), timestamp: h("webhook-timestamp"), signature: h("webhook-signature"), body });
                    let status = script.lock().unwrap().pop_front().unwrap_or(204);
                    axum::http::StatusCode::from_u16(status).unwrap()
                }),
            )
            .with_state(state);
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { url, got }
    }

    fn got(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    async fn wait_for(&self, n: usize) -> Vec<Received> {
        for _ in 0..200 {
            if self.got().len() >= n {
                return self.got();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the receiver got {} requests, not {n}", self.got().len());
    }
}

/// Verifies a request against a `whsec_` secret with the Rust crate of
/// the Standard Webhooks project.
fn verifies(r: &Received, secret: &str) -> bool {
    let mut headers = axum::http::HeaderMap::new();
    headers.insert("webhook-id", r.id.parse().unwrap());
    headers.insert("webhook-timestamp", r.timestamp.parse().unwrap());
    headers.insert("webhook-signature", r.signature.parse().unwrap());
    standardwebhooks::Webhook::new(secret).unwrap().verify(r.body.as_bytes(), &headers).is_ok()
}

/// Makes a delivery due now (time passing, without waiting for it).
async fn due_now(app: &TestApp, delivery: &str, attempts: Option<i64>) {
    sqlx::query("UPDATE webhook_delivery SET next_attempt_at = '2000-01-01T00:00:00.000000Z', attempts = COALESCE($2, attempts) WHERE delivery_id = $1")
        .bind(delivery)
        .bind(attempts)
        .execute(app.state().db.writer())
        .await
        .unwrap();
}

/// Polls a delivery until `done` holds for it.
async fn delivery_until(app: &TestApp, token: &str, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..200 {
        let (_, d) = app.get(&format!("/api/webhooks/deliveries/{id}"), Some(token)).await;
        if done(&d["data"]) {
            return d["data"].clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the delivery {id} never reached the state asked for");
}

/// The endpoint's deliveries, once the worker has fanned out at least one.
async fn deliveries(app: &TestApp, endpoint: &str) -> Vec<String> {
    for _ in 0..200 {
        let ids: Vec<String> = sqlx::query_scalar("SELECT delivery_id FROM webhook_delivery WHERE endpoint_id = $1 ORDER BY created_at")
            .bind(endpoint)
            .fetch_all(&app.state().db.read)
            .await
            .unwrap();
        if !ids.is_empty() {
            return ids;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no delivery to {endpoint}");
}

async fn register(app: &TestApp, token: &str, name: &str) {
    let (s, b) = app.post("/api/workflows/definitions", Some(token), json!({ "name": name, "step_specs": [{ "name": "one" }] })).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
}

async fn deliveries_are_signed_retried_and_kept_with_their_attempts(app: TestApp) {
    let rx = Receiver::start(vec![500]).await;
    let t = app.two_tenants("webhooks").await;
    let a = t.a_token.as_str();
    let (s, ep) = app.post("/api/webhooks/endpoints", Some(a), json!({ "url": rx.url, "event_types": ["workflow.*"], "description": "flows" })).await;
    assert_eq!(s, StatusCode::CREATED, "{ep}");
    let secret = ep["data"]["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("whsec_"), "{secret}");
    let endpoint = ep["data"]["endpoint_id"].as_str().unwrap().to_string();
    assert_eq!((ep["data"]["status"].as_str(), ep["data"]["event_types"].clone()), (Some("active"), json!(["workflow.*"])));
    let (_, read) = app.get(&format!("/api/webhooks/endpoints/{endpoint}"), Some(a)).await;
    assert!(read["data"].get("secret").is_none(), "the secret is shown once");

    // An event outside the subscription is not delivered; one inside is.
    let (s, _) = app.post("/api/geo/addresses", Some(a), json!({ "lines": ["1 Hook Lane"], "country_code": "NL" })).await;
    assert_eq!(s, StatusCode::CREATED);
    register(&app, a, "hooked").await;
    let first = rx.wait_for(1).await;
    let id = first[0].id.clone();
    let d = delivery_until(&app, a, &id, |d| d["attempts"] == 1).await;
    assert_eq!(
        (d["status"].as_str(), d["last_status_code"].as_i64(), d["event_type"].as_str()),
        (Some("pending"), Some(500), Some("workflow.definition.registered.v1"))
    );
    due_now(&app, &id, None).await;
    let both = rx.wait_for(2).await;
    assert_eq!(both[1].id, id, "the same webhook-id on every attempt");
    let body: Value = serde_json::from_str(&both[1].body).unwrap();
    assert_eq!(
        (body["type"].as_str(), body["data"]["name"].as_str(), body["tenant_id"].clone()),
        (Some("workflow.definition.registered.v1"), Some("hooked"), t.a["tenant_id"].clone())
    );
    assert!(body["timestamp"].is_string() && body["event_id"].is_string(), "{body}");
    assert!(both.iter().all(|r| verifies(r, &secret)), "signed with the endpoint's secret");
    let wrong = "whsec_".to_string() + &"A".repeat(32);
    assert!(!verifies(&both[1], &wrong));
    // The official Python package agrees.
    let wire: Vec<Value> = both
        .iter()
        .map(|r| json!({ "headers": { "webhook-id": r.id, "webhook-timestamp": r.timestamp, "webhook-signature": r.signature }, "body": r.body }))
        .collect();
    let report = run_python("webhook_verify.py", &[], json!({ "secrets": [secret, wrong], "deliveries": wire })).await;
    assert_eq!(report["verified"], json!([[true, false], [true, false]]));

    let d = delivery_until(&app, a, &id, |d| d["status"] == "succeeded").await;
    let codes: Vec<i64> = d["attempt_history"].as_array().unwrap().iter().map(|x| x["status_code"].as_i64().unwrap()).collect();
    assert_eq!(codes, [500, 204]);
    assert_eq!(d["attempt_history"][0]["attempt"], 1);
    let (_, ep) = app.get(&format!("/api/webhooks/endpoints/{endpoint}"), Some(a)).await;
    assert_eq!(ep["data"]["failure_streak"], 0);
    assert!(ep["data"]["last_success_at"].is_string() && ep["data"]["last_failure_at"].is_string(), "{ep}");
    assert_eq!(rx.got().len(), 2, "nothing else was delivered");
    assert_error(app.get(&format!("/api/webhooks/deliveries/{id}"), Some(&t.b_token)).await, 404, "NotFound");
    let (_, list) = app.get("/api/webhooks/endpoints", Some(&t.b_token)).await;
    assert_eq!(list["total"], 0);

    // Rotation: both secrets sign during the grace period.
    let (s, rotated) = app.post(&format!("/api/webhooks/endpoints/{endpoint}/rotate-secret"), Some(a), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{rotated}");
    let new_secret = rotated["data"]["secret"].as_str().unwrap().to_string();
    assert_ne!(new_secret, secret);
    register(&app, a, "rotated").await;
    let third = rx.wait_for(3).await.pop().unwrap();
    assert_eq!(third.signature.split(' ').count(), 2, "{}", third.signature);
    assert!(verifies(&third, &secret) && verifies(&third, &new_secret));
    app.post(&format!("/api/webhooks/endpoints/{endpoint}/rotate-secret"), Some(a), json!({ "grace_seconds": 0 })).await;
    let (_, now) = app.get(&format!("/api/webhooks/endpoints/{endpoint}"), Some(a)).await;
    register(&app, a, "after-grace").await;
    let fourth = rx.wait_for(4).await.pop().unwrap();
    assert_eq!(fourth.signature.split(' ').count(), 1, "the grace is over: {now}");
    assert!(!verifies(&fourth, &new_secret));

    // Disabled: the events of that time are not delivered; enabled again,
    // the next one is.
    let (_, off) = app.post(&format!("/api/webhooks/endpoints/{endpoint}/disable"), Some(a), json!({})).await;
    assert_eq!(off["data"]["status"], "disabled");
    register(&app, a, "while-off").await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(rx.got().len(), 4);
    let (_, on) = app.post(&format!("/api/webhooks/endpoints/{endpoint}/enable"), Some(a), json!({})).await;
    assert_eq!(on["data"]["status"], "active");
    register(&app, a, "back-on").await;
    let fifth: Value = serde_json::from_str(&rx.wait_for(5).await[4].body).unwrap();
    assert_eq!(fifth["data"]["name"], "back-on");

    // Changing the subscriptions; bad input.
    let (s, changed) =
        app.call(Method::PATCH, &format!("/api/webhooks/endpoints/{endpoint}"), Some(a), Some(json!({ "event_types": ["geo.*", "geo.*", "*"] }))).await;
    assert_eq!((s, changed["data"]["event_types"].clone()), (StatusCode::OK, json!(["geo.*", "*"])));
    let b = assert_error(
        app.post("/api/webhooks/endpoints", Some(a), json!({ "url": "ftp://example.com/x", "event_types": ["Nope", "crm.*.x"] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "url must be an http or https URL of at most 2000 characters",
            "event_types[0] must be an event type (crm.contact.created.v1), a tail wildcard (crm.*) or *",
            "event_types[1] must be an event type (crm.contact.created.v1), a tail wildcard (crm.*) or *",
        ])
    );
    let b =
        assert_error(app.post("/api/webhooks/endpoints", Some(a), json!({ "url": " ", "event_types": [], "description": 5 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["url is required", "event_types must hold 1 to 100 items", "description must be a string"]));
    let b = assert_error(
        app.call(Method::PATCH, &format!("/api/webhooks/endpoints/{endpoint}"), Some(a), Some(json!({ "event_types": "crm.*" }))).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["event_types must be an array"]));
    let b = assert_error(
        app.post(&format!("/api/webhooks/endpoints/{endpoint}/rotate-secret"), Some(a), json!({ "grace_seconds": 604_801 })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["grace_seconds must be an integer from 0 to 604800"]));
    let (s, gone) = app.call(Method::DELETE, &format!("/api/webhooks/endpoints/{endpoint}"), Some(a), None).await;
    assert_eq!((s, gone["data"]["deleted"].as_bool()), (StatusCode::OK, Some(true)));
    assert_error(app.get(&format!("/api/webhooks/deliveries/{id}"), Some(a)).await, 404, "NotFound");
    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |name: &str| events.iter().filter(|e| *e == name).count();
    assert_eq!((count("webhook.endpoint.created.v1"), count("webhook.endpoint.updated.v1"), count("webhook.endpoint.deleted.v1")), (1, 5, 1));
}
db_test!(deliveries_are_signed_retried_and_kept_with_their_attempts);

/// An entry appended through the group-commit writer (`/api/audit/append`)
/// is delivered like one a route records in its own transaction; another
/// tenant's appends reach nothing of this tenant's.
async fn appended_entries_are_delivered_like_recorded_ones(app: TestApp) {
    let rx = Receiver::start(vec![]).await;
    let t = app.two_tenants("hooks-append").await;
    let a = t.a_token.as_str();
    let (s, ep) = app.post("/api/webhooks/endpoints", Some(a), json!({ "url": rx.url, "event_types": ["crm.call.*"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{ep}");
    app.append(&t.b_token, 1, "crm.call.logged.v1", json!({ "call": "theirs" })).await;
    app.append(a, 1, "crm.contact.created.v1", json!({ "contact": "not subscribed" })).await;
    let appended = app.append(a, 1, "crm.call.logged.v1", json!({ "call": "ours" })).await;
    let got = rx.wait_for(1).await;
    let body: Value = serde_json::from_str(&got[0].body).unwrap();
    assert_eq!(
        (body["type"].as_str(), body["data"].clone(), body["event_id"].clone()),
        (Some("crm.call.logged.v1"), json!({ "call": "ours" }), appended["entry_id"].clone())
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(rx.got().len(), 1, "only the subscribed type of this tenant: {:?}", rx.got());
}
db_test!(appended_entries_are_delivered_like_recorded_ones);

/// The total and the ids of one page of `GET /api/webhooks/deliveries?{q}`.
async fn listed_deliveries(app: &TestApp, token: &str, q: String) -> (i64, Vec<String>) {
    let (s, b) = app.get(&format!("/api/webhooks/deliveries?{q}"), Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    (b["total"].as_i64().unwrap(), b["data"].as_array().unwrap().iter().map(|d| d["delivery_id"].as_str().unwrap().to_string()).collect())
}

/// The delivery list: every state, newest first, filtered by endpoint,
/// status and event type; another tenant's are not listed.
async fn deliveries_are_listed_with_filters(app: TestApp) {
    let rx = Receiver::start(vec![]).await;
    let t = app.two_tenants("hooks-list").await;
    let a = t.a_token.as_str();
    let (_, flows) = app.post("/api/webhooks/endpoints", Some(a), json!({ "url": rx.url, "event_types": ["workflow.*"] })).await;
    let (_, places) = app.post("/api/webhooks/endpoints", Some(a), json!({ "url": rx.url, "event_types": ["geo.*"] })).await;
    let (flows, places) = (flows["data"]["endpoint_id"].as_str().unwrap().to_string(), places["data"]["endpoint_id"].as_str().unwrap().to_string());
    register(&app, a, "listed").await;
    let first = deliveries(&app, &flows).await;
    let (s, _) = app.post("/api/geo/addresses", Some(a), json!({ "lines": ["2 Hook Lane"], "country_code": "NL" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let second = deliveries(&app, &places).await;
    rx.wait_for(2).await;
    for id in [&first[0], &second[0]] {
        delivery_until(&app, a, id, |d| d["status"] == "succeeded").await;
    }

    let (s, all) = app.get("/api/webhooks/deliveries", Some(a)).await;
    assert_eq!((s, all["total"].as_i64()), (StatusCode::OK, Some(2)), "{all}");
    let ids: Vec<&str> = all["data"].as_array().unwrap().iter().map(|d| d["delivery_id"].as_str().unwrap()).collect();
    assert_eq!(ids, [second[0].as_str(), first[0].as_str()], "newest first");
    assert!(all["data"][0].get("attempt_history").is_none(), "attempts are read per delivery");
    let listed = |q: &str| listed_deliveries(&app, a, q.to_string());
    assert_eq!(listed(&format!("endpoint_id={flows}")).await, (1, vec![first[0].clone()]));
    assert_eq!(listed("event_type=geo.address.canonicalised.v1").await, (1, vec![second[0].clone()]));
    assert_eq!(listed("status=succeeded&limit=1").await, (2, vec![second[0].clone()]));
    assert_eq!(listed("status=succeeded&limit=1&offset=1").await, (2, vec![first[0].clone()]));
    assert_eq!(listed("status=dead").await, (0, vec![]));
    assert_eq!(listed(&format!("endpoint_id={places}&event_type=workflow.definition.registered.v1")).await, (0, vec![]));
    let (_, theirs) = app.get("/api/webhooks/deliveries", Some(&t.b_token)).await;
    assert_eq!(theirs["total"], 0);
    assert_error(app.get("/api/webhooks/deliveries?status=lost", Some(a)).await, 400, "ValidationError");
    assert_error(app.get("/api/webhooks/deliveries?endpoint_id=not-a-uuid", Some(a)).await, 400, "ValidationError");
}
db_test!(deliveries_are_listed_with_filters);

/// A test event: recorded, and delivered signed to the endpoint tested
/// whatever it subscribes to, through the worker like any delivery.
async fn a_test_event_is_delivered_signed_to_the_endpoint(app: TestApp) {
    let rx = Receiver::start(vec![]).await;
    let t = app.two_tenants("hooks-test").await;
    let a = t.a_token.as_str();
    let (s, ep) = app.post("/api/webhooks/endpoints", Some(a), json!({ "url": rx.url, "event_types": ["crm.never.sent.v1"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{ep}");
    let secret = ep["data"]["secret"].as_str().unwrap().to_string();
    let endpoint = ep["data"]["endpoint_id"].as_str().unwrap().to_string();
    let path = format!("/api/webhooks/endpoints/{endpoint}/test");
    let (s, sent) = app.post(&path, Some(a), json!({})).await;
    assert_eq!(s, StatusCode::CREATED, "{sent}");
    let d = &sent["data"];
    assert_eq!(
        (d["endpoint_id"].as_str(), d["event_type"].as_str(), d["status"].as_str(), d["attempts"].as_i64()),
        (Some(endpoint.as_str()), Some("webhook.endpoint.tested.v1"), Some("pending"), Some(0))
    );
    let id = d["delivery_id"].as_str().unwrap().to_string();
    let got = rx.wait_for(1).await;
    assert_eq!(got[0].id, id, "the delivery's id is the webhook-id");
    assert!(verifies(&got[0], &secret), "signed with the endpoint's secret");
    let body: Value = serde_json::from_str(&got[0].body).unwrap();
    assert_eq!(
        (body["type"].as_str(), body["data"].clone(), body["event_id"].clone()),
        (Some("webhook.endpoint.tested.v1"), json!({ "endpoint_id": endpoint, "test": true }), d["entry_id"].clone())
    );
    let done = delivery_until(&app, a, &id, |d| d["status"] == "succeeded").await;
    assert_eq!(done["attempt_history"][0]["status_code"], 204);

    assert_error(app.post(&path, Some(&t.b_token), json!({})).await, 404, "NotFound");
    assert_error(app.post("/api/webhooks/endpoints/not-an-id/test", Some(a), json!({})).await, 404, "NotFound");
    app.post(&format!("/api/webhooks/endpoints/{endpoint}/disable"), Some(a), json!({})).await;
    let b = assert_error(app.post(&path, Some(a), json!({})).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the endpoint is disabled; enable it to test it"]));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(rx.got().len(), 1, "one delivery per test");
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "webhook.endpoint.tested.v1").count(), 1);
}
db_test!(a_test_event_is_delivered_signed_to_the_endpoint);

async fn failed_deliveries_are_dead_lettered_then_replayed(app: TestApp) {
    let t = app.two_tenants("deadletter").await;
    let a = t.a_token.as_str();
    // A receiver that is down: the port is closed until it comes up.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let (_, ep) = app
        .post("/api/webhooks/endpoints", Some(a), json!({ "url": format!("http://{addr}/hook"), "event_types": ["workflow.definition.registered.v1"] }))
        .await;
    let endpoint = ep["data"]["endpoint_id"].as_str().unwrap().to_string();
    register(&app, a, "lost").await;
    let id = deliveries(&app, &endpoint).await.pop().expect("a delivery");
    let d = delivery_until(&app, a, &id, |d| d["attempts"] == 1).await;
    assert!(d["last_error"].as_str().unwrap().len() > 3, "{d}");
    assert_eq!(d["last_status_code"], Value::Null);
    // The eighth attempt fails: dead.
    due_now(&app, &id, Some(7)).await;
    let d = delivery_until(&app, a, &id, |d| d["status"] == "dead").await;
    assert!(d["finished_at"].is_string());
    assert!(app.events_of(&t.a["tenant_id"]).await.iter().any(|e| e == "webhook.delivery.dead_lettered.v1"));

    let tenant = t.a["tenant_id"].as_str().unwrap();
    let (s, dead) = app.get(&format!("/api/webhooks/deadletters?tenant_id={tenant}&limit=10"), Some(a)).await;
    assert_eq!((s, dead["total"].as_i64(), dead["data"][0]["delivery_id"].as_str()), (StatusCode::OK, Some(1), Some(id.as_str())));
    assert_error(app.get("/api/webhooks/deadletters", Some(a)).await, 400, "ValidationError");
    assert_error(app.get(&format!("/api/webhooks/deadletters?tenant_id={tenant}&limit=ten"), Some(a)).await, 400, "ValidationError");
    let b_tenant = t.b["tenant_id"].as_str().unwrap();
    assert_error(app.get(&format!("/api/webhooks/deadletters?tenant_id={b_tenant}"), Some(a)).await, 403, "TenantMismatch");
    let (_, none) = app.get(&format!("/api/webhooks/deadletters?tenant_id={b_tenant}"), Some(&t.b_token)).await;
    assert_eq!(none["total"], 0);

    // The receiver comes up; a retry delivers.
    let rx = Receiver::start_on(tokio::net::TcpListener::bind(addr).await.unwrap(), vec![]).await;
    let (s, again) = app.post(&format!("/api/webhooks/deadletters/{id}/retry"), Some(a), json!({})).await;
    assert_eq!((s, again["data"]["status"].as_str()), (StatusCode::OK, Some("pending")));
    assert_eq!(rx.wait_for(1).await[0].id, id);
    let d = delivery_until(&app, a, &id, |d| d["status"] == "succeeded").await;
    assert_eq!(d["attempt_history"].as_array().unwrap().len(), 3, "the history is kept across the replay");
    assert_error(app.post(&format!("/api/webhooks/deadletters/{id}/retry"), Some(a), json!({})).await, 409, "Conflict");
    assert_error(app.post(&format!("/api/webhooks/deadletters/{id}/retry"), Some(&t.b_token), json!({})).await, 404, "NotFound");

    // A 410 disables the endpoint and kills the delivery.
    let gone = Receiver::start(vec![410]).await;
    let (_, ep2) = app.post("/api/webhooks/endpoints", Some(a), json!({ "url": gone.url, "event_types": ["workflow.*"] })).await;
    let endpoint2 = ep2["data"]["endpoint_id"].as_str().unwrap().to_string();
    register(&app, a, "gone").await;
    gone.wait_for(1).await;
    let id2 = deliveries(&app, &endpoint2).await.pop().unwrap();
    delivery_until(&app, a, &id2, |d| d["status"] == "dead").await;
    let (_, ep2) = app.get(&format!("/api/webhooks/endpoints/{endpoint2}"), Some(a)).await;
    assert_eq!((ep2["data"]["status"].as_str(), ep2["data"]["disabled_reason"].as_str()), (Some("disabled"), Some("the receiver answered 410 Gone")));

    // Bulk replay of a time range.
    let (s, r) = app.post("/api/webhooks/deadletters/replay", Some(a), json!({ "from": "2000-01-01T00:00:00Z" })).await;
    assert_eq!((s, r["data"]["replayed"].as_u64()), (StatusCode::OK, Some(1)), "{r}");
    let (_, d2) = app.get(&format!("/api/webhooks/deliveries/{id2}"), Some(a)).await;
    assert_eq!(d2["data"]["status"], "pending", "requeued; it waits while its endpoint is disabled");
    let (_, r) = app.post("/api/webhooks/deadletters/replay", Some(a), json!({ "from": "2000-01-01T00:00:00Z" })).await;
    assert_eq!(r["data"]["replayed"], 0);
    let b = assert_error(
        app.post("/api/webhooks/deadletters/replay", Some(a), json!({ "from": "yesterday", "endpoint_id": "e", "limit": 0 })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["from must be an RFC 3339 timestamp", "endpoint_id must be a UUID", "limit must be an integer from 1 to 10000"]));
    let b = assert_error(app.post("/api/webhooks/deadletters/replay", Some(a), json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["from is required"]));

    // The operator sees every tenant's endpoints, newest first.
    let (s, all) = app.admin(Method::GET, "/admin/webhooks").await;
    assert_eq!(s, StatusCode::OK, "{all}");
    let ids: Vec<&str> = all["data"].as_array().unwrap().iter().map(|e| e["endpoint_id"].as_str().unwrap()).collect();
    assert_eq!(ids, [endpoint2.as_str(), endpoint.as_str()]);
    assert!(all["data"][0].get("secret").is_none() && all["data"][0]["failure_streak"].is_i64());
    let (_, one) = app.admin(Method::GET, &format!("/admin/webhooks?tenant_id={b_tenant}")).await;
    assert_eq!(one["data"], json!([]));
    let (s, _) = app.admin(Method::GET, "/admin/webhooks?tenant_id=nope").await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}
db_test!(failed_deliveries_are_dead_lettered_then_replayed);

/// A kind's handler for the test: keeps what it was handed.
#[derive(Default)]
struct Recorder(Mutex<Vec<(String, String, Value)>>);

impl hub_kernel::inbound::InboundHandler for Recorder {
    fn handle<'a>(
        &'a self,
        _tx: &'a mut hub_kernel::db::Tx,
        tenant_id: &'a str,
        provider: &'a str,
        payload: &'a Value,
    ) -> futures_util::future::BoxFuture<'a, hub_kernel::error::ApiResult<Value>> {
        Box::pin(async move {
            self.0.lock().unwrap().push((tenant_id.to_string(), provider.to_string(), payload.clone()));
            Ok(json!({ "stored": true }))
        })
    }
}

async fn inbound_webhooks_are_verified_then_handed_to_their_kind(app: TestApp) {
    let recorder = Arc::new(Recorder::default());
    app.state().inbound.register("probe", recorder.clone());
    let t = app.two_tenants("inbound").await;
    let a = t.a_token.as_str();
    let tenant = t.a["tenant_id"].as_str().unwrap().to_string();
    let (s, set) = app.post("/api/webhooks/inbound-secrets", Some(a), json!({ "kind": "probe", "provider": "acme" })).await;
    assert_eq!(s, StatusCode::CREATED, "{set}");
    let secret = set["data"]["secret"].as_str().unwrap().to_string();
    let (_, list) = app.get("/api/webhooks/inbound-secrets", Some(a)).await;
    assert_eq!((list["total"].as_i64(), list["data"][0].get("secret")), (Some(1), None));
    let (_, other) = app.get("/api/webhooks/inbound-secrets", Some(&t.b_token)).await;
    assert_eq!(other["total"], 0);

    let send = |id: &str, at: i64, key: &str, body: &str, url: String| {
        let signature = standardwebhooks::Webhook::new(key).unwrap().sign(id, at, body.as_bytes()).unwrap();
        app.client
            .post(format!("{}{url}", app.base))
            .header("webhook-id", id)
            .header("webhook-timestamp", at.to_string())
            .header("webhook-signature", signature)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    let url = format!("/api/webhooks/inbound/probe/acme?tenant_id={tenant}");
    let now = chrono::Utc::now().timestamp();
    let body = r#"{"event":"delivered","message":"m-1"}"#;
    let res = send("msg_1", now, &secret, body, url.clone()).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let answer: Value = res.json().await.unwrap();
    assert_eq!(answer["data"], json!({ "received": true, "webhook_id": "msg_1", "result": { "stored": true } }));
    assert_eq!(recorder.0.lock().unwrap().clone(), [(tenant.clone(), "acme".to_string(), serde_json::from_str::<Value>(body).unwrap())]);

    let status = |r: reqwest::Response| r.status().as_u16();
    // A resend of the id (signed anew at its own time, as a sender's retry
    // is): the first delivery's answer, and nothing handed on again.
    for at in [now, now + 1] {
        let res = send("msg_1", at, &secret, body, url.clone()).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.json::<Value>().await.unwrap(), answer, "a resend answers what the first delivery got");
    }
    // Another body under the id is not a resend.
    let res = send("msg_1", now, &secret, r#"{"event":"bounced","message":"m-1"}"#, url.clone()).await.unwrap();
    let other = (res.status(), res.json::<Value>().await.unwrap());
    let b = assert_error(other, 409, "Conflict");
    assert_eq!(b["details"], json!(["webhook-id msg_1 was received already with a different body"]));
    // Nor is a resend that does not verify.
    assert_eq!(status(send("msg_1", now, &("whsec_".to_string() + &"D".repeat(32)), body, url.clone()).await.unwrap()), 401);
    assert_eq!(recorder.0.lock().unwrap().len(), 1, "a resend is handled once");
    let stale = send("msg_2", now - 6 * 60, &secret, body, url.clone()).await.unwrap();
    assert_eq!(stale.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(stale.json::<Value>().await.unwrap()["details"], json!(["the webhook does not verify: webhook-timestamp is more than 5 minutes old"]));
    let forged = "whsec_".to_string() + &"B".repeat(32);
    let bad = send("msg_3", now, &forged, body, url.clone()).await.unwrap();
    assert_eq!(bad.status(), StatusCode::UNAUTHORIZED);
    let no_match = json!(["the webhook does not verify: webhook-signature does not match"]);
    assert_eq!(bad.json::<Value>().await.unwrap()["details"], no_match);
    // Another tenant, with no secret for the sender: the same answer.
    let b_url = format!("/api/webhooks/inbound/probe/acme?tenant_id={}", t.b["tenant_id"].as_str().unwrap());
    let res = send("msg_4", now, &secret, body, b_url).await.unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(res.json::<Value>().await.unwrap()["details"], no_match);
    assert_eq!(status(send("msg_5", now, &secret, body, format!("/api/webhooks/inbound/nokind/acme?tenant_id={tenant}")).await.unwrap()), 404);
    assert_eq!(status(send("msg_6", now, &secret, body, "/api/webhooks/inbound/probe/acme".into()).await.unwrap()), 400);
    assert_eq!(status(send("msg_7", now, &secret, "not json", url.clone()).await.unwrap()), 400);
    assert_eq!(recorder.0.lock().unwrap().len(), 1, "only the verified message was handed on");

    // A secret the tenant brings replaces the generated one.
    let own = format!("whsec_{}", "C".repeat(32));
    let (s, set) = app.post("/api/webhooks/inbound-secrets", Some(a), json!({ "kind": "probe", "provider": "acme", "secret": own })).await;
    assert_eq!((s, set["data"].get("secret")), (StatusCode::OK, None));
    assert_eq!(status(send("msg_8", now, &own, body, url.clone()).await.unwrap()), 200);
    assert_eq!(status(send("msg_9", now, &secret, body, url).await.unwrap()), 401, "the old secret is gone");
    let b = assert_error(app.post("/api/webhooks/inbound-secrets", Some(a), json!({ "kind": "Probe!", "secret": "abc" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["provider is required"]));
    let b = assert_error(
        app.post("/api/webhooks/inbound-secrets", Some(a), json!({ "kind": "Probe!", "provider": "acme", "secret": "abc" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["kind must be 1 to 64 of a-z, 0-9, '_' or '-'", "secret must be whsec_ followed by the base64 of 16 to 64 bytes"]));

    // Deleting the secret stops accepting the provider: its webhooks are
    // refused as unsigned ones are; another tenant reaches nothing of it.
    let secret_path = "/api/webhooks/inbound-secrets/probe/acme";
    assert_error(app.call(Method::DELETE, secret_path, Some(&t.b_token), None).await, 404, "NotFound");
    let (s, gone) = app.call(Method::DELETE, secret_path, Some(a), None).await;
    assert_eq!((s, gone["data"].clone()), (StatusCode::OK, json!({ "kind": "probe", "provider": "acme", "deleted": true })));
    let res = send("msg_10", now, &own, body, format!("/api/webhooks/inbound/probe/acme?tenant_id={tenant}")).await.unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(res.json::<Value>().await.unwrap()["details"], no_match);
    assert_error(app.call(Method::DELETE, secret_path, Some(a), None).await, 404, "NotFound");
    assert_error(app.call(Method::DELETE, "/api/webhooks/inbound-secrets/Probe!/acme", Some(a), None).await, 404, "NotFound");
    let (_, list) = app.get("/api/webhooks/inbound-secrets", Some(a)).await;
    assert_eq!(list["total"], 0);
    assert_eq!(recorder.0.lock().unwrap().len(), 2, "nothing was handed on after the delete");
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "webhook.inbound.received.v1").count(), 2, "one for msg_1 however often it came, one for msg_8");
    assert_eq!(events.iter().filter(|e| *e == "webhook.inbound_secret.set.v1").count(), 2);
    assert_eq!(events.iter().filter(|e| *e == "webhook.inbound_secret.deleted.v1").count(), 1);
}
db_test!(inbound_webhooks_are_verified_then_handed_to_their_kind);

/// A `hub serve` process on a data dir of its own (SQLite).
fn hub_process(dir: &std::path::Path, port: u16) -> std::process::Child {
    let log = std::fs::File::options().append(true).create(true).open(dir.join("hub.log")).unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_hub"))
        .arg("serve")
        .env("HUB_LISTEN", format!("127.0.0.1:{port}"))
        .env("HUB_DATA_DIR", dir)
        .env("HUB_DEV", "1")
        .env("HUB_QUIC_LISTEN", "off")
        .env("HUB_WEBHOOK_TIMEOUT_SECONDS", "2")
        .env_remove("DATABASE_URL")
        .env_remove("HUB_MASTER_KEY")
        .env_remove("AUTH_GATE_MODE")
        .stdout(std::process::Stdio::from(log.try_clone().unwrap()))
        .stderr(std::process::Stdio::from(log))
        .spawn()
        .unwrap()
}

async fn wait_healthy(client: &reqwest::Client, base: &str) {
    for _ in 0..600 {
        if client.get(format!("{base}/ready")).send().await.is_ok_and(|r| r.status() == 200) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the hub did not start");
}

/// `kill -9` with deliveries leased mid-attempt and others still queued:
/// after a restart every one arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_in_flight_when_the_hub_is_killed_all_arrive_after_a_restart() {
    // The receiver holds every request (the hub is mid-attempt when it
    // dies) until it is told to answer.
    let answering = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let answered: Arc<Mutex<Vec<String>>> = Arc::default();
    let held = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (a2, d2, h2) = (answering.clone(), answered.clone(), held.clone());
    let app = axum::Router::new().route(
        "/hook",
        post(move |headers: HeaderMap| {
            let (answering, answered, held) = (a2.clone(), d2.clone(), h2.clone());
            async move {
                let id = headers.get("webhook-id").unwrap().to_str().unwrap().to_string();
                if answering.load(std::sync::atomic::Ordering::SeqCst) {
                    answered.lock().unwrap().push(id);
                    return axum::http::StatusCode::NO_CONTENT;
                }
                held.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(3600)).await;
                axum::http::StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let mut hub = hub_process(dir.path(), port);
    wait_healthy(&client, &base).await;
    let signup: Value = client
        .post(format!("{base}/api/auth/signup-tenant"))
        .json(&json!({ "email": "k@example.com", "password": "correct horse battery", "org_name": "K", "app_id": "kill", "display_name": "K", "region": "r" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = signup["data"]["token"].as_str().unwrap().to_string();
    let ep = client
        .post(format!("{base}/api/webhooks/endpoints"))
        .bearer_auth(&token)
        .json(&json!({ "url": hook, "event_types": ["workflow.*"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(ep.status(), StatusCode::CREATED);
    const EVENTS: usize = 20;
    for i in 0..EVENTS {
        let r = client
            .post(format!("{base}/api/workflows/definitions"))
            .bearer_auth(&token)
            .json(&json!({ "name": format!("k{i}"), "step_specs": [{ "name": "one" }] }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED);
    }
    for _ in 0..200 {
        if held.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(held.load(std::sync::atomic::Ordering::SeqCst) > 0, "the hub was attempting deliveries when it died");
    hub.kill().unwrap();
    hub.wait().unwrap();

    answering.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut hub = hub_process(dir.path(), port);
    wait_healthy(&client, &base).await;
    let mut distinct = std::collections::BTreeSet::new();
    for _ in 0..600 {
        distinct = answered.lock().unwrap().iter().cloned().collect();
        if distinct.len() == EVENTS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    hub.kill().unwrap();
    hub.wait().unwrap();
    assert_eq!(distinct.len(), EVENTS, "every delivery arrived after the restart, none lost");
}

/// Several hubs on one PostgreSQL database (the deployment that has
/// several): each attempt is made by one of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_hubs_make_each_attempt_once() {
    let Some(app) = TestApp::spawn_postgres().await else { return };
    let rx = Receiver::start(vec![]).await;
    let other = app.replica().await;
    let t = app.signup("replicas@hooks.example.com", "hooks-replicas").await;
    let token = t["token"].as_str().unwrap();
    let (s, _) = app.post("/api/webhooks/endpoints", Some(token), json!({ "url": rx.url, "event_types": ["workflow.*"] })).await;
    assert_eq!(s, StatusCode::CREATED);
    const EVENTS: usize = 40;
    for i in 0..EVENTS {
        let hub = if i % 2 == 0 { &app } else { &other };
        register(hub, token, &format!("r{i}")).await;
    }
    let got = rx.wait_for(EVENTS).await;
    // Time for a second hub to repeat an attempt, were it going to.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let ids: std::collections::BTreeSet<String> = rx.got().into_iter().map(|r| r.id).collect();
    assert_eq!((ids.len(), rx.got().len()), (EVENTS, EVENTS), "one attempt per delivery across both hubs ({} at first)", got.len());
}

/// A kind's handler for the test: refuses its first delivery (400) after
/// a pause, then stores the others.
#[derive(Default)]
struct FailsFirst(Mutex<Vec<Value>>, std::sync::atomic::AtomicBool);

impl hub_kernel::inbound::InboundHandler for FailsFirst {
    fn handle<'a>(
        &'a self,
        _tx: &'a mut hub_kernel::db::Tx,
        _tenant_id: &'a str,
        _provider: &'a str,
        payload: &'a Value,
    ) -> futures_util::future::BoxFuture<'a, hub_kernel::error::ApiResult<Value>> {
        Box::pin(async move {
            if !self.1.swap(true, std::sync::atomic::Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(600)).await;
                return Err(hub_kernel::error::ApiError::invalid("the first delivery is refused"));
            }
            self.0.lock().unwrap().push(payload.clone());
            Ok(json!({ "handled": self.0.lock().unwrap().len() }))
        })
    }
}

async fn inbound_ids_expire_after_three_days_and_a_refused_delivery_is_not_remembered(app: TestApp) {
    let handler = Arc::new(FailsFirst::default());
    app.state().inbound.register("flaky", handler.clone());
    let t = app.two_tenants("inexp").await;
    let tenant = t.a["tenant_id"].as_str().unwrap().to_string();
    let (s, set) = app.post("/api/webhooks/inbound-secrets", Some(&t.a_token), json!({ "kind": "flaky", "provider": "acme" })).await;
    assert_eq!(s, StatusCode::CREATED, "{set}");
    let secret = set["data"]["secret"].as_str().unwrap().to_string();
    let url = format!("{}/api/webhooks/inbound/flaky/acme?tenant_id={tenant}", app.base);
    let send = |id: &'static str, body: &'static str| {
        let at = chrono::Utc::now().timestamp();
        let signature = standardwebhooks::Webhook::new(&secret).unwrap().sign(id, at, body.as_bytes()).unwrap();
        app.client
            .post(url.clone())
            .header("webhook-id", id)
            .header("webhook-timestamp", at.to_string())
            .header("webhook-signature", signature)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let answer = |r: reqwest::Response| async move { (r.status().as_u16(), r.json::<Value>().await.unwrap()["data"].clone()) };

    // The first delivery is refused while a resend waits for its id: the
    // resend is then handled as a delivery of its own.
    let first = send("msg_1", r#"{"n":1}"#);
    let resend = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        send("msg_1", r#"{"n":1}"#).await
    };
    let (first, resend) = tokio::join!(first, resend);
    let (first, resend) = (answer(first.unwrap()).await, answer(resend.unwrap()).await);
    assert_eq!(first.0, 400, "{first:?}");
    assert_eq!(resend, (200, json!({ "received": true, "webhook_id": "msg_1", "result": { "handled": 1 } })));
    assert_eq!(answer(send("msg_1", r#"{"n":1}"#).await.unwrap()).await, resend, "then remembered");
    let other = answer(send("msg_1", r#"{"n":2}"#).await.unwrap()).await;
    assert_eq!(other.0, 409, "{other:?}");

    // Three days on, the id is forgotten: another body under it is a new
    // delivery (the row is taken over, not left to the sweep).
    let db = app.state().db.writer();
    let backdate = |hours: i64| {
        sqlx::query("UPDATE webhook_inbound_seen SET received_at = $1 WHERE webhook_id = 'msg_1'")
            .bind(hub_kernel::db::format_time(chrono::Utc::now() - chrono::TimeDelta::hours(hours) - chrono::TimeDelta::minutes(1)))
            .execute(db)
    };
    backdate(71).await.unwrap();
    assert_eq!(answer(send("msg_1", r#"{"n":2}"#).await.unwrap()).await.0, 409, "still remembered before 72 hours");
    backdate(72).await.unwrap();
    let again = answer(send("msg_1", r#"{"n":2}"#).await.unwrap()).await;
    assert_eq!(again, (200, json!({ "received": true, "webhook_id": "msg_1", "result": { "handled": 2 } })));
    assert_eq!(answer(send("msg_1", r#"{"n":2}"#).await.unwrap()).await, again);
    assert_eq!(handler.0.lock().unwrap().clone(), [json!({ "n": 1 }), json!({ "n": 2 })]);

    // The hourly sweep deletes the ids more than 73 hours old only.
    let seen = || sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM webhook_inbound_seen WHERE webhook_id = 'msg_1'").fetch_one(db);
    backdate(72).await.unwrap();
    assert_eq!(hub_platform::webhook::inbound::forget_expired(&app.state().db, chrono::Utc::now()).await.unwrap(), 0);
    assert_eq!(seen().await.unwrap(), 1);
    backdate(73).await.unwrap();
    assert!(hub_platform::webhook::inbound::forget_expired(&app.state().db, chrono::Utc::now()).await.unwrap() >= 1);
    assert_eq!(seen().await.unwrap(), 0);
}
db_test!(inbound_ids_expire_after_three_days_and_a_refused_delivery_is_not_remembered);
