//! sdk-data-rights: a subject request carried out by executions, each with
//! one terminal outcome (status required and checked), the request
//! following it.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn start(app: &TestApp, token: &str, request: &str) -> (StatusCode, Value) {
    app.post(&format!("/api/data-rights/requests/{request}/executions"), Some(token), json!({ "executor": "erasure-job" })).await
}

async fn outcome(app: &TestApp, token: &str, execution: &str, body: Value) -> (StatusCode, Value) {
    app.post(&format!("/api/data-rights/executions/{execution}/outcome"), Some(token), body).await
}

async fn requests_are_executed_to_one_terminal_outcome(app: TestApp) {
    let t = app.two_tenants("dsar").await;
    let a = t.a_token.as_str();
    let (s, r) = app.post("/api/data-rights/requests", Some(a), json!({ "subject": "user-9", "kind": "erasure", "details": { "channel": "email" } })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    assert_eq!((r["data"]["status"].as_str(), r["data"]["kind"].as_str()), (Some("received"), Some("erasure")));
    assert!(r["data"]["due_at"].as_str().unwrap() > r["data"]["created_at"].as_str().unwrap());
    let request = r["data"]["request_id"].as_str().unwrap().to_string();

    let (s, e) = start(&app, a, &request).await;
    assert_eq!((s, e["data"]["status"].as_str()), (StatusCode::CREATED, Some("running")), "{e}");
    let first = e["data"]["execution_id"].as_str().unwrap().to_string();
    assert_error(start(&app, a, &request).await, 409, "Conflict");
    assert_error(outcome(&app, a, &first, json!({})).await, 400, "ValidationError");
    let b = assert_error(outcome(&app, a, &first, json!({ "status": "done", "audit_entry_id": "x" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["status must be one of: succeeded, failed", "audit_entry_id must be a UUID"]));
    let (s, f) = outcome(&app, a, &first, json!({ "status": "failed", "error_detail": "the store timed out" })).await;
    assert_eq!((s, f["data"]["status"].as_str(), f["data"]["error_detail"].as_str()), (StatusCode::OK, Some("failed"), Some("the store timed out")));
    assert_error(outcome(&app, a, &first, json!({ "status": "succeeded" })).await, 409, "Conflict");
    let (_, read) = app.get(&format!("/api/data-rights/requests/{request}"), Some(a)).await;
    assert_eq!(read["data"]["status"], "failed");

    // A failed request is tried again; this time it succeeds, with evidence.
    let (_, e) = start(&app, a, &request).await;
    let second = e["data"]["execution_id"].as_str().unwrap().to_string();
    let entry: String = sqlx::query_scalar("SELECT entry_id FROM audit_entry WHERE tenant_id = $1 LIMIT 1")
        .bind(t.a["tenant_id"].as_str().unwrap())
        .fetch_one(&app.state().db.read)
        .await
        .unwrap();
    let foreign: String = sqlx::query_scalar("SELECT entry_id FROM audit_entry WHERE tenant_id = $1 LIMIT 1")
        .bind(t.b["tenant_id"].as_str().unwrap())
        .fetch_one(&app.state().db.read)
        .await
        .unwrap();
    let b = assert_error(outcome(&app, a, &second, json!({ "status": "succeeded", "audit_entry_id": foreign })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["audit_entry_id is not an audit entry of this tenant"]));
    let (s, ok) = outcome(&app, a, &second, json!({ "status": "succeeded", "audit_entry_id": entry })).await;
    assert_eq!((s, ok["data"]["audit_entry_id"].as_str()), (StatusCode::OK, Some(entry.as_str())));
    let (_, read) = app.get(&format!("/api/data-rights/requests/{request}"), Some(a)).await;
    assert_eq!(read["data"]["status"], "completed");
    let statuses: Vec<&str> = read["data"]["executions"].as_array().unwrap().iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["failed", "succeeded"]);
    assert_error(start(&app, a, &request).await, 409, "Conflict");

    assert_error(app.get(&format!("/api/data-rights/requests/{request}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(start(&app, &t.b_token, &request).await, 404, "NotFound");
    assert_error(app.post(&format!("/api/data-rights/executions/{second}/outcome"), Some(&t.b_token), json!({ "status": "failed" })).await, 404, "NotFound");
    let b =
        assert_error(app.post("/api/data-rights/requests", Some(a), json!({ "kind": "delete-everything", "due_at": "soon" })).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!([
            "subject is required",
            "kind must be one of: access, erasure, rectification, portability, restriction, objection",
            "due_at must be an RFC 3339 timestamp"
        ])
    );
    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |n: &str| events.iter().filter(|e| *e == n).count();
    assert_eq!((count("data-rights.request.received.v1"), count("data-rights.execution.failed.v1"), count("data-rights.execution.succeeded.v1")), (1, 1, 1));
}
db_test!(requests_are_executed_to_one_terminal_outcome);

async fn the_legal_queue_is_listed_and_a_withdrawn_request_cancelled(app: TestApp) {
    let t = app.two_tenants("dsar-queue").await;
    let a = t.a_token.as_str();
    let new = |subject: &str, kind: &str, due: &str| json!({ "subject": subject, "kind": kind, "due_at": due });
    let (_, r1) = app.post("/api/data-rights/requests", Some(a), new("user-1", "access", "2027-01-10T00:00:00Z")).await;
    let (_, r2) = app.post("/api/data-rights/requests", Some(a), new("user-2", "erasure", "2027-01-20T00:00:00Z")).await;
    let (_, r3) = app.post("/api/data-rights/requests", Some(a), new("user-1", "erasure", "2027-01-30T00:00:00Z")).await;
    let (_, _) = app.post("/api/data-rights/requests", Some(&t.b_token), new("user-1", "access", "2027-01-01T00:00:00Z")).await;
    let id = |r: &Value| r["data"]["request_id"].as_str().unwrap().to_string();
    let (id1, id2, id3) = (id(&r1), id(&r2), id(&r3));
    let (s, e) = start(&app, a, &id2).await;
    assert_eq!(s, StatusCode::CREATED, "{e}");

    let ids = |v: &Value| v["data"].as_array().unwrap().iter().map(|r| r["request_id"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let (s, all) = app.get("/api/data-rights/requests", Some(a)).await;
    assert_eq!((s, all["total"].as_i64(), ids(&all)), (StatusCode::OK, Some(3), vec![id3.clone(), id2.clone(), id1.clone()]), "{all}");
    assert!(all["data"][0].get("executions").is_none());
    let (_, running) = app.get("/api/data-rights/requests?status=in_progress", Some(a)).await;
    assert_eq!(ids(&running), [id2.as_str()]);
    let (_, erasures) = app.get("/api/data-rights/requests?kind=erasure", Some(a)).await;
    assert_eq!(ids(&erasures), [id3.clone(), id2.clone()]);
    let (_, user) = app.get("/api/data-rights/requests?subject=user-1", Some(a)).await;
    assert_eq!(ids(&user), [id3.clone(), id1.clone()]);
    let (_, due) = app.get("/api/data-rights/requests?due_before=2027-01-20T00:00:00Z", Some(a)).await;
    assert_eq!(ids(&due), [id2.clone(), id1.clone()]);
    let (_, page) = app.get("/api/data-rights/requests?limit=2&offset=1", Some(a)).await;
    assert_eq!((page["total"].as_i64(), ids(&page)), (Some(3), vec![id2.clone(), id1.clone()]));
    for bad in ["status=open", "kind=everything", "due_before=soon", "limit=1000"] {
        let body = assert_error(app.get(&format!("/api/data-rights/requests?{bad}"), Some(a)).await, 400, "ValidationError");
        assert!(body["details"][0].as_str().unwrap().starts_with(bad.split('=').next().unwrap()), "{bad}: {body}");
    }

    // The subject withdraws: a received request is cancelled, once; one
    // whose execution runs is not.
    let (s, c) = app.post(&format!("/api/data-rights/requests/{id1}/cancel"), Some(a), json!({})).await;
    assert_eq!((s, c["data"]["status"].as_str()), (StatusCode::OK, Some("cancelled")), "{c}");
    let body = assert_error(app.post(&format!("/api/data-rights/requests/{id1}/cancel"), Some(a), json!({})).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the request is cancelled: only a received or failed request can be cancelled"]));
    let body = assert_error(app.post(&format!("/api/data-rights/requests/{id2}/cancel"), Some(a), json!({})).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the request is in_progress: only a received or failed request can be cancelled"]));
    let body = assert_error(start(&app, a, &id1).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the request is cancelled: it takes no new execution"]));
    // A failed request may be withdrawn too.
    let execution = e["data"]["execution_id"].as_str().unwrap();
    let (s, _) = outcome(&app, a, execution, json!({ "status": "failed" })).await;
    assert_eq!(s, StatusCode::OK);
    let (s, c) = app.post(&format!("/api/data-rights/requests/{id2}/cancel"), Some(a), json!({})).await;
    assert_eq!((s, c["data"]["status"].as_str()), (StatusCode::OK, Some("cancelled")));
    let (_, cancelled) = app.get("/api/data-rights/requests?status=cancelled", Some(a)).await;
    assert_eq!(ids(&cancelled), [id2.clone(), id1.clone()]);

    assert_error(app.post(&format!("/api/data-rights/requests/{id3}/cancel"), Some(&t.b_token), json!({})).await, 404, "NotFound");
    assert_error(app.post("/api/data-rights/requests/nope/cancel", Some(a), json!({})).await, 404, "NotFound");
    let (_, theirs) = app.get("/api/data-rights/requests", Some(&t.b_token)).await;
    assert_eq!(theirs["total"], 1);
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "data-rights.request.cancelled.v1").count(), 2);
}
db_test!(the_legal_queue_is_listed_and_a_withdrawn_request_cancelled);
