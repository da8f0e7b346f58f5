//! sdk-notification: a notification goes out through a provider (the
//! default `log`) and is kept `sent`; receipts arrive as signed inbound
//! webhooks of kind `notification` and settle it by the provider's message id.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn notifications_are_sent_then_settled_by_their_receipts(app: TestApp) {
    let t = app.two_tenants("notify").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].as_str().unwrap().to_string());
    let (s, n) =
        app.post("/api/notifications", Some(a), json!({ "channel": "email", "recipient": "ann@example.com", "subject": "Hi", "body": "Hello Ann" })).await;
    assert_eq!(s, StatusCode::CREATED, "{n}");
    let n = n["data"].clone();
    assert_eq!(
        (n["status"].as_str(), n["provider"].as_str(), n["channel"].as_str(), n["error"].as_null()),
        (Some("sent"), Some("log"), Some("email"), Some(()))
    );
    let message_id = n["provider_message_id"].as_str().unwrap().to_string();
    assert!(message_id.starts_with("log-"), "{n}");
    assert!(n.get("body").is_none(), "the content is not kept");
    let (s, sms) =
        app.post("/api/notifications", Some(a), json!({ "channel": "sms", "recipient": "+31612345678", "body": "Code 1234", "provider": "log" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let sms_message = sms["data"]["provider_message_id"].as_str().unwrap().to_string();

    let b = assert_error(
        app.post("/api/notifications", Some(a), json!({ "channel": "fax", "subject": "x".repeat(301), "provider": "pigeon" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "channel must be one of: email, sms, whatsapp, push, voice",
            "recipient is required",
            "subject must be at most 300 characters",
            "body is required",
            "provider must be one of: log"
        ])
    );
    assert_error(
        app.post("/api/notifications", Some(a), json!({ "tenant_id": t.b["tenant_id"], "channel": "sms", "recipient": "1", "body": "x" })).await,
        403,
        "TenantMismatch",
    );

    // Receipts from the provider, matched by its message id.
    let sender = app.inbound_sender(a, &t.a["tenant_id"], "notification", "log").await;
    let (s, r) = sender.send("r1", json!({ "message_id": message_id, "status": "delivered", "occurred_at": "2026-05-01T10:00:00Z" })).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["data"]["result"]["notification_id"], n["notification_id"]);
    let (s, r) =
        sender.send("r2", json!({ "message_id": sms_message, "status": "bounced", "reason": "unreachable", "occurred_at": "2026-05-01T11:00:00Z" })).await;
    assert_eq!((s, r["data"]["result"]["recorded"].as_bool()), (StatusCode::OK, Some(true)));
    let (s, r) = sender.send("r3", json!({ "message_id": message_id, "status": "opened", "occurred_at": "2026-05-01T12:00:00Z" })).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    // A message id the tenant never sent: kept, matched to nothing.
    let (s, r) = sender.send("r4", json!({ "message_id": "log-unknown", "status": "failed", "occurred_at": "2026-05-01T09:00:00Z" })).await;
    assert_eq!((s, r["data"]["result"]["notification_id"].is_null()), (StatusCode::OK, true));
    let (s, r) = sender.send("r5", json!({ "status": "read", "occurred_at": "soon" })).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(
        r["details"],
        json!([
            "message_id is required",
            "status must be one of: delivered, deferred, failed, bounced, opened, clicked",
            "occurred_at must be an RFC 3339 timestamp"
        ])
    );

    let list = format!("/api/notifications/receipts?tenant_id={tenant}");
    let (s, all) = app.get(&list, Some(a)).await;
    assert_eq!((s, all["total"].as_i64()), (StatusCode::OK, Some(4)), "{all}");
    let statuses: Vec<&str> = all["data"].as_array().unwrap().iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["opened", "bounced", "delivered", "failed"]);
    assert_eq!((all["data"][1]["reason"].as_str(), all["data"][1]["notification_id"].as_str()), (Some("unreachable"), sms["data"]["notification_id"].as_str()));
    assert_eq!((all["data"][2]["provider_message_id"].as_str(), all["data"][2]["provider"].as_str()), (Some(message_id.as_str()), Some("log")));
    let (_, delivered) = app.get(&format!("{list}&status=delivered"), Some(a)).await;
    assert_eq!((delivered["total"].as_i64(), delivered["data"][0]["notification_id"].clone()), (Some(1), n["notification_id"].clone()));
    let (_, page) = app.get(&format!("{list}&limit=2&offset=2"), Some(a)).await;
    assert_eq!((page["total"].as_i64(), page["data"][0]["status"].as_str()), (Some(4), Some("delivered")));
    let b = assert_error(app.get(&format!("{list}&status=sent"), Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["status must be one of: delivered, deferred, failed, bounced, opened, clicked"]));
    assert_error(app.get("/api/notifications/receipts", Some(a)).await, 400, "ValidationError");
    let (s, other) = app.get(&format!("/api/notifications/receipts?tenant_id={}", t.b["tenant_id"].as_str().unwrap()), Some(&t.b_token)).await;
    assert_eq!((s, other["total"].as_i64()), (StatusCode::OK, Some(0)));
    assert_error(app.get(&list, Some(&t.b_token)).await, 403, "TenantMismatch");

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |ty: &str| events.iter().filter(|e| *e == ty).count();
    assert_eq!(
        (count("notification.message.sent.v1"), count("notification.message.delivered.v1"), count("notification.message.failed.v1")),
        (2, 1, 1),
        "the bounce fails the sms; the opened and the unmatched receipts settle nothing"
    );
}
db_test!(notifications_are_sent_then_settled_by_their_receipts);

async fn notifications_are_read_one_listed_and_show_their_receipts(app: TestApp) {
    let t = app.two_tenants("notify-read").await;
    let a = t.a_token.as_str();
    let (_, mail) = app.post("/api/notifications", Some(a), json!({ "channel": "email", "recipient": "bo@example.com", "body": "Hello Bo" })).await;
    let mail = mail["data"].clone();
    let mail_id = mail["notification_id"].as_str().unwrap().to_string();
    let (_, sms) = app.post("/api/notifications", Some(a), json!({ "channel": "sms", "recipient": "+31600000000", "body": "Code" })).await;
    let sms_id = sms["data"]["notification_id"].as_str().unwrap().to_string();
    let (_, push) = app.post("/api/notifications", Some(a), json!({ "channel": "push", "recipient": "device-1", "body": "Ping" })).await;
    let push_id = push["data"]["notification_id"].as_str().unwrap().to_string();

    let sender = app.inbound_sender(a, &t.a["tenant_id"], "notification", "log").await;
    let message = mail["provider_message_id"].as_str().unwrap();
    for (i, (status, at)) in
        [("deferred", "2026-05-01T10:00:00Z"), ("delivered", "2026-05-01T10:05:00Z"), ("opened", "2026-05-01T11:00:00Z")].iter().enumerate()
    {
        let (s, r) = sender.send(&format!("m{i}"), json!({ "message_id": message, "status": status, "occurred_at": at })).await;
        assert_eq!(s, StatusCode::OK, "{r}");
    }
    let (s, r) =
        sender.send("s1", json!({ "message_id": sms["data"]["provider_message_id"], "status": "bounced", "occurred_at": "2026-05-01T09:00:00Z" })).await;
    assert_eq!(s, StatusCode::OK, "{r}");

    // One, with the status its receipts settled.
    let (s, r) = app.get(&format!("/api/notifications/{mail_id}"), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(
        (r["data"]["status"].as_str(), r["data"]["recipient"].as_str(), r["data"]["channel"].as_str()),
        (Some("delivered"), Some("bo@example.com"), Some("email"))
    );
    assert!(r["data"].get("body").is_none(), "the content is not kept");
    assert_error(app.get(&format!("/api/notifications/{mail_id}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/notifications/nope", Some(a)).await, 404, "NotFound");

    // The list, newest first, by status and channel.
    let ids = |l: &Value| l["data"].as_array().unwrap().iter().map(|n| n["notification_id"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let (s, l) = app.get("/api/notifications", Some(a)).await;
    assert_eq!((s, ids(&l), l["total"].as_i64()), (StatusCode::OK, vec![push_id.clone(), sms_id.clone(), mail_id.clone()], Some(3)));
    let (_, l) = app.get("/api/notifications?status=bounced", Some(a)).await;
    assert_eq!((ids(&l), l["total"].as_i64()), (vec![sms_id.clone()], Some(1)));
    let (_, l) = app.get("/api/notifications?channel=push&status=sent", Some(a)).await;
    assert_eq!((ids(&l), l["total"].as_i64()), (vec![push_id.clone()], Some(1)));
    let (_, l) = app.get("/api/notifications?channel=email&status=sent", Some(a)).await;
    assert_eq!(l["total"], 0);
    let (_, l) = app.get("/api/notifications?limit=1&offset=1", Some(a)).await;
    assert_eq!((ids(&l), l["total"].as_i64()), (vec![sms_id.clone()], Some(3)));
    let b = assert_error(app.get("/api/notifications?status=read&channel=fax", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["status must be one of: sent, failed, delivered, bounced", "channel must be one of: email, sms, whatsapp, push, voice"]));
    let (_, l) = app.get("/api/notifications", Some(&t.b_token)).await;
    assert_eq!(l["total"], 0, "B sees none of A's");

    // Its receipts, newest first.
    let receipts = format!("/api/notifications/{mail_id}/receipts");
    let (s, l) = app.get(&receipts, Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    let statuses: Vec<&str> = l["data"].as_array().unwrap().iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!((statuses, l["total"].as_i64()), (vec!["opened", "delivered", "deferred"], Some(3)));
    assert!(l["data"].as_array().unwrap().iter().all(|r| r["notification_id"] == mail["notification_id"]));
    let (_, l) = app.get(&format!("{receipts}?status=deferred"), Some(a)).await;
    assert_eq!((l["total"].as_i64(), l["data"][0]["status"].as_str()), (Some(1), Some("deferred")));
    let (_, l) = app.get(&format!("{receipts}?limit=1&offset=2"), Some(a)).await;
    assert_eq!((l["data"][0]["status"].as_str(), l["total"].as_i64()), (Some("deferred"), Some(3)));
    let (_, l) = app.get(&format!("/api/notifications/{push_id}/receipts"), Some(a)).await;
    assert_eq!(l["total"], 0);
    let b = assert_error(app.get(&format!("{receipts}?status=sent"), Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["status must be one of: delivered, deferred, failed, bounced, opened, clicked"]));
    assert_error(app.get(&receipts, Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/notifications/42/receipts", Some(a)).await, 404, "NotFound");
}
db_test!(notifications_are_read_one_listed_and_show_their_receipts);
