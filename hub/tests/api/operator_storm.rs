//! Operator storm ingest: the provider chain (configured feeds, then the
//! synthetic provider) and the idempotent upsert.

use std::sync::{Arc, Mutex};

use axum::{extract::State, http::StatusCode as Code, routing::get};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

const OPS: &str = "test-ops-token";

async fn counts(app: &TestApp) -> (i64, Vec<(String, String, i64)>) {
    let events: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM storm_event").fetch_one(&app.state().db.read).await.unwrap();
    let cells = sqlx::query_as("SELECT cell_id, kind, event_count FROM storm_cell ORDER BY cell_id, kind").fetch_all(&app.state().db.read).await.unwrap();
    (events, cells)
}

async fn without_feeds_the_synthetic_provider_answers_and_a_repeat_changes_nothing(app: TestApp) {
    let ingest = |body: Option<Value>| app.operator(OPS, Method::POST, "/admin/storm/ingest-now", body);
    let b = assert_error(ingest(Some(json!({ "lookback_hours": 0 }))).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["lookback_hours must be an integer from 1 to 720"]));
    assert_error(ingest(Some(json!({ "lookback_hours": "24" }))).await, 400, "ValidationError");
    assert_error(ingest(Some(json!([1]))).await, 400, "ValidationError");

    let (s, first) = ingest(None).await;
    assert_eq!(s, StatusCode::OK, "{first}");
    let first = first["data"].clone();
    assert_eq!((first["events_from"].as_str(), first["providers_tried"].clone()), (Some("synthetic"), json!(["synthetic"])));
    let (events, cells) = counts(&app).await;
    assert_eq!(events, first["events_ingested"].as_i64().unwrap());
    assert_eq!(cells.iter().map(|(c, _, _)| c).collect::<std::collections::BTreeSet<_>>().len() as i64, first["cells_ingested"].as_i64().unwrap());
    // A week back: more hours, more reports; the day already ingested is rewritten, not doubled.
    let (s, week) = ingest(Some(json!({ "lookback_hours": 168 }))).await;
    assert_eq!(s, StatusCode::OK);
    assert!(week["data"]["events_ingested"].as_i64() >= first["events_ingested"].as_i64());
    let (events, _) = counts(&app).await;
    assert_eq!(events, week["data"]["events_ingested"].as_i64().unwrap());
    let before = counts(&app).await;
    let (_, again) = ingest(Some(json!({ "lookback_hours": 168 }))).await;
    assert_eq!(again["data"]["events_ingested"], week["data"]["events_ingested"]);
    assert_eq!(counts(&app).await, before, "idempotent");
    let events: Vec<(String, String)> = app.platform_events().await;
    assert_eq!(events.iter().filter(|(e, a)| e == "ingest.storm.ingested.v1" && a == "break-glass").count(), 3);
}
db_test!(without_feeds_the_synthetic_provider_answers_and_a_repeat_changes_nothing);

#[derive(Clone)]
struct Feed {
    answer: Arc<Mutex<(u16, Value)>>,
    asked: Arc<Mutex<Vec<String>>>,
}

async fn feed(State(f): State<Feed>, axum::extract::RawQuery(q): axum::extract::RawQuery) -> (Code, axum::Json<Value>) {
    f.asked.lock().unwrap().push(q.unwrap_or_default());
    let (status, body) = f.answer.lock().unwrap().clone();
    (Code::from_u16(status).unwrap(), axum::Json(body))
}

fn report(id: &str, kind: &str, hours_ago: i64, lat: f64, lon: f64) -> Value {
    let at = hub_kernel::db::format_time(chrono::Utc::now() - chrono::TimeDelta::hours(hours_ago));
    json!({ "id": id, "kind": kind, "occurred_at": at, "lat": lat, "lon": lon, "magnitude": 1.75 })
}

async fn the_first_feed_that_answers_is_ingested_and_an_outage_falls_through_to_the_synthetic_provider(app: TestApp) {
    let f = Feed { answer: Arc::new(Mutex::new((200, json!({})))), asked: Arc::default() };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/reports", listener.local_addr().unwrap());
    let router = axum::Router::new().route("/reports", get(feed)).with_state(f.clone());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    // The first feed is down (nothing listens on the discard port).
    let app = app.variant(|c| c.storm_feed_urls = vec!["http://127.0.0.1:9/down".into(), url]).await;
    let ingest = || app.operator(OPS, Method::POST, "/admin/storm/ingest-now", Some(json!({ "lookback_hours": 24 })));

    let reports = json!({ "events": [
        report("r1", "hail", 2, 35.47, -97.52),
        report("r2", "tornado", 3, 36.01, -95.99),
        report("snow", "snow", 2, 35.0, -97.0),
        report("old", "hail", 30, 35.0, -97.0),
        report("r3", "wind", 1, 95.0, -97.0),
    ] });
    *f.answer.lock().unwrap() = (200, reports);
    let (s, r) = ingest().await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(
        r["data"],
        json!({ "events_from": "feed-2", "events_ingested": 2, "cells_ingested": 2, "providers_tried": ["feed-1", "feed-2"] }),
        "reports of an unknown kind, outside the window or off the globe are skipped"
    );
    let asked = f.asked.lock().unwrap().last().cloned().unwrap();
    assert!(asked.starts_with("from=") && asked.contains("&to="), "{asked}");
    let ingested = counts(&app).await;
    assert_eq!(ingested, (2, vec![("354:-976".into(), "hail".into(), 1), ("360:-960".into(), "tornado".into(), 1)]));
    let (_, again) = ingest().await;
    assert_eq!(again["data"]["events_ingested"], 2);
    assert_eq!(counts(&app).await, ingested, "a repeat rewrites the same rows");

    // A report that moved leaves its old cell, which is recomputed.
    *f.answer.lock().unwrap() = (200, json!({ "events": [report("r1", "hail", 2, 36.05, -95.95), report("r4", "hail", 2, 36.02, -95.91)] }));
    let (_, moved) = ingest().await;
    assert_eq!((moved["data"]["events_ingested"].as_i64(), moved["data"]["cells_ingested"].as_i64()), (Some(2), Some(1)));
    assert_eq!(counts(&app).await, (3, vec![("360:-960".into(), "hail".into(), 2), ("360:-960".into(), "tornado".into(), 1)]));

    // Every feed failing (a 500, then an unreadable body): the synthetic provider answers, no 4xx.
    let mut last = Value::Null;
    for failure in [(500, json!({ "error": "down" })), (200, json!({ "reports": [] }))] {
        *f.answer.lock().unwrap() = failure;
        let (s, r) = ingest().await;
        last = r["data"].clone();
        assert_eq!(s, StatusCode::OK, "{r}");
        assert_eq!((r["data"]["events_from"].as_str(), r["data"]["providers_tried"].clone()), (Some("synthetic"), json!(["feed-1", "feed-2", "synthetic"])));
    }
    let synthetic: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM storm_event WHERE provider = 'synthetic'").fetch_one(&app.state().db.read).await.unwrap();
    let feed: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM storm_event WHERE provider = 'feed-2'").fetch_one(&app.state().db.read).await.unwrap();
    assert_eq!(feed, 3, "synthetic reports are kept apart from the feed's");
    assert_eq!(synthetic, last["events_ingested"].as_i64().unwrap());
}
db_test!(the_first_feed_that_answers_is_ingested_and_an_outage_falls_through_to_the_synthetic_provider);

/// A valid feed answer of about `bytes` bytes: one report and padding in a
/// field the feed format does not have (ignored when read).
fn padded(bytes: usize) -> String {
    let head = json!({ "events": [report("p1", "hail", 2, 35.47, -97.52)] }).to_string();
    format!("{},\"pad\":\"{}\"}}", &head[..head.len() - 1], "x".repeat(bytes.saturating_sub(head.len() + 9)))
}

async fn a_feed_is_called_through_the_guarded_client_without_redirects_and_with_a_bounded_answer(app: TestApp) {
    let limit = hub_operator::storm::MAX_FEED_BYTES;
    let asked = Arc::new(Mutex::new(0));
    let counted = asked.clone();
    let router = axum::Router::new()
        .route(
            "/reports",
            get(move || async move {
                *counted.lock().unwrap() += 1;
                padded(1000)
            }),
        )
        .route("/redirect", get(|| async { (Code::FOUND, [("location", "/reports")]) }))
        .route("/big", get(move || async move { padded(limit + 1) }))
        // Chunked, no Content-Length: the bound holds while streaming.
        .route(
            "/big-stream",
            get(move || async move {
                let body = padded(limit + 64 * 1024).into_bytes();
                let chunks: Vec<Result<Vec<u8>, std::io::Error>> = body.chunks(64 * 1024).map(|c| Ok(c.to_vec())).collect();
                axum::body::Body::from_stream(futures_util::stream::iter(chunks))
            }),
        )
        .route("/fits", get(move || async move { padded(limit) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    assert_eq!(padded(limit).len(), limit);

    let feeds = ["redirect", "big", "big-stream", "fits"].map(|p| format!("{base}/{p}"));
    let hub = app.variant(|c| c.storm_feed_urls = feeds.to_vec()).await;
    let (s, r) = hub.operator(OPS, Method::POST, "/admin/storm/ingest-now", None).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(
        r["data"],
        json!({ "events_from": "feed-4", "events_ingested": 1, "cells_ingested": 1, "providers_tried": ["feed-1", "feed-2", "feed-3", "feed-4"] }),
        "the redirect is not followed, the answers past the bound are refused, the one at the bound is read"
    );
    assert_eq!(*asked.lock().unwrap(), 0, "the redirect's target was never asked");

    // Outside development mode a loopback feed needs the allow-list: the
    // literal address is refused without a connection.
    let production = |allowed: Vec<String>| {
        let feeds = vec![format!("{base}/reports")];
        app.variant(move |c| {
            c.dev = false;
            // Outside development mode QUIC would need a certificate.
            c.quic_listen = "off".into();
            c.storm_feed_urls = feeds;
            c.webhook_allowed_hosts = allowed;
        })
    };
    let hub = production(vec![]).await;
    let (s, r) = hub.operator(OPS, Method::POST, "/admin/storm/ingest-now", None).await;
    assert_eq!(
        (s, r["data"]["events_from"].as_str(), r["data"]["providers_tried"].clone()),
        (StatusCode::OK, Some("synthetic"), json!(["feed-1", "synthetic"]))
    );
    assert_eq!(*asked.lock().unwrap(), 0, "a refused address is not called");
    let hub = production(vec!["127.0.0.1".into()]).await;
    let (s, r) = hub.operator(OPS, Method::POST, "/admin/storm/ingest-now", None).await;
    assert_eq!((s, r["data"]["events_from"].as_str(), r["data"]["providers_tried"].clone()), (StatusCode::OK, Some("feed-1"), json!(["feed-1"])));
    assert_eq!(*asked.lock().unwrap(), 1);
}
db_test!(a_feed_is_called_through_the_guarded_client_without_redirects_and_with_a_bounded_answer);
