//! Operations: request ids, readiness (`/metrics` is in `metrics`).

use reqwest::StatusCode;
use serde_json::json;

use crate::{db_test, helpers::*};

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

async fn readiness_fails_when_the_database_is_unreachable(app: TestApp) {
    let lost = app.variant(|_| {}).await;
    assert_eq!(lost.get("/ready", None).await.0, StatusCode::OK);
    lost.state().db.read.close().await;
    let body = assert_error(lost.get("/ready", None).await, 503, "ServiceUnavailable");
    assert_eq!(body["details"], json!(["the database is unreachable"]));
    // Liveness is not readiness: the process still answers.
    assert_eq!(lost.get("/health", None).await, (StatusCode::OK, json!({ "success": true, "data": { "status": "ok" } })));
    // Another hub is unaffected.
    assert_eq!(app.get("/ready", None).await.0, StatusCode::OK);
}
db_test!(readiness_fails_when_the_database_is_unreachable);

/// `hub serve` listens before its migrations: alive, not ready, and every
/// connection (an open keep-alive one included) switches to the whole
/// router once the hub is prepared.
async fn a_starting_hub_is_alive_but_not_ready_until_its_migrations_are_applied(app: TestApp) {
    let dir = tempfile::tempdir().unwrap();
    let url = match app.backend {
        Backend::Postgres => fresh_postgres_url().await.expect("postgres"),
        Backend::Sqlite => format!("sqlite://{}?mode=rwc", dir.path().join("hub.db").display()),
    };
    let config = hub_kernel::config::Config::for_tests(dir.path().to_path_buf(), Some(url));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let booting = hub::Booting::start(listener, hub::server::Limits::from_config(&config)).unwrap();
    let base = format!("http://{}", booting.addr);
    // One connection throughout.
    let client = reqwest::Client::builder().pool_max_idle_per_host(1).build().unwrap();
    let get = |path: &str| {
        let req = client.get(format!("{base}{path}"));
        async move {
            let res = req.send().await.unwrap();
            (res.status(), res.json::<serde_json::Value>().await.unwrap())
        }
    };
    assert_eq!(get("/health").await, (StatusCode::OK, json!({ "success": true, "data": { "status": "ok" } })));
    let body = assert_error(get("/ready").await, 503, "ServiceUnavailable");
    assert_eq!(body["details"], json!(["migrations are running"]));
    assert_error(get("/api/me").await, 503, "ServiceUnavailable");

    let state = hub::prepare(config).await.expect("prepare hub");
    let server = booting.serve(state).await.unwrap();
    assert_eq!(get("/ready").await, (StatusCode::OK, json!({ "success": true, "data": { "status": "ready" } })));
    assert_error(get("/api/me").await, 401, "Unauthorized");
    server.stop().await.unwrap();
}
db_test!(a_starting_hub_is_alive_but_not_ready_until_its_migrations_are_applied);
