//! sdk-service-request: queues (one name each, an optional numeric
//! priority) and requests filed into them, open until closed.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn queues_take_requests_that_open_and_close(app: TestApp) {
    let t = app.two_tenants("servicereq").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].clone());
    let (s, q) = app.post("/api/service-requests/queues", Some(a), json!({ "tenant_id": tenant, "name": "Support", "priority": 7 })).await;
    assert_eq!(s, StatusCode::CREATED, "{q}");
    let support = q["data"]["queue_id"].as_str().unwrap().to_string();
    assert_eq!((q["data"]["name"].as_str(), q["data"]["priority"].as_i64()), (Some("Support"), Some(7)));
    let (s, q2) = app.post("/api/service-requests/queues", Some(a), json!({ "tenant_id": tenant, "name": "Billing" })).await;
    assert_eq!((s, q2["data"]["priority"].as_i64()), (StatusCode::CREATED, Some(0)));
    let billing = q2["data"]["queue_id"].as_str().unwrap().to_string();
    let b = assert_error(app.post("/api/service-requests/queues", Some(a), json!({ "tenant_id": tenant, "name": "Support" })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the tenant has a queue named Support"]));
    let b = assert_error(app.post("/api/service-requests/queues", Some(a), json!({ "priority": "high" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["tenant_id is required", "name is required", "priority must be an integer from 0 to 1000"]));
    assert_error(app.post("/api/service-requests/queues", Some(a), json!({ "tenant_id": t.b["tenant_id"], "name": "x" })).await, 403, "TenantMismatch");
    let (s, _) = app.post("/api/service-requests/queues", Some(&t.b_token), json!({ "tenant_id": t.b["tenant_id"], "name": "Support" })).await;
    assert_eq!(s, StatusCode::CREATED, "names are per tenant");

    let (s, l) = app.get("/api/service-requests/queues", Some(a)).await;
    assert_eq!(s, StatusCode::OK);
    let ids: Vec<&str> = l["data"].as_array().unwrap().iter().map(|q| q["queue_id"].as_str().unwrap()).collect();
    assert_eq!((ids, l["total"].as_i64()), (vec![billing.as_str(), support.as_str()], Some(2)));
    let (_, l) = app.get("/api/service-requests/queues?limit=1&offset=1", Some(a)).await;
    assert_eq!(l["data"][0]["queue_id"].as_str(), Some(support.as_str()));
    assert_error(app.get("/api/service-requests/queues?offset=x", Some(a)).await, 400, "ValidationError");

    let (s, r) = app.post("/api/service-requests", Some(a), json!({ "queue_id": support, "title": "Printer on fire" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let first = r["data"]["request_id"].as_str().unwrap().to_string();
    assert_eq!((r["data"]["status"].as_str(), r["data"]["priority"].as_i64(), r["data"]["closed_at"].clone()), (Some("open"), Some(7), Value::Null));
    let (s, r2) = app.post("/api/service-requests", Some(a), json!({ "queue_id": billing, "title": "Refund", "priority": 900 })).await;
    assert_eq!((s, r2["data"]["priority"].as_i64()), (StatusCode::CREATED, Some(900)));
    let second = r2["data"]["request_id"].as_str().unwrap().to_string();
    let b = assert_error(app.post("/api/service-requests", Some(a), json!({ "queue_id": "q", "priority": 1001 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["queue_id must be a UUID", "title is required", "priority must be an integer from 0 to 1000"]));
    let b = assert_error(
        app.post("/api/service-requests", Some(&t.b_token), json!({ "queue_id": support, "title": "x", "contact_id": uuid::Uuid::now_v7() })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["queue_id is not a queue of this tenant", "contact_id is not a contact of this tenant"]));

    let (s, c) = app.post(&format!("/api/service-requests/{first}/close"), Some(a), json!({ "resolution": "extinguished" })).await;
    assert_eq!(s, StatusCode::OK, "{c}");
    assert_eq!((c["data"]["status"].as_str(), c["data"]["resolution"].as_str()), (Some("closed"), Some("extinguished")));
    assert!(c["data"]["closed_at"].is_string());
    let b = assert_error(app.post(&format!("/api/service-requests/{first}/close"), Some(a), json!({})).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the request is closed: only an open request can be closed"]));
    assert_error(app.post(&format!("/api/service-requests/{second}/close"), Some(&t.b_token), json!({})).await, 404, "NotFound");
    let long = json!({ "resolution": "r".repeat(2001) });
    assert_error(app.post(&format!("/api/service-requests/{second}/close"), Some(&t.b_token), long.clone()).await, 404, "NotFound");
    let b = assert_error(app.post(&format!("/api/service-requests/{second}/close"), Some(a), long).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["resolution must be at most 2000 characters"]));
    assert_error(app.post("/api/service-requests/nope/close", Some(a), json!({})).await, 404, "NotFound");
    let (s, g) = app.get(&format!("/api/service-requests/{first}"), Some(a)).await;
    assert_eq!((s, g["data"]["title"].as_str()), (StatusCode::OK, Some("Printer on fire")));
    assert_error(app.get(&format!("/api/service-requests/{first}"), Some(&t.b_token)).await, 404, "NotFound");

    let (_, l) = app.get("/api/service-requests", Some(a)).await;
    let ids: Vec<&str> = l["data"].as_array().unwrap().iter().map(|r| r["request_id"].as_str().unwrap()).collect();
    assert_eq!((ids, l["total"].as_i64()), (vec![second.as_str(), first.as_str()], Some(2)));
    let (_, l) = app.get(&format!("/api/service-requests?queue_id={support}&status=closed"), Some(a)).await;
    assert_eq!((l["data"][0]["request_id"].as_str(), l["total"].as_i64()), (Some(first.as_str()), Some(1)));
    let (_, l) = app.get("/api/service-requests?status=open", Some(a)).await;
    assert_eq!((l["data"][0]["request_id"].as_str(), l["total"].as_i64()), (Some(second.as_str()), Some(1)));
    let b = assert_error(app.get("/api/service-requests?status=pending&queue_id=1", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["queue_id must be a UUID", "status must be one of: open, closed"]));
    let (_, l) = app.get("/api/service-requests", Some(&t.b_token)).await;
    assert_eq!(l["total"], 0);

    let events = app.events_of(&tenant).await;
    let count = |ty: &str| events.iter().filter(|e| *e == ty).count();
    assert_eq!((count("service-request.queue.created.v1"), count("service-request.request.opened.v1"), count("service-request.request.closed.v1")), (2, 2, 1));
}
db_test!(queues_take_requests_that_open_and_close);

/// Queues are read and changed; open requests changed (and moved between
/// queues), closed ones reopened; the list finds a contact's requests.
async fn requests_are_changed_reopened_and_listed_by_contact(app: TestApp) {
    let t = app.two_tenants("servicereq-life").await;
    let (a, b, tenant) = (t.a_token.as_str(), t.b_token.as_str(), t.a["tenant_id"].clone());
    let mut queues = Vec::new();
    for (name, priority) in [("Support", 7), ("Billing", 3)] {
        let (s, q) = app.post("/api/service-requests/queues", Some(a), json!({ "tenant_id": tenant, "name": name, "priority": priority })).await;
        assert_eq!(s, StatusCode::CREATED, "{q}");
        queues.push(q["data"].clone());
    }
    let (support, billing) = (queues[0]["queue_id"].as_str().unwrap(), queues[1]["queue_id"].as_str().unwrap());

    // A queue: read one, changed (a name stays unique).
    let (s, q) = app.get(&format!("/api/service-requests/queues/{support}"), Some(a)).await;
    assert_eq!((s, &q["data"]), (StatusCode::OK, &queues[0]));
    assert_error(app.get(&format!("/api/service-requests/queues/{support}"), Some(b)).await, 404, "NotFound");
    assert_error(app.get("/api/service-requests/queues/support", Some(a)).await, 404, "NotFound");
    let app = &app;
    let queue_url = format!("/api/service-requests/queues/{support}");
    let patch_queue = |token: &str, body: Value| {
        let (url, token) = (queue_url.clone(), token.to_string());
        async move { app.call(reqwest::Method::PATCH, &url, Some(&token), Some(body)).await }
    };
    let body = assert_error(patch_queue(a, json!({})).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["give at least one of: name, description, priority"]));
    let body = assert_error(patch_queue(a, json!({ "priority": 1001 })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["priority must be an integer from 0 to 1000"]));
    let body = assert_error(patch_queue(a, json!({ "name": "Billing" })).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the tenant has a queue named Billing"]));
    assert_error(patch_queue(b, json!({ "name": "x" })).await, 404, "NotFound");
    let (s, q) = patch_queue(a, json!({ "name": "Help desk", "description": "first line", "priority": 9 })).await;
    assert_eq!(s, StatusCode::OK, "{q}");
    assert_eq!((&q["data"]["name"], &q["data"]["description"], &q["data"]["priority"]), (&json!("Help desk"), &json!("first line"), &json!(9)));

    // Requests of a contact and without one.
    let (s, c) = app.post("/api/crm/contacts", Some(a), json!({ "name": "Ada" })).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let contact = c["data"]["contact_id"].as_str().unwrap();
    let (s, r) = app.post("/api/service-requests", Some(a), json!({ "queue_id": support, "title": "Printer", "contact_id": contact })).await;
    assert_eq!((s, &r["data"]["priority"]), (StatusCode::CREATED, &json!(9)), "the queue's new priority: {r}");
    let request = r["data"]["request_id"].as_str().unwrap().to_string();
    let (s, _) = app.post("/api/service-requests", Some(a), json!({ "queue_id": support, "title": "Anonymous" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, mine) = app.get(&format!("/api/service-requests?contact_id={contact}"), Some(a)).await;
    assert_eq!((&mine["total"], &mine["data"][0]["request_id"]), (&json!(1), &json!(request)));
    let (_, open) = app.get(&format!("/api/service-requests?contact_id={contact}&status=open&queue_id={support}"), Some(a)).await;
    assert_eq!(open["total"], 1);
    let body = assert_error(app.get("/api/service-requests?contact_id=ada", Some(a)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["contact_id must be a UUID"]));
    let (_, theirs) = app.get(&format!("/api/service-requests?contact_id={contact}"), Some(b)).await;
    assert_eq!(theirs["total"], 0);

    // An open request is changed and moved; absent fields stay.
    let request_url = format!("/api/service-requests/{request}");
    let patch = |token: &str, body: Value| {
        let (url, token) = (request_url.clone(), token.to_string());
        async move { app.call(reqwest::Method::PATCH, &url, Some(&token), Some(body)).await }
    };
    let body = assert_error(patch(a, json!({})).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["give at least one of: title, description, priority, queue_id"]));
    let body = assert_error(patch(a, json!({ "title": "t".repeat(301), "queue_id": "q" })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["title must be at most 300 characters", "queue_id must be a UUID"]));
    let (_, their_queue) = app.post("/api/service-requests/queues", Some(b), json!({ "tenant_id": t.b["tenant_id"], "name": "Theirs" })).await;
    let body = assert_error(patch(a, json!({ "queue_id": their_queue["data"]["queue_id"] })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["queue_id is not a queue of this tenant"]));
    assert_error(patch(b, json!({ "title": "theirs" })).await, 404, "NotFound");
    let (s, moved) = patch(a, json!({ "title": "Printer jammed", "priority": 50, "queue_id": billing, "description": "tray 2" })).await;
    assert_eq!(s, StatusCode::OK, "{moved}");
    let m = &moved["data"];
    assert_eq!(
        (&m["title"], &m["priority"], &m["queue_id"], &m["description"], &m["contact_id"]),
        (&json!("Printer jammed"), &json!(50), &json!(billing), &json!("tray 2"), &json!(contact))
    );

    // Closed: no change (409) until reopened; reopening an open one is 409.
    let body = assert_error(app.post(&format!("/api/service-requests/{request}/reopen"), Some(a), json!({})).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the request is open: only a closed request can be reopened"]));
    let (s, _) = app.post(&format!("/api/service-requests/{request}/close"), Some(a), json!({ "resolution": "cleared" })).await;
    assert_eq!(s, StatusCode::OK);
    let body = assert_error(patch(a, json!({ "priority": 1 })).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the request is closed: only an open request can be changed"]));
    assert_error(app.post(&format!("/api/service-requests/{request}/reopen"), Some(b), json!({})).await, 404, "NotFound");
    let (s, reopened) = app.post(&format!("/api/service-requests/{request}/reopen"), Some(a), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{reopened}");
    let r = &reopened["data"];
    assert_eq!((&r["status"], &r["resolution"], &r["closed_at"], &r["title"]), (&json!("open"), &Value::Null, &Value::Null, &json!("Printer jammed")));
    let (s, _) = patch(a, json!({ "priority": 1 })).await;
    assert_eq!(s, StatusCode::OK);

    let events = app.events_of(&tenant).await;
    let count = |ty: &str| events.iter().filter(|e| *e == ty).count();
    assert_eq!(
        (count("service-request.queue.updated.v1"), count("service-request.request.updated.v1"), count("service-request.request.reopened.v1")),
        (1, 2, 1)
    );
}
db_test!(requests_are_changed_reopened_and_listed_by_contact);
