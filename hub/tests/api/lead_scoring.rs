//! sdk-lead-scoring: models numbered per vertical, one active per (tenant,
//! vertical), resolved with both query parameters required.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn model(app: &TestApp, token: &str, body: Value) -> Value {
    let (s, m) = app.post("/api/lead-scoring/models", Some(token), body).await;
    assert_eq!(s, StatusCode::CREATED, "{m}");
    m["data"].clone()
}

async fn one_model_is_active_per_vertical_and_resolved_by_tenant_and_vertical(app: TestApp) {
    let t = app.two_tenants("scoring").await;
    let a = t.a_token.as_str();
    let tenant = t.a["tenant_id"].as_str().unwrap();
    let v1 = model(&app, a, json!({ "vertical": "saas", "name": "First", "weights": { "visited_pricing": 20, "demo_requested": 35.5 } })).await;
    assert_eq!((&v1["version"], &v1["active"], &v1["threshold"], &v1["activated_at"]), (&json!(1), &json!(false), &json!(50), &Value::Null));
    let v2 = model(&app, a, json!({ "vertical": "saas", "name": "Second", "weights": { "demo_requested": 50 }, "threshold": 70 })).await;
    assert_eq!((&v2["version"], &v2["threshold"]), (&json!(2), &json!(70)));
    let other = model(&app, a, json!({ "vertical": "real_estate", "name": "Homes", "weights": { "viewings": 10 } })).await;
    assert_eq!(other["version"], 1, "numbered per vertical");

    let active = format!("/api/lead-scoring/models/active?tenant_id={tenant}&vertical=saas");
    let b = assert_error(app.get(&active, Some(a)).await, 404, "NotFound");
    assert_eq!(b["details"], json!(["no active model"]));
    let (s, on) = app.post(&format!("/api/lead-scoring/models/{}/activate", v1["model_id"].as_str().unwrap()), Some(a), json!({})).await;
    assert_eq!((s, &on["data"]["active"]), (StatusCode::OK, &json!(true)), "{on}");
    let (s, got) = app.get(&active, Some(a)).await;
    assert_eq!(
        (s, &got["data"]["model_id"], &got["data"]["weights"]),
        (StatusCode::OK, &v1["model_id"], &json!({ "visited_pricing": 20, "demo_requested": 35.5 }))
    );
    // Activating the second retires the first; activating it again changes nothing.
    let v2_activate = format!("/api/lead-scoring/models/{}/activate", v2["model_id"].as_str().unwrap());
    let (s, _) = app.post(&v2_activate, Some(a), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    let (s, again) = app.post(&v2_activate, Some(a), json!({})).await;
    assert_eq!((s, &again["data"]["active"]), (StatusCode::OK, &json!(true)));
    let (_, got) = app.get(&active, Some(a)).await;
    assert_eq!(got["data"]["model_id"], v2["model_id"]);
    let still: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM lead_scoring_model WHERE tenant_id = $1 AND active = 1")
        .bind(tenant)
        .fetch_one(&app.state().db.read)
        .await
        .unwrap();
    assert_eq!(still, 1, "one active model: the other vertical has none yet");
    let b = assert_error(app.get(&format!("/api/lead-scoring/models/active?tenant_id={tenant}&vertical=real_estate"), Some(a)).await, 404, "NotFound");
    assert_eq!(b["details"], json!(["no active model"]));

    let b = assert_error(app.get("/api/lead-scoring/models/active", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["tenant_id is required", "vertical is required"]));
    let b = assert_error(app.get(&format!("/api/lead-scoring/models/active?tenant_id={tenant}"), Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["vertical is required"]));
    assert_error(app.get(&active, Some(&t.b_token)).await, 403, "TenantMismatch");
    let b_tenant = t.b["tenant_id"].as_str().unwrap();
    let b = assert_error(app.get(&format!("/api/lead-scoring/models/active?tenant_id={b_tenant}&vertical=saas"), Some(&t.b_token)).await, 404, "NotFound");
    assert_eq!(b["details"], json!(["no active model"]), "B has none of A's models");
    assert_error(app.post(&v2_activate, Some(&t.b_token), json!({})).await, 404, "NotFound");
    assert_error(app.post("/api/lead-scoring/models/first/activate", Some(a), json!({})).await, 404, "NotFound");

    let b = assert_error(
        app.post("/api/lead-scoring/models", Some(a), json!({ "vertical": "SaaS!", "weights": { "a": "high" }, "threshold": 101 })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["name is required", "weights.a must be a number from -1000000 to 1000000", "threshold must be an integer from 0 to 100"]));
    let b = assert_error(
        app.post("/api/lead-scoring/models", Some(a), json!({ "vertical": "SaaS!", "name": "x", "weights": { "": 1, "b": 2 }, "threshold": 100 })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["vertical must be 1 to 64 of a-z, 0-9, '.', '_', '-'", "weights. must be a number named by 1 to 64 characters"]));
    let b =
        assert_error(app.post("/api/lead-scoring/models", Some(a), json!({ "vertical": "saas", "name": "x", "weights": {} })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["weights must be an object of 1 to 200 numbers"]));

    let events = app.events_of(&t.a["tenant_id"]).await;
    let ours: Vec<&str> = events.iter().map(String::as_str).filter(|e| e.starts_with("crm.scoring_model")).collect();
    assert_eq!(
        ours,
        [
            "crm.scoring_model.created.v1",
            "crm.scoring_model.created.v1",
            "crm.scoring_model.created.v1",
            "crm.scoring_model.activated.v1",
            "crm.scoring_model.activated.v1"
        ]
    );
}
db_test!(one_model_is_active_per_vertical_and_resolved_by_tenant_and_vertical);

async fn every_version_is_listed_read_and_a_vertical_can_be_left_without_a_model(app: TestApp) {
    let t = app.two_tenants("scoring-life").await;
    let a = t.a_token.as_str();
    let tenant = t.a["tenant_id"].as_str().unwrap();
    let v1 = model(&app, a, json!({ "vertical": "saas", "name": "First", "weights": { "demo": 10 } })).await;
    let v2 = model(&app, a, json!({ "vertical": "saas", "name": "Second", "weights": { "demo": 20 }, "threshold": 60 })).await;
    let homes = model(&app, a, json!({ "vertical": "real_estate", "name": "Homes", "weights": { "viewings": 5 } })).await;
    let v2_id = v2["model_id"].as_str().unwrap();
    let (s, on) = app.post(&format!("/api/lead-scoring/models/{v2_id}/activate"), Some(a), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{on}");

    let (s, list) = app.get("/api/lead-scoring/models", Some(a)).await;
    assert_eq!((s, list["total"].as_i64()), (StatusCode::OK, Some(3)), "{list}");
    let ids: Vec<&Value> = list["data"].as_array().unwrap().iter().map(|m| &m["model_id"]).collect();
    assert_eq!(ids, [&homes["model_id"], &v2["model_id"], &v1["model_id"]], "newest first");
    let (_, saas) = app.get("/api/lead-scoring/models?vertical=saas", Some(a)).await;
    assert_eq!(saas["total"], 2);
    let (_, inactive) = app.get("/api/lead-scoring/models?vertical=saas&active=false", Some(a)).await;
    assert_eq!((inactive["total"].as_i64(), &inactive["data"][0]["model_id"]), (Some(1), &v1["model_id"]), "the inactive version is found");
    let (_, active) = app.get("/api/lead-scoring/models?active=true", Some(a)).await;
    assert_eq!((active["total"].as_i64(), &active["data"][0]["model_id"]), (Some(1), &v2["model_id"]));
    let (_, page) = app.get("/api/lead-scoring/models?limit=1&offset=1", Some(a)).await;
    assert_eq!((page["total"].as_i64(), &page["data"][0]["model_id"]), (Some(3), &v2["model_id"]));
    assert_error(app.get("/api/lead-scoring/models?active=maybe", Some(a)).await, 400, "ValidationError");
    let (_, theirs) = app.get("/api/lead-scoring/models", Some(&t.b_token)).await;
    assert_eq!(theirs["total"], 0);

    let (s, one) = app.get(&format!("/api/lead-scoring/models/{}", v1["model_id"].as_str().unwrap()), Some(a)).await;
    assert_eq!((s, &one["data"]), (StatusCode::OK, &v1));
    assert_error(app.get(&format!("/api/lead-scoring/models/{v2_id}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/lead-scoring/models/0190a000-0000-7000-8000-000000000000", Some(a)).await, 404, "NotFound");
    assert_error(app.get("/api/lead-scoring/models/first", Some(a)).await, 404, "NotFound");

    // Deactivating the active model leaves the vertical without one.
    let deactivate = format!("/api/lead-scoring/models/{v2_id}/deactivate");
    assert_error(app.post(&deactivate, Some(&t.b_token), json!({})).await, 404, "NotFound");
    let (s, off) = app.post(&deactivate, Some(a), json!({})).await;
    assert_eq!((s, &off["data"]["active"], &off["data"]["activated_at"]), (StatusCode::OK, &json!(false), &on["data"]["activated_at"]), "{off}");
    let b = assert_error(app.get(&format!("/api/lead-scoring/models/active?tenant_id={tenant}&vertical=saas"), Some(a)).await, 404, "NotFound");
    assert_eq!(b["details"], json!(["no active model"]));
    let (s, again) = app.post(&deactivate, Some(a), json!({})).await;
    assert_eq!((s, &again["data"]), (StatusCode::OK, &off["data"]), "an inactive model is answered as it is");
    let (s, never) = app.post(&format!("/api/lead-scoring/models/{}/deactivate", homes["model_id"].as_str().unwrap()), Some(a), json!({})).await;
    assert_eq!((s, &never["data"]), (StatusCode::OK, &homes));
    assert_error(app.post("/api/lead-scoring/models/0190a000-0000-7000-8000-000000000000/deactivate", Some(a), json!({})).await, 404, "NotFound");
    assert_error(app.post("/api/lead-scoring/models/first/deactivate", Some(a), json!({})).await, 404, "NotFound");
    let (s, _) = app.post(&format!("/api/lead-scoring/models/{v2_id}/activate"), Some(a), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    let (_, got) = app.get(&format!("/api/lead-scoring/models/active?tenant_id={tenant}&vertical=saas"), Some(a)).await;
    assert_eq!(got["data"]["model_id"], v2["model_id"], "activated again");

    let events = app.events_of(&t.a["tenant_id"]).await;
    let ours: Vec<&str> = events.iter().map(String::as_str).filter(|e| e.starts_with("crm.scoring_model")).skip(3).collect();
    assert_eq!(ours, ["crm.scoring_model.activated.v1", "crm.scoring_model.deactivated.v1", "crm.scoring_model.activated.v1"]);
}
db_test!(every_version_is_listed_read_and_a_vertical_can_be_left_without_a_model);

async fn a_lead_is_scored_by_its_verticals_active_model_signal_by_signal(app: TestApp) {
    let t = app.two_tenants("scoring-score").await;
    let a = t.a_token.as_str();
    let weights = json!({ "visited_pricing": 20, "demo_requested": 35.5, "employees": 0.5, "negative": -10 });
    let m = model(&app, a, json!({ "vertical": "saas", "name": "First", "weights": weights, "threshold": 60 })).await;
    let score = |body: Value| app.post("/api/lead-scoring/score", Some(a), body);
    let b = assert_error(score(json!({ "vertical": "saas", "attributes": { "demo_requested": true } })).await, 404, "NotFound");
    assert_eq!(b["details"], json!(["no active model"]), "created, not active yet");
    let (s, _) = app.post(&format!("/api/lead-scoring/models/{}/activate", m["model_id"].as_str().unwrap()), Some(a), json!({})).await;
    assert_eq!(s, StatusCode::OK);

    let attributes = json!({ "demo_requested": true, "visited_pricing": 2, "employees": 30, "negative": "yes", "unweighted": 9 });
    let (s, l) = app.post("/api/crm/leads", Some(a), json!({ "name": "Acme", "attributes": attributes })).await;
    assert_eq!(s, StatusCode::CREATED, "{l}");
    let lead = l["data"]["lead_id"].as_str().unwrap();
    let entries = app.events_of(&t.a["tenant_id"]).await.len();
    let (s, r) = score(json!({ "vertical": "saas", "lead_id": lead })).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(
        r["data"],
        json!({
            "lead_id": lead, "model_id": m["model_id"], "vertical": "saas", "version": 1, "raw_score": 90.5, "score": 90.5, "threshold": 60,
            "qualified": true,
            "contributions": [
                { "signal": "demo_requested", "weight": 35.5, "value": 1.0, "contribution": 35.5 },
                { "signal": "employees", "weight": 0.5, "value": 30.0, "contribution": 15.0 },
                { "signal": "negative", "weight": -10.0, "value": null, "contribution": 0.0 },
                { "signal": "visited_pricing", "weight": 20.0, "value": 2.0, "contribution": 40.0 }
            ]
        })
    );
    let (s, again) = score(json!({ "vertical": "saas", "lead_id": lead })).await;
    assert_eq!((s, &again["data"]), (StatusCode::OK, &r["data"]), "the same answer again");
    let (s, given) = score(json!({ "vertical": "saas", "attributes": attributes })).await;
    assert_eq!((s, &given["data"]["lead_id"], &given["data"]["contributions"]), (StatusCode::OK, &Value::Null, &r["data"]["contributions"]));

    // Held to 0..100, rounded to two decimals; the threshold decides.
    let (_, high) = score(json!({ "vertical": "saas", "attributes": { "visited_pricing": 10, "demo_requested": false } })).await;
    assert_eq!((&high["data"]["raw_score"], &high["data"]["score"], &high["data"]["qualified"]), (&json!(200.0), &json!(100.0), &json!(true)));
    let (_, low) = score(json!({ "vertical": "saas", "attributes": { "negative": 3 } })).await;
    assert_eq!((&low["data"]["raw_score"], &low["data"]["score"], &low["data"]["qualified"]), (&json!(-30.0), &json!(0.0), &json!(false)));
    let (_, odd) = score(json!({ "vertical": "saas", "attributes": { "employees": 33.333 } })).await;
    assert_eq!((&odd["data"]["raw_score"], &odd["data"]["score"], &odd["data"]["qualified"]), (&json!(16.6665), &json!(16.67), &json!(false)));
    // A new active version scores from then on.
    let v2 = model(&app, a, json!({ "vertical": "saas", "name": "Second", "weights": { "employees": 1 } })).await;
    app.post(&format!("/api/lead-scoring/models/{}/activate", v2["model_id"].as_str().unwrap()), Some(a), json!({})).await;
    let (_, r2) = score(json!({ "vertical": "saas", "lead_id": lead })).await;
    assert_eq!(
        (&r2["data"]["model_id"], &r2["data"]["version"], &r2["data"]["score"], &r2["data"]["threshold"]),
        (&v2["model_id"], &json!(2), &json!(30.0), &json!(50))
    );
    assert_eq!(app.events_of(&t.a["tenant_id"]).await.len(), entries + 2, "scoring records nothing (the two entries: v2's creation and activation)");

    let b = assert_error(score(json!({ "vertical": "saas", "lead_id": lead, "attributes": {} })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give lead_id or attributes, not both"]));
    let b = assert_error(score(json!({ "vertical": "saas" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give lead_id or attributes"]));
    let b = assert_error(score(json!({ "attributes": {} })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["vertical is required"]));
    let (_, theirs) = app.post("/api/crm/leads", Some(&t.b_token), json!({ "name": "Theirs" })).await;
    let b = assert_error(score(json!({ "vertical": "saas", "lead_id": theirs["data"]["lead_id"] })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["lead_id is not a lead of this tenant"]));
    let b = assert_error(score(json!({ "vertical": "homes", "attributes": {} })).await, 404, "NotFound");
    assert_eq!(b["details"], json!(["no active model"]));
    let b = assert_error(app.post("/api/lead-scoring/score", Some(&t.b_token), json!({ "vertical": "saas", "attributes": {} })).await, 404, "NotFound");
    assert_eq!(b["details"], json!(["no active model"]), "B has none of A's models");
}
db_test!(a_lead_is_scored_by_its_verticals_active_model_signal_by_signal);

/// A weight is bounded (the schema's minimum and maximum), a vertical has
/// one published form, matched as sent, and a score is always a finite
/// number: an attribute too large to score is refused, never answered as
/// null.
async fn weights_are_bounded_verticals_have_one_form_and_a_score_is_finite(app: TestApp) {
    let t = app.two_tenants("scoring-bounds").await;
    let a = t.a_token.as_str();
    let b = assert_error(
        app.post("/api/lead-scoring/models", Some(a), json!({ "vertical": "saas", "name": "x", "weights": { "a": 1e7, "b": -1000001, "c": 1e6 } })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["weights.a must be a number from -1000000 to 1000000", "weights.b must be a number from -1000000 to 1000000"]));
    let b = assert_error(
        app.post("/api/lead-scoring/models", Some(a), json!({ "vertical": " saas", "name": "x", "weights": { "a": 1 } })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["vertical must be 1 to 64 of a-z, 0-9, '.', '_', '-'"]), "untrimmed");
    // The form is the document's, on both bodies.
    let (_, doc) = app.get("/openapi.json", None).await;
    let schemas = &doc["components"]["schemas"];
    let pattern = json!("^[a-z0-9._-]{1,64}$");
    assert_eq!(
        (&schemas["NewLeadScoringModel"]["properties"]["vertical"]["pattern"], &schemas["LeadScoreRequest"]["properties"]["vertical"]["pattern"]),
        (&pattern, &pattern)
    );
    let weight = &schemas["NewLeadScoringModel"]["properties"]["weights"]["additionalProperties"];
    assert_eq!((weight["minimum"].as_f64(), weight["maximum"].as_f64()), (Some(-1e6), Some(1e6)), "{weight}");

    let m = model(&app, a, json!({ "vertical": "saas", "name": "Big", "weights": { "huge": 1e6, "other": -1e6 } })).await;
    let (s, _) = app.post(&format!("/api/lead-scoring/models/{}/activate", m["model_id"].as_str().unwrap()), Some(a), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    let score = |body: Value| app.post("/api/lead-scoring/score", Some(a), body);
    let b = assert_error(score(json!({ "vertical": "saas", "attributes": { "huge": 1e308, "other": 1 } })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["attributes.huge is too large to score (its weight times it is out of range)"]));
    // Each contribution in range, their sum not.
    let b = assert_error(score(json!({ "vertical": "saas", "attributes": { "huge": 1.5e302, "other": -1.5e302 } })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["the attributes are too large to score (the sum of the contributions is out of range)"]));
    let (s, r) = score(json!({ "vertical": "saas", "attributes": { "huge": 1e300 } })).await;
    assert_eq!((s, &r["data"]["raw_score"], &r["data"]["score"]), (StatusCode::OK, &json!(1e306), &json!(100.0)), "{r}");
    for vertical in [" saas", "saas ", "SaaS", ""] {
        let b = assert_error(score(json!({ "vertical": vertical, "attributes": {} })).await, 400, "ValidationError");
        let expected = if vertical.is_empty() { "vertical is required" } else { "vertical must be 1 to 64 of a-z, 0-9, '.', '_', '-'" };
        assert_eq!(b["details"], json!([expected]), "{vertical:?}");
    }
}
db_test!(weights_are_bounded_verticals_have_one_form_and_a_score_is_finite);
