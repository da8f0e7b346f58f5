//! Several hub processes on one PostgreSQL database behave as one hub.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

/// Polls until `check` holds, for up to two seconds (notifications between
/// replicas are asynchronous).
async fn eventually<F, Fut>(mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_on_one_replica_reaches_the_others() {
    let Some(a) = TestApp::spawn_postgres().await else { return };
    let b = a.replica().await;
    let t = a.signup("rep@example.com", "rep").await;
    let owner = t["token"].as_str().unwrap();
    let (_, key) = a.key(owner, "rep", json!(["*"])).await;
    let secret = key["api_key"].as_str().unwrap();
    // Replica B verifies (and caches) the key and the owner's token.
    assert_eq!(b.get("/api/me", Some(secret)).await.0, StatusCode::OK);
    assert_eq!(b.get("/api/applications", Some(owner)).await.0, StatusCode::OK);
    // Revoked through A: B refuses it.
    a.post(&format!("/api/api-keys/{}/revoke", key["key_id"].as_str().unwrap()), Some(owner), json!({})).await;
    assert!(eventually(|| async { b.get("/api/me", Some(secret)).await.0 == StatusCode::UNAUTHORIZED }).await);

    // Role grants: a member granted through A, revoked through A, refused by B.
    let (_, reg) = a.post("/api/auth/register", None, json!({ "email": "m@example.com", "password": "m password", "display_name": "M" })).await;
    let (_, m) = a.post("/api/memberships", Some(owner), json!({ "person_id": reg["data"]["person_id"] })).await;
    let (_, login) = a.post("/api/auth/login", None, json!({ "email": "m@example.com", "password": "m password", "tenant_id": t["tenant_id"] })).await;
    let member = login["data"]["token"].as_str().unwrap();
    let (_, tpl) = a.post("/api/role-templates", Some(owner), json!({ "name": "reader", "permissions": { "application.*": true } })).await;
    let (_, grant) = a
        .post("/api/role-assignments", Some(owner), json!({ "persona_id": m["data"]["persona_id"], "role_template_id": tpl["data"]["role_template_id"] }))
        .await;
    assert!(eventually(|| async { b.get("/api/applications", Some(member)).await.0 == StatusCode::OK }).await);
    a.post(&format!("/api/role-assignments/{}/revoke", grant["data"]["assignment_id"].as_str().unwrap()), Some(owner), json!({})).await;
    assert!(eventually(|| async { b.get("/api/applications", Some(member)).await.0 == StatusCode::FORBIDDEN }).await);

    // A signing-key rotation on A: B verifies A's new tokens.
    let state = a.state();
    let (_, keys) = hub_kernel::crypto::signing::rotate(&state.db, &state.master, chrono::Duration::hours(1), false).await.unwrap();
    state.set_keys(keys);
    let (_, fresh) = a.post("/api/auth/login", None, json!({ "email": "rep@example.com", "password": "correct horse battery" })).await;
    assert_eq!(b.get("/api/me", fresh["data"]["token"].as_str()).await.0, StatusCode::OK);
    // Rate limits are counted in the database, across replicas.
    let (id, _) = a.key(owner, "rl", json!(["*"])).await;
    let (_, slow) = a.post(&format!("/api/applications/{id}/keys"), Some(owner), json!({ "name": "s", "scopes": ["*"], "rate_limit_rpm": 2 })).await;
    let s = slow["data"]["api_key"].as_str().unwrap();
    within_one_minute(3).await;
    assert_eq!(a.get("/api/me", Some(s)).await.0, StatusCode::OK);
    assert_eq!(b.get("/api/me", Some(s)).await.0, StatusCode::OK);
    assert_eq!(a.get("/api/me", Some(s)).await.0, StatusCode::TOO_MANY_REQUESTS);
    // A larger limit is leased to replicas in blocks: never more than the
    // limit in all, and a lease one replica stops drawing on goes back.
    let (_, wide) = a.post(&format!("/api/applications/{id}/keys"), Some(owner), json!({ "name": "w", "scopes": ["*"], "rate_limit_rpm": 100 })).await;
    let w = wide["data"]["api_key"].as_str().unwrap();
    within_one_minute(10).await;
    for _ in 0..60 {
        assert_eq!(a.get("/api/me", Some(w)).await.0, StatusCode::OK);
    }
    tokio::time::sleep(Duration::from_millis(2000)).await;
    for i in 0..40 {
        assert_eq!(b.get("/api/me", Some(w)).await.0, StatusCode::OK, "request {i} on B");
    }
    assert_eq!(b.get("/api/me", Some(w)).await.0, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(a.get("/api/me", Some(w)).await.0, StatusCode::TOO_MANY_REQUESTS);
}

/// Two replicas under concurrent load on one limited key: requests that
/// find a lease empty wait for one claim instead of each sending their
/// own, and the key is never admitted past its limit in all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_on_two_replicas_stay_within_the_limit() {
    let Some(a) = TestApp::spawn_postgres().await else { return };
    let b = a.replica().await;
    let t = a.signup("rlc@example.com", "rlc").await;
    let owner = t["token"].as_str().unwrap();
    let (id, _) = a.key(owner, "rl", json!(["*"])).await;
    let (_, k) = a.post(&format!("/api/applications/{id}/keys"), Some(owner), json!({ "name": "c", "scopes": ["*"], "rate_limit_rpm": 300 })).await;
    let key = k["data"]["api_key"].as_str().unwrap().to_string();
    within_one_minute(15).await;
    // 16 callers on each replica, 25 requests each: 800 requests for 300 hits.
    let callers = [&a, &b].into_iter().flat_map(|app| (0..16).map(move |_| app)).map(|app| {
        let key = key.clone();
        async move {
            let mut statuses = Vec::new();
            for _ in 0..25 {
                statuses.push(app.get("/api/me", Some(&key)).await.0);
            }
            statuses
        }
    });
    let statuses: Vec<StatusCode> = futures_util::future::join_all(callers).await.into_iter().flatten().collect();
    let admitted = statuses.iter().filter(|s| **s == StatusCode::OK).count();
    let refused = statuses.iter().filter(|s| **s == StatusCode::TOO_MANY_REQUESTS).count();
    assert_eq!(admitted + refused, statuses.len(), "only 200 and 429: {statuses:?}");
    assert!(admitted <= 300, "{admitted} admitted past a limit of 300");
    // Hits one replica leased and did not use are unavailable to the other
    // for a while; the shrinking blocks keep that small.
    assert!(admitted >= 240, "only {admitted} of 300 admitted");
}
