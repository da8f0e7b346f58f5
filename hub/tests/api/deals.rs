//! sdk-crm deals: created open about a contact, a company or both, with an
//! amount in minor units and its ISO 4217 currency, listed by stage, owner
//! and contact, changed while open, and won or lost for good.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn patch(app: &TestApp, path: &str, token: &str, body: Value) -> (StatusCode, Value) {
    app.call(Method::PATCH, path, Some(token), Some(body)).await
}

async fn deals_are_created_listed_changed_and_won_or_lost(app: TestApp) {
    let t = app.two_tenants("deals").await;
    let a = t.a_token.as_str();
    let (s, c) = app.post("/api/crm/contacts", Some(a), json!({ "name": "Ada Buyer" })).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let contact = c["data"]["contact_id"].as_str().unwrap().to_string();
    let (_, p) = app.post("/api/personas", Some(a), json!({ "kind": "human" })).await;
    let seller = p["data"]["persona_id"].as_str().unwrap().to_string();

    let (s, d) = app
        .post(
            "/api/crm/deals",
            Some(a),
            json!({ "name": "Fleet renewal", "contact_id": contact, "amount_minor": 1_250_000, "currency": "EUR", "owner_persona_id": seller }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{d}");
    let deal = d["data"].clone();
    let id = deal["deal_id"].as_str().unwrap().to_string();
    assert_eq!(
        (
            deal["name"].as_str(),
            deal["contact_id"].as_str(),
            deal["company"].clone(),
            deal["amount_minor"].as_i64(),
            deal["currency"].as_str(),
            deal["stage"].as_str(),
            deal["owner_persona_id"].as_str(),
            deal["closed_at"].clone(),
        ),
        (Some("Fleet renewal"), Some(contact.as_str()), Value::Null, Some(1_250_000), Some("EUR"), Some("open"), Some(seller.as_str()), Value::Null)
    );
    let (s, d) = app.post("/api/crm/deals", Some(a), json!({ "name": "Pilot", "company": "Acme" })).await;
    assert_eq!(s, StatusCode::CREATED, "{d}");
    let pilot = d["data"]["deal_id"].as_str().unwrap().to_string();
    assert_eq!((d["data"]["amount_minor"].clone(), d["data"]["currency"].clone(), d["data"]["contact_id"].clone()), (Value::Null, Value::Null, Value::Null));

    // What a deal must be.
    let b = assert_error(app.post("/api/crm/deals", Some(a), json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["name is required"]));
    let b = assert_error(app.post("/api/crm/deals", Some(a), json!({ "name": "x", "amount_minor": 5 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["a deal needs a contact_id or a company", "currency is required with amount_minor"]));
    let b = assert_error(app.post("/api/crm/deals", Some(a), json!({ "name": "x", "company": "c", "currency": "EURO" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["currency must be an ISO 4217 code (EUR, USD, ...)"]));
    let b = assert_error(
        app.post("/api/crm/deals", Some(a), json!({ "name": "x", "company": "c", "amount_minor": -1, "currency": "EUR" })).await,
        400,
        "ValidationError",
    );
    assert!(b["details"][0].as_str().unwrap().starts_with("amount_minor must be"), "{b}");
    let b = assert_error(
        app.post("/api/crm/deals", Some(a), json!({ "name": "x", "contact_id": "nope", "owner_persona_id": seller })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["contact_id must be a UUID"]));
    // Another tenant's contact and persona are none of this tenant's.
    let (_, bc) = app.post("/api/crm/contacts", Some(&t.b_token), json!({ "name": "B's" })).await;
    let b = assert_error(
        app.post("/api/crm/deals", Some(a), json!({ "name": "x", "contact_id": bc["data"]["contact_id"], "owner_persona_id": t.b["persona_id"] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["contact_id is not a contact of this tenant", "owner_persona_id is not a persona of this tenant"]));

    // Read and listed, newest first, by stage, owner and contact.
    let (s, r) = app.get(&format!("/api/crm/deals/{id}"), Some(a)).await;
    assert_eq!((s, &r["data"]), (StatusCode::OK, &deal), "{r}");
    assert_error(app.get(&format!("/api/crm/deals/{id}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/crm/deals/not-a-deal", Some(a)).await, 404, "NotFound");
    let ids = |l: &Value| l["data"].as_array().unwrap().iter().map(|d| d["deal_id"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let (s, l) = app.get("/api/crm/deals", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    assert_eq!((ids(&l), l["total"].as_i64()), (vec![pilot.clone(), id.clone()], Some(2)));
    let (_, l) = app.get(&format!("/api/crm/deals?owner_persona_id={seller}&stage=open"), Some(a)).await;
    assert_eq!((ids(&l), l["total"].as_i64()), (vec![id.clone()], Some(1)));
    let (_, l) = app.get(&format!("/api/crm/deals?contact_id={contact}"), Some(a)).await;
    assert_eq!(ids(&l), vec![id.clone()]);
    let (_, l) = app.get("/api/crm/deals?limit=1&offset=1", Some(a)).await;
    assert_eq!((ids(&l), l["total"].as_i64()), (vec![id.clone()], Some(2)));
    let (_, l) = app.get("/api/crm/deals", Some(&t.b_token)).await;
    assert_eq!(l["total"], 0);
    let b = assert_error(app.get("/api/crm/deals?stage=pending&contact_id=7", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["stage must be one of: open, won, lost", "contact_id must be a UUID"]));

    // Changed while open: what is given replaces, the rest stays.
    let (s, u) = patch(&app, &format!("/api/crm/deals/{id}"), a, json!({ "amount_minor": 990_000, "company": "Acme Fleet" })).await;
    assert_eq!(s, StatusCode::OK, "{u}");
    assert_eq!(
        (u["data"]["amount_minor"].as_i64(), u["data"]["currency"].as_str(), u["data"]["company"].as_str(), u["data"]["name"].as_str()),
        (Some(990_000), Some("EUR"), Some("Acme Fleet"), Some("Fleet renewal"))
    );
    let b = assert_error(patch(&app, &format!("/api/crm/deals/{id}"), a, json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of name, contact_id, company, amount_minor, currency, owner_persona_id"]));
    let b = assert_error(patch(&app, &format!("/api/crm/deals/{pilot}"), a, json!({ "company": "" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["a deal needs a contact_id or a company"]));
    let b = assert_error(patch(&app, &format!("/api/crm/deals/{pilot}"), a, json!({ "amount_minor": 10 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["currency is required with amount_minor"]));
    let b = assert_error(patch(&app, &format!("/api/crm/deals/{pilot}"), a, json!({ "owner_persona_id": t.b["persona_id"] })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["owner_persona_id is not a persona of this tenant"]));
    assert_error(patch(&app, &format!("/api/crm/deals/{id}"), &t.b_token, json!({ "name": "" })).await, 404, "NotFound");

    // Won, for good; lost, for good.
    assert_error(app.post(&format!("/api/crm/deals/{id}/won"), Some(&t.b_token), json!({})).await, 404, "NotFound");
    let b = assert_error(app.post(&format!("/api/crm/deals/{id}/won"), Some(a), json!({ "reason": "r".repeat(2001) })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["reason must be at most 2000 characters"]));
    let (s, w) = app.post(&format!("/api/crm/deals/{id}/won"), Some(a), json!({ "reason": "signed" })).await;
    assert_eq!(s, StatusCode::OK, "{w}");
    assert_eq!((w["data"]["stage"].as_str(), w["data"]["stage_reason"].as_str()), (Some("won"), Some("signed")));
    assert!(w["data"]["closed_at"].as_str().is_some_and(|c| c == w["data"]["updated_at"].as_str().unwrap()), "{w}");
    let b = assert_error(app.post(&format!("/api/crm/deals/{id}/won"), Some(a), json!({})).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the deal is won: only an open deal can be won"]));
    let b = assert_error(app.post(&format!("/api/crm/deals/{id}/lost"), Some(a), json!({})).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the deal is won: only an open deal can be lost"]));
    let b = assert_error(patch(&app, &format!("/api/crm/deals/{id}"), a, json!({ "name": "late" })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the deal is won: only an open deal can be changed"]));
    // A body is optional.
    let res = app.client.post(format!("{}/api/crm/deals/{pilot}/lost", app.base)).bearer_auth(a).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let (_, l) = app.get("/api/crm/deals?stage=lost", Some(a)).await;
    assert_eq!((ids(&l), l["data"][0]["stage_reason"].clone()), (vec![pilot.clone()], Value::Null));
    assert_error(app.post("/api/crm/deals/not-a-deal/lost", Some(a), json!({})).await, 404, "NotFound");

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |n: &str| events.iter().filter(|e| *e == n).count();
    assert_eq!([count("crm.deal.created.v1"), count("crm.deal.updated.v1"), count("crm.deal.won.v1"), count("crm.deal.lost.v1")], [2, 1, 1, 1]);
    let payload: String = sqlx::query_scalar("SELECT payload FROM audit_entry WHERE tenant_id = $1 AND event_type = 'crm.deal.won.v1'")
        .bind(t.a["tenant_id"].as_str().unwrap())
        .fetch_one(&app.state().db.read)
        .await
        .unwrap();
    let payload: Value = serde_json::from_str(&payload).unwrap();
    assert_eq!(
        (payload["deal_id"].as_str(), payload["stage"].as_str(), payload["amount_minor"].as_i64(), payload["currency"].as_str(), payload.get("reason")),
        (Some(id.as_str()), Some("won"), Some(990_000), Some("EUR"), None)
    );
}
db_test!(deals_are_created_listed_changed_and_won_or_lost);
