//! sdk-incident: incidents opened with a severity and an optional owner,
//! moved open -> acknowledged | escalated | resolved (escalated and
//! acknowledged trading places until resolved), listed most recently
//! updated first with the tenant_id query required.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn status(app: &TestApp, token: &str, incident: &str, body: Value) -> (StatusCode, Value) {
    app.post(&format!("/api/incidents/{incident}/status"), Some(token), body).await
}

async fn incidents_are_worked_to_resolution_and_listed_by_last_update(app: TestApp) {
    let t = app.two_tenants("incidents").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].as_str().unwrap().to_string());
    let owner = t.a["persona_id"].as_str().unwrap().to_string();
    let (s, i) = app
        .post("/api/incidents", Some(a), json!({ "title": "Mail bounces", "severity": "high", "owner_persona_id": owner, "description": "all of them" }))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{i}");
    assert_eq!(
        (i["data"]["status"].as_str(), i["data"]["severity"].as_str(), i["data"]["owner_persona_id"].as_str(), i["data"]["resolved_at"].clone()),
        (Some("open"), Some("high"), Some(owner.as_str()), Value::Null)
    );
    let first = i["data"]["incident_id"].as_str().unwrap().to_string();
    let (s, i) = app.post("/api/incidents", Some(a), json!({ "title": "Slow pages", "severity": "low" })).await;
    assert_eq!((s, i["data"]["owner_persona_id"].clone()), (StatusCode::CREATED, Value::Null));
    let second = i["data"]["incident_id"].as_str().unwrap().to_string();

    let b = assert_error(app.post("/api/incidents", Some(a), json!({ "severity": "sev1", "owner_persona_id": "me" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["title is required", "severity must be one of: critical, high, medium, low", "owner_persona_id must be a UUID"]));
    let b = assert_error(
        app.post("/api/incidents", Some(a), json!({ "title": "x", "severity": "low", "owner_persona_id": t.b["persona_id"] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["owner_persona_id is not a persona of this tenant"]));

    // open -> escalated -> acknowledged -> resolved, then nothing.
    let (s, i) = status(&app, a, &first, json!({ "status": "escalated", "note": "paging the mail team" })).await;
    assert_eq!((s, i["data"]["status"].as_str(), i["data"]["status_note"].as_str()), (StatusCode::OK, Some("escalated"), Some("paging the mail team")));
    let (s, _) = status(&app, a, &first, json!({ "status": "acknowledged" })).await;
    assert_eq!(s, StatusCode::OK);
    let b = assert_error(status(&app, a, &first, json!({ "status": "open" })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["an incident acknowledged cannot become open"]));
    let b = assert_error(status(&app, a, &first, json!({ "status": "closed" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["status must be one of: open, acknowledged, escalated, resolved"]));
    assert_error(status(&app, a, &first, json!({})).await, 400, "ValidationError");
    let (s, i) = status(&app, a, &first, json!({ "status": "resolved", "note": "DNS fixed" })).await;
    assert_eq!((s, i["data"]["status"].as_str()), (StatusCode::OK, Some("resolved")));
    assert_eq!(i["data"]["resolved_at"], i["data"]["updated_at"]);
    assert_error(status(&app, a, &first, json!({ "status": "escalated" })).await, 409, "Conflict");
    assert_error(status(&app, a, &first, json!({ "status": "resolved" })).await, 409, "Conflict");
    assert_error(status(&app, &t.b_token, &second, json!({ "status": "resolved" })).await, 404, "NotFound");
    assert_error(status(&app, a, "42", json!({ "status": "resolved" })).await, 404, "NotFound");

    // The resolved one was updated last.
    let (s, l) = app.get(&format!("/api/incidents?tenant_id={tenant}"), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    let ids: Vec<&str> = l["data"].as_array().unwrap().iter().map(|i| i["incident_id"].as_str().unwrap()).collect();
    assert_eq!((ids, l["total"].as_i64()), (vec![first.as_str(), second.as_str()], Some(2)));
    let (_, l) = app.get(&format!("/api/incidents?tenant_id={tenant}&status=open&severity=low"), Some(a)).await;
    assert_eq!((l["data"][0]["incident_id"].as_str(), l["total"].as_i64()), (Some(second.as_str()), Some(1)));
    let (_, l) = app.get(&format!("/api/incidents?tenant_id={tenant}&owner_persona_id={owner}"), Some(a)).await;
    assert_eq!((l["data"][0]["incident_id"].as_str(), l["total"].as_i64()), (Some(first.as_str()), Some(1)));
    let (_, l) = app.get(&format!("/api/incidents?tenant_id={tenant}&severity=critical"), Some(a)).await;
    assert_eq!(l["total"], 0);
    let (_, l) = app.get(&format!("/api/incidents?tenant_id={tenant}&limit=1"), Some(a)).await;
    assert_eq!((l["data"].as_array().unwrap().len(), l["total"].as_i64()), (1, Some(2)));
    let b = assert_error(app.get("/api/incidents?status=open", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["tenant_id is required"]));
    assert_error(app.get(&format!("/api/incidents?tenant_id={}", t.b["tenant_id"].as_str().unwrap()), Some(a)).await, 403, "TenantMismatch");
    let b = assert_error(app.get(&format!("/api/incidents?tenant_id={tenant}&status=x&severity=y&owner_persona_id=z"), Some(a)).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!([
            "status must be one of: open, acknowledged, escalated, resolved",
            "severity must be one of: critical, high, medium, low",
            "owner_persona_id must be a UUID"
        ])
    );
    let (_, l) = app.get(&format!("/api/incidents?tenant_id={}", t.b["tenant_id"].as_str().unwrap()), Some(&t.b_token)).await;
    assert_eq!(l["total"], 0, "B sees none of A's");

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |n: &str| events.iter().filter(|e| *e == n).count();
    assert_eq!(
        [
            count("incident.incident.opened.v1"),
            count("incident.incident.escalated.v1"),
            count("incident.incident.acknowledged.v1"),
            count("incident.incident.resolved.v1")
        ],
        [2, 1, 1, 1]
    );
}
db_test!(incidents_are_worked_to_resolution_and_listed_by_last_update);

async fn patch(app: &TestApp, token: &str, incident: &str, body: Value) -> (StatusCode, Value) {
    app.call(reqwest::Method::PATCH, &format!("/api/incidents/{incident}"), Some(token), Some(body)).await
}

async fn incidents_are_read_changed_assigned_and_annotated(app: TestApp) {
    let t = app.two_tenants("incident-life").await;
    let a = t.a_token.as_str();
    let owner = t.a["persona_id"].as_str().unwrap().to_string();
    let (_, other) = app.post("/api/personas", Some(a), json!({ "kind": "human" })).await;
    let other = other["data"]["persona_id"].as_str().unwrap().to_string();
    let (s, i) = app.post("/api/incidents", Some(a), json!({ "title": "Queue stuck", "severity": "medium" })).await;
    assert_eq!(s, StatusCode::CREATED, "{i}");
    let id = i["data"]["incident_id"].as_str().unwrap().to_string();

    // Read one.
    let (s, r) = app.get(&format!("/api/incidents/{id}"), Some(a)).await;
    assert_eq!((s, r["data"]["title"].as_str(), r["data"]["status"].as_str()), (StatusCode::OK, Some("Queue stuck"), Some("open")));
    assert_error(app.get(&format!("/api/incidents/{id}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/incidents/not-an-id", Some(a)).await, 404, "NotFound");
    assert_error(app.get(&format!("/api/incidents/{}", uuid::Uuid::now_v7()), Some(a)).await, 404, "NotFound");

    // Change: what is absent stays.
    let (s, r) = patch(&app, a, &id, json!({ "severity": "critical", "description": "jobs pile up" })).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(
        (r["data"]["title"].as_str(), r["data"]["severity"].as_str(), r["data"]["description"].as_str()),
        (Some("Queue stuck"), Some("critical"), Some("jobs pile up"))
    );
    let (s, r) = patch(&app, a, &id, json!({ "title": "Queue stuck in eu-west" })).await;
    assert_eq!((s, r["data"]["title"].as_str(), r["data"]["severity"].as_str()), (StatusCode::OK, Some("Queue stuck in eu-west"), Some("critical")));
    let b = assert_error(patch(&app, a, &id, json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of title, description, severity"]));
    let b = assert_error(patch(&app, a, &id, json!({ "severity": "sev1", "title": "x".repeat(301) })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["title must be at most 300 characters", "severity must be one of: critical, high, medium, low"]));
    assert_error(patch(&app, &t.b_token, &id, json!({ "title": "mine" })).await, 404, "NotFound");
    assert_error(patch(&app, a, "42", json!({ "title": "x" })).await, 404, "NotFound");
    let (_, l) = app.get(&format!("/api/incidents?tenant_id={}&severity=critical", t.a["tenant_id"].as_str().unwrap()), Some(a)).await;
    assert_eq!((l["data"][0]["incident_id"].as_str(), l["total"].as_i64()), (Some(id.as_str()), Some(1)));

    // Assign: to a persona of the tenant; the same owner again changes nothing.
    let url = format!("/api/incidents/{id}/assign");
    let (s, r) = app.post(&url, Some(a), json!({ "owner_persona_id": owner })).await;
    assert_eq!((s, r["data"]["owner_persona_id"].as_str()), (StatusCode::OK, Some(owner.as_str())), "{r}");
    let (s, again) = app.post(&url, Some(a), json!({ "owner_persona_id": owner })).await;
    assert_eq!((s, &again["data"]), (StatusCode::OK, &r["data"]), "a repeat answers the incident as it is");
    let (s, r) = app.post(&url, Some(a), json!({ "owner_persona_id": other })).await;
    assert_eq!((s, r["data"]["owner_persona_id"].as_str()), (StatusCode::OK, Some(other.as_str())));
    let (_, l) = app.get(&format!("/api/incidents?tenant_id={}&owner_persona_id={other}", t.a["tenant_id"].as_str().unwrap()), Some(a)).await;
    assert_eq!(l["total"], 1);
    let b = assert_error(app.post(&url, Some(a), json!({ "owner_persona_id": t.b["persona_id"] })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["owner_persona_id is not a persona of this tenant"]));
    let b = assert_error(app.post(&url, Some(a), json!({ "owner_persona_id": "me" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["owner_persona_id must be a UUID"]));
    let b = assert_error(app.post(&url, Some(a), json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["owner_persona_id is required"]));
    assert_error(app.post(&url, Some(&t.b_token), json!({ "owner_persona_id": t.b["persona_id"] })).await, 404, "NotFound");

    // Notes: comments and status changes, oldest first.
    let notes = format!("/api/incidents/{id}/notes");
    let (s, n) = app.post(&notes, Some(a), json!({ "body": "restarted the workers" })).await;
    assert_eq!(s, StatusCode::CREATED, "{n}");
    assert_eq!(
        (n["data"]["kind"].as_str(), n["data"]["body"].as_str(), n["data"]["incident_id"].as_str()),
        (Some("comment"), Some("restarted the workers"), Some(id.as_str()))
    );
    let (s, _) = app.post(&format!("/api/incidents/{id}/status"), Some(a), json!({ "status": "resolved", "note": "drained" })).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = app.post(&notes, Some(a), json!({ "body": "post-mortem: add an alert" })).await;
    assert_eq!(s, StatusCode::CREATED, "a resolved incident still takes comments");
    let (s, l) = app.get(&notes, Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    let seen: Vec<Value> = l["data"].as_array().unwrap().iter().map(|n| json!([n["kind"], n["body"], n["from_status"], n["to_status"]])).collect();
    assert_eq!(
        (json!(seen), l["total"].as_i64()),
        (
            json!([
                ["comment", "restarted the workers", null, null],
                ["status", "drained", "open", "resolved"],
                ["comment", "post-mortem: add an alert", null, null]
            ]),
            Some(3)
        )
    );
    let (_, l) = app.get(&format!("{notes}?kind=status"), Some(a)).await;
    assert_eq!((l["total"].as_i64(), l["data"][0]["to_status"].as_str()), (Some(1), Some("resolved")));
    let (_, l) = app.get(&format!("{notes}?limit=1&offset=2"), Some(a)).await;
    assert_eq!((l["data"][0]["body"].as_str(), l["total"].as_i64()), (Some("post-mortem: add an alert"), Some(3)));
    let b = assert_error(app.get(&format!("{notes}?kind=memo"), Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["kind must be one of: comment, status"]));
    let b = assert_error(app.post(&notes, Some(a), json!({ "body": "" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["body is required"]));
    assert_error(app.get(&notes, Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.post(&notes, Some(&t.b_token), json!({ "body": "x" })).await, 404, "NotFound");

    // Resolved: no more changes, no reassignment.
    let b = assert_error(patch(&app, a, &id, json!({ "title": "late" })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the incident is resolved: a resolved incident is not changed"]));
    let b = assert_error(app.post(&url, Some(a), json!({ "owner_persona_id": owner })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the incident is resolved: a resolved incident is not reassigned"]));

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |n: &str| events.iter().filter(|e| *e == n).count();
    assert_eq!(
        [
            count("incident.incident.updated.v1"),
            count("incident.incident.assigned.v1"),
            count("incident.note.added.v1"),
            count("incident.incident.resolved.v1")
        ],
        [2, 2, 2, 1]
    );
}
db_test!(incidents_are_read_changed_assigned_and_annotated);
