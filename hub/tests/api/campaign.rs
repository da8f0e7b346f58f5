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

async fn patch(app: &TestApp, path: &str, token: &str, body: Value) -> (StatusCode, Value) {
    app.call(reqwest::Method::PATCH, path, Some(token), Some(body)).await
}

async fn campaigns_are_listed_changed_and_archived_read_only_with_their_journeys(app: TestApp) {
    let t = app.two_tenants("campaign-life").await;
    let a = t.a_token.as_str();
    let mut ids = Vec::new();
    for name in ["Spring", "Summer", "Autumn"] {
        let (s, c) = app.post("/api/campaigns", Some(a), json!({ "name": name })).await;
        assert_eq!((s, &c["data"]["status"], &c["data"]["archived_at"]), (StatusCode::CREATED, &json!("active"), &Value::Null), "{c}");
        ids.push(c["data"]["campaign_id"].as_str().unwrap().to_string());
    }
    let names = |v: &Value| v["data"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let (s, all) = app.get("/api/campaigns", Some(a)).await;
    assert_eq!((s, all["total"].as_i64()), (StatusCode::OK, Some(3)));
    assert_eq!(names(&all), ["Autumn", "Summer", "Spring"], "newest first");
    assert!(all["data"][0].get("journeys").is_none(), "a list carries no journeys: {all}");
    let (_, page) = app.get("/api/campaigns?limit=1&offset=1", Some(a)).await;
    assert_eq!((names(&page), page["total"].as_i64()), (vec!["Summer".to_string()], Some(3)));
    let b = assert_error(app.get("/api/campaigns?status=paused", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["status must be one of: active, archived"]));
    let (_, none) = app.get("/api/campaigns", Some(&t.b_token)).await;
    assert_eq!(none["total"], 0);

    // Changes: refusals, then what is given replaces, the rest stays.
    let path = format!("/api/campaigns/{}", ids[0]);
    let b = assert_error(patch(&app, &path, a, json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of name, description, attributes"]));
    let b = assert_error(patch(&app, &path, a, json!({ "name": " ", "attributes": 1 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["attributes must be a JSON object"]));
    let b = assert_error(patch(&app, &path, a, json!({ "name": " " })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["name must not be blank"]));
    let b = assert_error(patch(&app, &path, a, json!({ "name": "Summer" })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["a campaign of this tenant is named Summer already"]));
    assert_error(patch(&app, &path, &t.b_token, json!({ "name": "Mine" })).await, 404, "NotFound");
    let (s, changed) = patch(&app, &path, a, json!({ "name": "Spring sale", "description": "seasonal", "attributes": { "budget": 5 } })).await;
    assert_eq!(s, StatusCode::OK, "{changed}");
    let c = &changed["data"];
    assert_eq!((&c["name"], &c["description"], &c["attributes"]), (&json!("Spring sale"), &json!("seasonal"), &json!({ "budget": 5 })));
    let (s, same) = patch(&app, &path, a, json!({ "name": "Spring sale", "description": "" })).await;
    assert_eq!((s, &same["data"]["description"], &same["data"]["attributes"]), (StatusCode::OK, &Value::Null, &json!({ "budget": 5 })), "its own name");

    // Journeys: changed and deleted while the campaign is active.
    let (s, j) = app.post(&format!("{path}/journeys"), Some(a), json!({ "name": "Onboarding", "steps": [{ "wait": "1d" }] })).await;
    assert_eq!(s, StatusCode::CREATED, "{j}");
    let journey = format!("{path}/journeys/{}", j["data"]["journey_id"].as_str().unwrap());
    let (s, other) = app.post(&format!("/api/campaigns/{}/journeys", ids[1]), Some(a), json!({ "name": "Other" })).await;
    assert_eq!(s, StatusCode::CREATED, "{other}");
    let b = assert_error(patch(&app, &journey, a, json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of name, steps"]));
    let b = assert_error(patch(&app, &journey, a, json!({ "steps": { "a": 1 } })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["steps must be an array"]));
    let steps = json!([{ "type": "email" }, "anything", [1, null]]);
    let (s, moved) = patch(&app, &journey, a, json!({ "steps": steps })).await;
    assert_eq!((s, &moved["data"]["steps"], &moved["data"]["name"]), (StatusCode::OK, &steps, &json!("Onboarding")), "{moved}");
    let (s, renamed) = patch(&app, &journey, a, json!({ "name": "" })).await;
    assert_eq!((s, &renamed["data"]["name"], &renamed["data"]["steps"]), (StatusCode::OK, &Value::Null, &steps));
    // A journey is found under its own campaign only.
    let elsewhere = format!("/api/campaigns/{}/journeys/{}", ids[1], j["data"]["journey_id"].as_str().unwrap());
    assert_error(patch(&app, &elsewhere, a, json!({ "name": "x" })).await, 404, "NotFound");
    assert_error(app.call(reqwest::Method::DELETE, &elsewhere, Some(a), None).await, 404, "NotFound");
    assert_error(patch(&app, &journey, &t.b_token, json!({ "name": "x" })).await, 404, "NotFound");
    let other_path = format!("/api/campaigns/{}/journeys/{}", ids[1], other["data"]["journey_id"].as_str().unwrap());
    let (s, gone) = app.call(reqwest::Method::DELETE, &other_path, Some(a), None).await;
    assert_eq!((s, &gone["data"]), (StatusCode::OK, &json!({ "journey_id": other["data"]["journey_id"], "deleted": true })));
    assert_error(app.call(reqwest::Method::DELETE, &other_path, Some(a), None).await, 404, "NotFound");
    let (_, summer) = app.get(&format!("/api/campaigns/{}", ids[1]), Some(a)).await;
    assert_eq!(summer["data"]["journeys"], json!([]));

    // Archived: read-only, and archiving again answers it as it is.
    assert_error(app.post(&format!("{path}/archive"), Some(&t.b_token), json!({})).await, 404, "NotFound");
    let (s, archived) = app.post(&format!("{path}/archive"), Some(a), json!({})).await;
    assert_eq!((s, &archived["data"]["status"]), (StatusCode::OK, &json!("archived")), "{archived}");
    assert!(archived["data"]["archived_at"].is_string());
    let (s, again) = app.post(&format!("{path}/archive"), Some(a), json!({})).await;
    assert_eq!((s, &again["data"]), (StatusCode::OK, &archived["data"]));
    for res in [
        patch(&app, &path, a, json!({ "description": "late" })).await,
        patch(&app, &journey, a, json!({ "name": "late" })).await,
        app.call(reqwest::Method::DELETE, &journey, Some(a), None).await,
        app.post(&format!("{path}/journeys"), Some(a), json!({})).await,
    ] {
        let b = assert_error(res, 409, "Conflict");
        assert_eq!(b["details"], json!(["the campaign is archived: only an active campaign can be changed"]));
    }
    let (_, got) = app.get(&path, Some(a)).await;
    assert_eq!((&got["data"]["status"], got["data"]["journeys"].as_array().unwrap().len()), (&json!("archived"), 1));
    let (_, only) = app.get("/api/campaigns?status=archived", Some(a)).await;
    assert_eq!((names(&only), only["total"].as_i64()), (vec!["Spring sale".to_string()], Some(1)));
    let (_, active) = app.get("/api/campaigns?status=active", Some(a)).await;
    assert_eq!(names(&active), ["Autumn", "Summer"]);

    let events = app.events_of(&t.a["tenant_id"]).await;
    let ours: Vec<&str> = events.iter().map(String::as_str).filter(|e| e.starts_with("campaign.") && !e.ends_with(".created.v1")).collect();
    assert_eq!(
        ours,
        [
            "campaign.campaign.updated.v1",
            "campaign.campaign.updated.v1",
            "campaign.journey.updated.v1",
            "campaign.journey.updated.v1",
            "campaign.journey.deleted.v1",
            "campaign.campaign.archived.v1"
        ]
    );
}
db_test!(campaigns_are_listed_changed_and_archived_read_only_with_their_journeys);
