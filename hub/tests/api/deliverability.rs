//! sdk-deliverability: bounces and complaints arrive as signed inbound
//! webhooks of kind `email`, are classified hard, soft or complaint, and a
//! hard bounce or a complaint suppresses the address for the compose check.

use reqwest::StatusCode;
use serde_json::json;

use crate::{db_test, helpers::*};

async fn bounces_and_complaints_are_classified_listed_and_suppressed(app: TestApp) {
    let t = app.two_tenants("deliver").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].as_str().unwrap().to_string());
    let sender = app.inbound_sender(a, &t.a["tenant_id"], "email", "mailco").await;

    let (s, r) = sender
        .send(
            "d1",
            json!({ "type": "bounce", "bounce_type": "permanent", "email": "Ann@Example.com", "message_id": "m-1", "occurred_at": "2026-05-01T10:00:00Z" }),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!((r["data"]["result"]["classification"].as_str(), r["data"]["result"]["suppressed"].as_bool()), (Some("hard"), Some(true)), "{r}");
    let (s, r) =
        sender.send("d2", json!({ "type": "bounce", "bounce_type": "transient", "email": "bob@example.com", "occurred_at": "2026-05-01T11:00:00Z" })).await;
    assert_eq!((s, r["data"]["result"]["classification"].as_str(), r["data"]["result"]["suppressed"].as_bool()), (StatusCode::OK, Some("soft"), Some(false)));
    let (s, r) = sender.send("d3", json!({ "type": "complaint", "email": "cy@example.com", "message_id": "m-3", "occurred_at": "2026-05-01T12:00:00Z" })).await;
    assert_eq!((s, r["data"]["result"]["classification"].as_str()), (StatusCode::OK, Some("complaint")));
    let (s, r) = sender.send("d4", json!({ "type": "delivery", "email": "dee@example.com" })).await;
    assert_eq!((s, r["data"]["result"]["recorded"].as_bool()), (StatusCode::OK, Some(false)));
    // A second hard bounce of a suppressed address is recorded, not suppressed twice.
    let (_, r) =
        sender.send("d5", json!({ "type": "bounce", "bounce_type": "permanent", "email": "ann@example.com", "occurred_at": "2026-04-01T10:00:00Z" })).await;
    assert_eq!(r["data"]["result"]["suppressed"], false);

    // A payload that does not fit: 400 with every problem, nothing kept.
    let (s, r) = sender.send("d6", json!({ "type": "bounced", "email": "nope" })).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(r["details"], json!(["type must be one of: bounce, complaint, delivery", "email must be an address of at most 320 characters"]));
    let (s, r) = sender.send("d7", json!({ "type": "bounce", "email": "x@example.com", "occurred_at": "yesterday" })).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(r["details"], json!(["bounce_type is required for a bounce", "occurred_at must be an RFC 3339 timestamp"]));

    // The list: newest first, filtered by classification, tenant_id required.
    let list = format!("/api/deliverability/events?tenant_id={tenant}");
    let (s, all) = app.get(&list, Some(a)).await;
    assert_eq!((s, all["total"].as_i64()), (StatusCode::OK, Some(4)), "{all}");
    let kinds: Vec<&str> = all["data"].as_array().unwrap().iter().map(|e| e["classification"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["complaint", "soft", "hard", "hard"]);
    assert_eq!((all["data"][2]["email"].as_str(), all["data"][2]["message_id"].as_str()), (Some("ann@example.com"), Some("m-1")));
    assert_eq!((all["data"][2]["provider"].as_str(), all["data"][2]["occurred_at"].as_str()), (Some("mailco"), Some("2026-05-01T10:00:00.000000Z")));
    assert!(all["data"][2]["suppression_id"].is_string() && all["data"][1]["suppression_id"].is_null());
    let (_, hard) = app.get(&format!("{list}&classification=hard&limit=1"), Some(a)).await;
    assert_eq!((hard["total"].as_i64(), hard["data"].as_array().unwrap().len()), (Some(2), 1));
    let b = assert_error(app.get(&format!("{list}&classification=bounce"), Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["classification must be one of: hard, soft, complaint"]));
    assert_error(app.get("/api/deliverability/events", Some(a)).await, 400, "ValidationError");
    // Another tenant sees nothing of A's, and may not ask for A's.
    let (s, other) = app.get(&format!("/api/deliverability/events?tenant_id={}", t.b["tenant_id"].as_str().unwrap()), Some(&t.b_token)).await;
    assert_eq!((s, other["total"].as_i64()), (StatusCode::OK, Some(0)));
    let (s, _) = app.get(&list, Some(&t.b_token)).await;
    assert_eq!(s, StatusCode::FORBIDDEN);

    // The suppressions landed on the list the compose check reads.
    let (_, sup) = app.get("/api/conversations/suppressions?channel=email", Some(a)).await;
    let addresses: Vec<&str> = sup["data"].as_array().unwrap().iter().map(|e| e["address"].as_str().unwrap()).collect();
    assert_eq!(addresses, ["cy@example.com", "ann@example.com"]);
    assert_eq!(sup["data"][1]["reason"], "hard bounce reported by mailco");
    let (s, _) = app.post("/api/consent/purposes", Some(a), json!({ "purpose_id": "service", "description": "x", "legal_basis": "contract" })).await;
    assert_eq!(s, StatusCode::CREATED);
    for (address, decision) in [("ANN@example.com", "deny"), ("bob@example.com", "allow")] {
        let body = json!({ "subject": "ann", "purpose_id": "service", "channels": ["email"], "addresses": { "email": address } });
        let (s, r) = app.post("/api/conversations/compose-check", Some(a), body).await;
        assert_eq!((s, r["data"]["channels"][0]["decision"].as_str()), (StatusCode::OK, Some(decision)), "{r}");
    }
    let (_, r) = app
        .post(
            "/api/conversations/compose-check",
            Some(a),
            json!({ "subject": "ann", "purpose_id": "service", "channels": ["email"], "addresses": { "email": "ann@example.com" } }),
        )
        .await;
    assert!(r["data"]["channels"][0]["reasons"][1].as_str().unwrap().ends_with(": hard bounce reported by mailco"), "{r}");

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |ty: &str| events.iter().filter(|e| *e == ty).count();
    assert_eq!(
        (count("deliverability.bounce.processed.v1"), count("deliverability.complaint.processed.v1"), count("deliverability.address.suppressed.v1")),
        (3, 1, 2)
    );
    assert_eq!(count("webhook.inbound.received.v1"), 5, "the refused payloads left no receipt");
}
db_test!(bounces_and_complaints_are_classified_listed_and_suppressed);

async fn an_event_is_read_by_id_and_events_filtered_by_address(app: TestApp) {
    let t = app.two_tenants("deliver-one").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].as_str().unwrap().to_string());
    let sender = app.inbound_sender(a, &t.a["tenant_id"], "email", "mailco").await;
    let (s, hard) = sender
        .send(
            "e1",
            json!({ "type": "bounce", "bounce_type": "permanent", "email": "Ann@Example.com", "message_id": "m-1", "occurred_at": "2026-05-01T10:00:00Z" }),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{hard}");
    let (s, _) = sender.send("e2", json!({ "type": "complaint", "email": "ann@example.com", "occurred_at": "2026-05-02T10:00:00Z" })).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) =
        sender.send("e3", json!({ "type": "bounce", "bounce_type": "transient", "email": "bob@example.com", "occurred_at": "2026-05-03T10:00:00Z" })).await;
    assert_eq!(s, StatusCode::OK);
    let id = hard["data"]["result"]["event_id"].as_str().unwrap().to_string();

    let (s, one) = app.get(&format!("/api/deliverability/events/{id}"), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{one}");
    assert_eq!(
        (one["data"]["event_id"].as_str(), one["data"]["classification"].as_str(), one["data"]["email"].as_str(), one["data"]["message_id"].as_str()),
        (Some(id.as_str()), Some("hard"), Some("ann@example.com"), Some("m-1"))
    );
    assert!(one["data"]["suppression_id"].is_string(), "a hard bounce names its suppression: {one}");
    assert_error(app.get(&format!("/api/deliverability/events/{}", uuid::Uuid::now_v7()), Some(a)).await, 404, "NotFound");
    assert_error(app.get("/api/deliverability/events/m-1", Some(a)).await, 404, "NotFound");
    assert_error(app.get(&format!("/api/deliverability/events/{id}"), Some(&t.b_token)).await, 404, "NotFound");

    // Why is this address suppressed? Its events, newest first, in any case.
    let (_, ann) = app.get(&format!("/api/deliverability/events?tenant_id={tenant}&email=ANN@example.com"), Some(a)).await;
    assert_eq!(ann["total"], 2);
    let kinds: Vec<&str> = ann["data"].as_array().unwrap().iter().map(|e| e["classification"].as_str().unwrap()).collect();
    assert_eq!(kinds, vec!["complaint", "hard"]);
    let (_, ann_hard) = app.get(&format!("/api/deliverability/events?tenant_id={tenant}&email=ann@example.com&classification=hard&limit=1"), Some(a)).await;
    assert_eq!((ann_hard["total"].clone(), ann_hard["data"][0]["event_id"].clone()), (json!(1), json!(id)));
    let (_, nobody) = app.get(&format!("/api/deliverability/events?tenant_id={tenant}&email=zed@example.com"), Some(a)).await;
    assert_eq!(nobody["total"], 0);
    let long = format!("{}@example.com", "x".repeat(320));
    assert_error(app.get(&format!("/api/deliverability/events?tenant_id={tenant}&email={long}"), Some(a)).await, 400, "ValidationError");
}
db_test!(an_event_is_read_by_id_and_events_filtered_by_address);
