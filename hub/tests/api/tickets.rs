//! sdk-event: events, tickets with a qr_token shown once, check-in by that
//! token (a second check-in of one ticket is 409), voiding.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn tickets_check_in_once_by_their_qr_token(app: TestApp) {
    let t = app.two_tenants("tickets").await;
    let a = t.a_token.as_str();
    let persona = t.a["persona_id"].clone();
    let (s, e) =
        app.post("/api/tickets/events", Some(a), json!({ "name": "Launch", "starts_at": "2027-03-01T18:00:00+01:00", "venue": "Hall 1", "capacity": 2 })).await;
    assert_eq!(s, StatusCode::CREATED, "{e}");
    let event = e["data"]["event_id"].as_str().unwrap().to_string();
    assert_eq!((e["data"]["starts_at"].as_str(), e["data"]["capacity"].as_i64()), (Some("2027-03-01T17:00:00.000000Z"), Some(2)));
    let b = assert_error(
        app.post("/api/tickets/events", Some(a), json!({ "starts_at": "soon", "ends_at": "2020-01-01T00:00:00Z", "capacity": 0 })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["name is required", "starts_at must be an RFC 3339 timestamp", "capacity must be an integer from 1 to 1000000"]));
    let b = assert_error(
        app.post("/api/tickets/events", Some(a), json!({ "name": "x", "starts_at": "2027-01-02T00:00:00Z", "ends_at": "2027-01-01T00:00:00Z" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["ends_at must be after starts_at"]));

    let (s, one) = app.post("/api/tickets", Some(a), json!({ "event_id": event, "holder_name": "Ada" })).await;
    assert_eq!(s, StatusCode::CREATED, "{one}");
    let token = one["data"]["qr_token"].as_str().unwrap().to_string();
    assert!(token.starts_with("qr_") && token.len() > 40, "{token}");
    assert_eq!((one["data"]["status"].as_str(), one["data"]["holder_name"].as_str()), (Some("issued"), Some("Ada")));
    let (s, two) = app.post("/api/tickets", Some(a), json!({ "event_id": event })).await;
    assert_eq!(s, StatusCode::CREATED, "{two}");
    let b = assert_error(app.post("/api/tickets", Some(a), json!({ "event_id": event })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the event's 2 tickets are issued"]));
    let b = assert_error(app.post("/api/tickets", Some(a), json!({ "event_id": "x" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["event_id must be a UUID"]));
    let b = assert_error(app.post("/api/tickets", Some(&t.b_token), json!({ "event_id": event })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["event_id is not an event of this tenant"]));

    // Voiding the second frees its place; a voided ticket cannot check in.
    let second = two["data"]["ticket_id"].as_str().unwrap();
    let (s, v) = app.post(&format!("/api/tickets/{second}/void"), Some(a), json!({})).await;
    assert_eq!((s, v["data"]["status"].as_str()), (StatusCode::OK, Some("voided")), "{v}");
    assert_error(app.post(&format!("/api/tickets/{second}/void"), Some(a), json!({})).await, 409, "Conflict");
    assert_error(app.post(&format!("/api/tickets/{second}/void"), Some(&t.b_token), json!({})).await, 404, "NotFound");
    let b = assert_error(
        app.post("/api/tickets/check-in", Some(a), json!({ "qr_token": two["data"]["qr_token"], "checked_in_by_persona_id": persona })).await,
        409,
        "Conflict",
    );
    assert_eq!(b["details"], json!(["the ticket is voided"]));
    let (s, _) = app.post("/api/tickets", Some(a), json!({ "event_id": event })).await;
    assert_eq!(s, StatusCode::CREATED);

    let b = assert_error(app.post("/api/tickets/check-in", Some(a), json!({ "device_uuid": "phone" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["qr_token is required", "checked_in_by_persona_id is required", "device_uuid must be a UUID"]));
    // Another tenant does not know the token.
    let b_persona = t.b["persona_id"].clone();
    assert_error(
        app.post("/api/tickets/check-in", Some(&t.b_token), json!({ "qr_token": token, "checked_in_by_persona_id": b_persona })).await,
        404,
        "NotFound",
    );
    assert_error(app.post("/api/tickets/check-in", Some(a), json!({ "qr_token": "qr_nothing", "checked_in_by_persona_id": persona })).await, 404, "NotFound");
    let b = assert_error(
        app.post("/api/tickets/check-in", Some(a), json!({ "qr_token": token, "checked_in_by_persona_id": b_persona })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["checked_in_by_persona_id is not a persona of this tenant"]));

    // Without a device: stored null. The same ticket again: 409.
    let (s, c) = app.post("/api/tickets/check-in", Some(a), json!({ "qr_token": token, "checked_in_by_persona_id": persona })).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    assert_eq!(
        (c["data"]["ticket_id"].clone(), c["data"]["event_id"].as_str(), c["data"]["device_uuid"].clone(), c["data"]["checked_in_by_persona_id"].clone()),
        (one["data"]["ticket_id"].clone(), Some(event.as_str()), Value::Null, persona.clone())
    );
    let device = uuid::Uuid::now_v7().to_string();
    let b = assert_error(
        app.post("/api/tickets/check-in", Some(a), json!({ "qr_token": token, "checked_in_by_persona_id": persona, "device_uuid": device })).await,
        409,
        "Conflict",
    );
    assert_eq!(b["details"], json!(["the ticket is checked in already"]));
    assert_error(app.post(&format!("/api/tickets/{}/void", one["data"]["ticket_id"].as_str().unwrap()), Some(a), json!({})).await, 409, "Conflict");
    let stored: Option<String> = sqlx::query_scalar("SELECT device_uuid FROM event_checkin WHERE ticket_id = $1")
        .bind(one["data"]["ticket_id"].as_str().unwrap())
        .fetch_one(&app.state().db.read)
        .await
        .unwrap();
    assert_eq!(stored, None);
    let hashes: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM event_ticket WHERE qr_hash = $1").bind(&token).fetch_one(&app.state().db.read).await.unwrap();
    assert_eq!(hashes, 0, "the token itself is not stored");

    let (s, l) = app.get(&format!("/api/tickets?event_id={event}"), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    let statuses: Vec<&str> = l["data"].as_array().unwrap().iter().map(|t| t["status"].as_str().unwrap()).collect();
    assert_eq!((statuses, l["total"].as_i64()), (vec!["issued", "voided", "used"], Some(3)));
    assert!(l["data"].as_array().unwrap().iter().all(|t| t.get("qr_token").is_none()));
    let (_, l) = app.get("/api/tickets?status=used&limit=1", Some(a)).await;
    assert_eq!((l["data"][0]["ticket_id"].clone(), l["total"].as_i64()), (one["data"]["ticket_id"].clone(), Some(1)));
    let b = assert_error(app.get("/api/tickets?limit=-1&status=lost&event_id=7", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["limit must be an integer from 1 to 500"]));
    let b = assert_error(app.get("/api/tickets?status=lost&event_id=7", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["event_id must be a UUID", "status must be one of: issued, used, voided"]));
    let (_, l) = app.get("/api/tickets", Some(&t.b_token)).await;
    assert_eq!(l["total"], 0);

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |ty: &str| events.iter().filter(|e| *e == ty).count();
    assert_eq!(
        (count("event.event.created.v1"), count("event.ticket.issued.v1"), count("event.ticket.checked_in.v1"), count("event.ticket.voided.v1")),
        (1, 3, 1, 1)
    );
}
db_test!(tickets_check_in_once_by_their_qr_token);

async fn patch(app: &TestApp, path: &str, token: &str, body: Value) -> (StatusCode, Value) {
    app.call(reqwest::Method::PATCH, path, Some(token), Some(body)).await
}

async fn events_are_listed_read_and_changed_and_their_tickets_and_check_ins_read(app: TestApp) {
    let t = app.two_tenants("ticket-events").await;
    let a = t.a_token.as_str();
    let mut events = Vec::new();
    for (name, starts) in [("Launch", "2027-03-01T18:00:00Z"), ("Gala", "2027-01-01T18:00:00Z")] {
        let (s, e) = app.post("/api/tickets/events", Some(a), json!({ "name": name, "starts_at": starts, "venue": "Hall 1", "capacity": 3 })).await;
        assert_eq!(s, StatusCode::CREATED, "{e}");
        events.push(e["data"].clone());
    }
    let (s, all) = app.get("/api/tickets/events", Some(a)).await;
    assert_eq!((s, all["total"].as_i64()), (StatusCode::OK, Some(2)));
    assert_eq!(all["data"], json!([events[1], events[0]]), "newest first");
    let (_, page) = app.get("/api/tickets/events?limit=1&offset=1", Some(a)).await;
    assert_eq!((&page["data"], page["total"].as_i64()), (&json!([events[0]]), Some(2)));
    let (_, none) = app.get("/api/tickets/events", Some(&t.b_token)).await;
    assert_eq!(none["total"], 0);
    let id = events[0]["event_id"].as_str().unwrap();
    let path = format!("/api/tickets/events/{id}");
    let (s, got) = app.get(&path, Some(a)).await;
    assert_eq!((s, &got["data"]), (StatusCode::OK, &events[0]));
    assert_error(app.get(&path, Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/tickets/events/nope", Some(a)).await, 404, "NotFound");

    // Two tickets issued, one voided, one checked in.
    let mut tickets = Vec::new();
    for holder in ["Ada", "Grace"] {
        let (s, tk) = app.post("/api/tickets", Some(a), json!({ "event_id": id, "holder_name": holder })).await;
        assert_eq!(s, StatusCode::CREATED, "{tk}");
        tickets.push(tk["data"].clone());
    }
    let (s, _) = app.post(&format!("/api/tickets/{}/void", tickets[1]["ticket_id"].as_str().unwrap()), Some(a), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    let (s, checkin) =
        app.post("/api/tickets/check-in", Some(a), json!({ "qr_token": tickets[0]["qr_token"], "checked_in_by_persona_id": t.a["persona_id"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{checkin}");

    // A ticket read: its state, never its token.
    let ticket = format!("/api/tickets/{}", tickets[0]["ticket_id"].as_str().unwrap());
    let (s, got) = app.get(&ticket, Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{got}");
    assert_eq!((&got["data"]["status"], &got["data"]["holder_name"], &got["data"]["event_id"]), (&json!("used"), &json!("Ada"), &json!(id)));
    assert!(got["data"]["checked_in_at"].is_string() && got["data"].get("qr_token").is_none(), "{got}");
    assert_error(app.get(&ticket, Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/tickets/not-a-uuid", Some(a)).await, 404, "NotFound");

    // Attendance.
    let (s, ins) = app.get(&format!("{path}/check-ins"), Some(a)).await;
    assert_eq!((s, ins["total"].as_i64()), (StatusCode::OK, Some(1)), "{ins}");
    assert_eq!(ins["data"][0], checkin["data"]);
    let (_, other) = app.get(&format!("/api/tickets/events/{}/check-ins", events[1]["event_id"].as_str().unwrap()), Some(a)).await;
    assert_eq!(other["total"], 0);
    assert_error(app.get(&format!("{path}/check-ins"), Some(&t.b_token)).await, 404, "NotFound");

    // Changes: refusals first.
    let b = assert_error(patch(&app, &path, a, json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of name, starts_at, ends_at, venue, capacity"]));
    let b = assert_error(patch(&app, &path, a, json!({ "starts_at": "soon", "capacity": 0 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["starts_at must be an RFC 3339 timestamp", "capacity must be an integer from 1 to 1000000"]));
    let b = assert_error(patch(&app, &path, a, json!({ "ends_at": "2027-03-01T17:00:00Z" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["ends_at must be after starts_at"]));
    let b = assert_error(patch(&app, &path, a, json!({ "name": "" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["name must not be blank"]));
    assert_error(patch(&app, &path, &t.b_token, json!({ "venue": "Mine" })).await, 404, "NotFound");
    // The used ticket counts against the capacity, the voided one does not.
    let (s, one) = patch(&app, &path, a, json!({ "capacity": 1 })).await;
    assert_eq!((s, &one["data"]["capacity"]), (StatusCode::OK, &json!(1)), "{one}");
    let b = assert_error(app.post("/api/tickets", Some(a), json!({ "event_id": id })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the event's 1 tickets are issued"]));
    let (s, _) = app.post("/api/tickets", Some(&t.a_token), json!({ "event_id": events[1]["event_id"] })).await;
    assert_eq!(s, StatusCode::CREATED);

    let (s, moved) = patch(
        &app,
        &path,
        a,
        json!({ "name": "Launch party", "starts_at": "2027-03-02T18:00:00+01:00", "ends_at": "2027-03-02T23:00:00Z", "venue": "", "capacity": 10 }),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{moved}");
    let m = &moved["data"];
    assert_eq!(
        (&m["name"], &m["starts_at"], &m["ends_at"], &m["venue"], &m["capacity"]),
        (&json!("Launch party"), &json!("2027-03-02T17:00:00.000000Z"), &json!("2027-03-02T23:00:00.000000Z"), &Value::Null, &json!(10))
    );
    let b = assert_error(patch(&app, &path, a, json!({ "starts_at": "2027-03-03T00:00:00Z" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["ends_at must be after starts_at"]), "against the stored end");
    let (_, got) = app.get(&path, Some(a)).await;
    assert_eq!(got["data"], *m);
    let (s, tk) = app.post("/api/tickets", Some(a), json!({ "event_id": id })).await;
    assert_eq!(s, StatusCode::CREATED, "{tk}");
    let (s, _) = app.post("/api/tickets", Some(a), json!({ "event_id": id })).await;
    assert_eq!(s, StatusCode::CREATED);
    let b = assert_error(patch(&app, &path, a, json!({ "capacity": 2 })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["3 tickets of the event are issued: the capacity cannot be less"]));

    let tenant_events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(tenant_events.iter().filter(|e| *e == "event.event.updated.v1").count(), 2, "the two changes that passed");
}
db_test!(events_are_listed_read_and_changed_and_their_tickets_and_check_ins_read);
