//! sdk-handoff: deals of the tenant's CRM handed between personas of the
//! tenant, moved along pending -> accepted | declined, accepted ->
//! completed, and listed most recently updated first with the tenant_id
//! query required.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

/// A deal of the token's tenant (sdk-crm): what a handoff hands over.
pub async fn deal(app: &TestApp, token: &str) -> String {
    let (s, d) = app.post("/api/crm/deals", Some(token), json!({ "name": "handed", "company": "Acme" })).await;
    assert_eq!(s, StatusCode::CREATED, "{d}");
    d["data"]["deal_id"].as_str().unwrap().to_string()
}

async fn status(app: &TestApp, token: &str, handoff: &str, body: Value) -> (StatusCode, Value) {
    app.post(&format!("/api/handoffs/{handoff}/status"), Some(token), body).await
}

async fn handoffs_move_through_their_state_machine_and_list_by_last_update(app: TestApp) {
    let t = app.two_tenants("handoffs").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].as_str().unwrap().to_string());
    let (_, p) = app.post("/api/personas", Some(a), json!({ "kind": "service" })).await;
    let (from, to) = (t.a["persona_id"].clone(), p["data"]["persona_id"].clone());
    let deal = deal(&app, a).await;
    let (s, h) = app.post("/api/handoffs", Some(a), json!({ "deal_id": deal, "from_persona_id": from, "to_persona_id": to, "notes": "warm lead" })).await;
    assert_eq!(s, StatusCode::CREATED, "{h}");
    assert_eq!(
        (h["data"]["status"].as_str(), h["data"]["notes"].as_str(), h["data"]["deal_id"].as_str()),
        (Some("pending"), Some("warm lead"), Some(deal.as_str()))
    );
    let first = h["data"]["handoff_id"].as_str().unwrap().to_string();
    let other = self::deal(&app, a).await;
    let (_, h) = app.post("/api/handoffs", Some(a), json!({ "deal_id": other, "from_persona_id": to, "to_persona_id": from })).await;
    let second = h["data"]["handoff_id"].as_str().unwrap().to_string();

    let b = assert_error(
        app.post("/api/handoffs", Some(a), json!({ "deal_id": "deal-9", "from_persona_id": from, "to_persona_id": from, "notes": "x".repeat(4001) })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["deal_id must be a UUID", "notes must be at most 4000 characters"]));
    // Matching its schema, the body still hands the deal to another persona.
    let b = assert_error(
        app.post("/api/handoffs", Some(a), json!({ "deal_id": deal, "from_persona_id": from, "to_persona_id": from })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["to_persona_id must differ from from_persona_id"]));
    let b = assert_error(app.post("/api/handoffs", Some(a), json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["deal_id is required", "from_persona_id is required", "to_persona_id is required"]));
    let b = assert_error(
        app.post("/api/handoffs", Some(a), json!({ "deal_id": deal, "from_persona_id": t.b["persona_id"], "to_persona_id": uuid::Uuid::now_v7().to_string() }))
            .await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["from_persona_id is not a persona of this tenant", "to_persona_id is not a persona of this tenant"]));
    // The deal is one of the tenant's CRM: another tenant's, or none, is 400.
    let b_deal = self::deal(&app, &t.b_token).await;
    for unknown in [b_deal, uuid::Uuid::now_v7().to_string()] {
        let b = assert_error(
            app.post("/api/handoffs", Some(a), json!({ "deal_id": unknown, "from_persona_id": from, "to_persona_id": t.b["persona_id"] })).await,
            400,
            "ValidationError",
        );
        assert_eq!(b["details"], json!(["deal_id is not a deal of this tenant", "to_persona_id is not a persona of this tenant"]));
    }

    // pending -> accepted -> completed; nothing after that.
    let b = assert_error(status(&app, a, &first, json!({ "status": "completed" })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["a pending handoff cannot become completed"]));
    let b = assert_error(status(&app, a, &first, json!({ "status": "lost", "reason": "r".repeat(2001) })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["status must be one of: pending, accepted, declined, completed", "reason must be at most 2000 characters"]));
    let (s, h) = status(&app, a, &first, json!({ "status": "accepted", "reason": "on it" })).await;
    assert_eq!((s, h["data"]["status"].as_str(), h["data"]["status_reason"].as_str()), (StatusCode::OK, Some("accepted"), Some("on it")));
    assert!(h["data"]["updated_at"].as_str().unwrap() > h["data"]["created_at"].as_str().unwrap());
    assert_error(status(&app, a, &first, json!({ "status": "accepted" })).await, 409, "Conflict");
    assert_error(status(&app, a, &first, json!({ "status": "declined" })).await, 409, "Conflict");
    let (s, h) = status(&app, a, &first, json!({ "status": "completed" })).await;
    assert_eq!((s, h["data"]["status"].as_str(), h["data"]["status_reason"].clone()), (StatusCode::OK, Some("completed"), Value::Null));
    assert_error(status(&app, a, &first, json!({ "status": "pending" })).await, 409, "Conflict");
    // pending -> declined, final.
    let (s, _) = status(&app, a, &second, json!({ "status": "declined" })).await;
    assert_eq!(s, StatusCode::OK);
    assert_error(status(&app, a, &second, json!({ "status": "accepted" })).await, 409, "Conflict");
    assert_error(status(&app, &t.b_token, &first, json!({ "status": "accepted" })).await, 404, "NotFound");
    assert_error(status(&app, a, "nope", json!({ "status": "accepted" })).await, 404, "NotFound");

    // The declined one was updated last.
    let (s, l) = app.get(&format!("/api/handoffs?tenant_id={tenant}"), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    let ids: Vec<&str> = l["data"].as_array().unwrap().iter().map(|h| h["handoff_id"].as_str().unwrap()).collect();
    assert_eq!((ids, l["total"].as_i64()), (vec![second.as_str(), first.as_str()], Some(2)));
    let (_, l) = app.get(&format!("/api/handoffs?tenant_id={tenant}&status=completed&deal_id={deal}"), Some(a)).await;
    assert_eq!((l["data"][0]["handoff_id"].as_str(), l["total"].as_i64()), (Some(first.as_str()), Some(1)));
    let (_, l) = app.get(&format!("/api/handoffs?tenant_id={tenant}&status=pending"), Some(a)).await;
    assert_eq!(l["total"], 0);
    let (_, l) = app.get(&format!("/api/handoffs?tenant_id={tenant}&limit=1&offset=1"), Some(a)).await;
    assert_eq!((l["data"][0]["handoff_id"].as_str(), l["total"].as_i64()), (Some(first.as_str()), Some(2)));
    let b = assert_error(app.get("/api/handoffs", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["tenant_id is required"]));
    assert_error(app.get(&format!("/api/handoffs?tenant_id={}", t.b["tenant_id"].as_str().unwrap()), Some(a)).await, 403, "TenantMismatch");
    let b = assert_error(app.get(&format!("/api/handoffs?tenant_id={tenant}&status=open&deal_id=7"), Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["status must be one of: pending, accepted, declined, completed", "deal_id must be a UUID"]));
    let b = assert_error(app.get(&format!("/api/handoffs?tenant_id={tenant}&limit=-1"), Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["limit must be an integer from 1 to 500"]));

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |n: &str| events.iter().filter(|e| *e == n).count();
    assert_eq!(
        [
            count("handoff.handoff.created.v1"),
            count("handoff.handoff.accepted.v1"),
            count("handoff.handoff.completed.v1"),
            count("handoff.handoff.declined.v1")
        ],
        [2, 1, 1, 1]
    );
}
db_test!(handoffs_move_through_their_state_machine_and_list_by_last_update);

async fn a_handoff_is_read_by_its_id(app: TestApp) {
    let t = app.two_tenants("handoff-one").await;
    let a = t.a_token.as_str();
    let (_, p) = app.post("/api/personas", Some(a), json!({ "kind": "service" })).await;
    let deal = deal(&app, a).await;
    let (s, h) = app
        .post(
            "/api/handoffs",
            Some(a),
            json!({ "deal_id": deal, "from_persona_id": t.a["persona_id"], "to_persona_id": p["data"]["persona_id"], "notes": "hot" }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{h}");
    let id = h["data"]["handoff_id"].as_str().unwrap().to_string();
    let (s, r) = app.get(&format!("/api/handoffs/{id}"), Some(a)).await;
    assert_eq!((s, &r["data"]), (StatusCode::OK, &h["data"]), "{r}");
    let (s, _) = status(&app, a, &id, json!({ "status": "accepted", "reason": "on it" })).await;
    assert_eq!(s, StatusCode::OK);
    let (_, r) = app.get(&format!("/api/handoffs/{id}"), Some(a)).await;
    assert_eq!(
        (r["data"]["status"].as_str(), r["data"]["status_reason"].as_str(), r["data"]["deal_id"].as_str()),
        (Some("accepted"), Some("on it"), Some(deal.as_str()))
    );
    assert_error(app.get(&format!("/api/handoffs/{id}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/handoffs/not-an-id", Some(a)).await, 404, "NotFound");
    assert_error(app.get(&format!("/api/handoffs/{}", uuid::Uuid::now_v7()), Some(a)).await, 404, "NotFound");
}
db_test!(a_handoff_is_read_by_its_id);
