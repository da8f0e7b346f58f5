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
    assert_eq!(b["details"], json!(["name is required", "weights.a must be a number", "threshold must be an integer from 0 to 100"]));
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
