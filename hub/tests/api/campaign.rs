//! sdk-campaign: campaigns and their journeys of opaque ordered steps.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn journeys_keep_their_steps_as_given_under_a_campaign_of_the_tenant(app: TestApp) {
    let t = app.two_tenants("campaign").await;
    let a = t.a_token.as_str();
    let (s, c) = app.post("/api/campaigns", Some(a), json!({ "name": "Spring", "description": "seasonal", "attributes": { "budget": 100 } })).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    assert_eq!((&c["data"]["name"], &c["data"]["description"], &c["data"]["attributes"]), (&json!("Spring"), &json!("seasonal"), &json!({ "budget": 100 })));
    let id = c["data"]["campaign_id"].as_str().unwrap();

    let steps = json!([{ "type": "email", "template": "welcome", "extra": [1, { "x": null }] }, { "type": "wait", "days": 3 }, "anything"]);
    let (s, j) = app.post(&format!("/api/campaigns/{id}/journeys"), Some(a), json!({ "name": "Onboarding", "steps": steps })).await;
    assert_eq!(s, StatusCode::CREATED, "{j}");
    assert_eq!((&j["data"]["steps"], &j["data"]["campaign_id"], &j["data"]["name"]), (&steps, &json!(id), &json!("Onboarding")));
    let (s, empty) = app.post(&format!("/api/campaigns/{id}/journeys"), Some(a), json!({})).await;
    assert_eq!((s, &empty["data"]["steps"], &empty["data"]["name"]), (StatusCode::CREATED, &json!([]), &Value::Null), "steps default to []");

    let (s, got) = app.get(&format!("/api/campaigns/{id}"), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{got}");
    let journeys = got["data"]["journeys"].as_array().unwrap();
    assert_eq!(journeys.len(), 2);
    assert_eq!((&journeys[0]["steps"], &journeys[1]["journey_id"]), (&steps, &empty["data"]["journey_id"]), "oldest first");

    // Unknown, non-UUID and another tenant's campaigns are not found.
    let unknown = "0190a000-0000-7000-8000-000000000000";
    assert_error(app.post(&format!("/api/campaigns/{unknown}/journeys"), Some(a), json!({})).await, 404, "NotFound");
    assert_error(app.post("/api/campaigns/spring/journeys", Some(a), json!({})).await, 404, "NotFound");
    assert_error(app.post(&format!("/api/campaigns/{id}/journeys"), Some(&t.b_token), json!({})).await, 404, "NotFound");
    assert_error(app.get(&format!("/api/campaigns/{id}"), Some(&t.b_key)).await, 404, "NotFound");
    assert_error(app.get("/api/campaigns/nope", Some(a)).await, 404, "NotFound");

    let b = assert_error(app.post(&format!("/api/campaigns/{id}/journeys"), Some(a), json!({ "steps": { "a": 1 } })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["steps must be an array"]));
    let b = assert_error(
        app.post(&format!("/api/campaigns/{id}/journeys"), Some(a), json!({ "name": 3, "steps": vec![json!({}); 501] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["name must be a string", "steps must hold at most 500 items"]));
    let b = assert_error(app.post(&format!("/api/campaigns/{id}/journeys"), Some(a), json!([1])).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["request body must be a JSON object"]));
    let b = assert_error(app.post("/api/campaigns", Some(a), json!({ "name": "Spring" })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["a campaign of this tenant is named Spring already"]));
    let (s, _) = app.post("/api/campaigns", Some(&t.b_token), json!({ "name": "Spring" })).await;
    assert_eq!(s, StatusCode::CREATED, "another tenant may use the name");
    let b = assert_error(app.post("/api/campaigns", Some(a), json!({ "attributes": 1 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["name is required", "attributes must be a JSON object"]));

    let events = app.events_of(&t.a["tenant_id"]).await;
    let ours: Vec<&str> = events.iter().map(String::as_str).filter(|e| e.starts_with("campaign.")).collect();
    assert_eq!(ours, ["campaign.campaign.created.v1", "campaign.journey.created.v1", "campaign.journey.created.v1"]);
}
db_test!(journeys_keep_their_steps_as_given_under_a_campaign_of_the_tenant);
