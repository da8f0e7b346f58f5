//! sdk-consent: the purpose catalogue (by purpose_id, capped at 200,
//! tenant_id required and the caller's), and each subject's append-only
//! history of grants and withdrawals.

use reqwest::StatusCode;
use serde_json::json;

use crate::{db_test, helpers::*};

async fn purposes_and_an_append_only_history_per_subject(app: TestApp) {
    let t = app.two_tenants("consent").await;
    let a = t.a_token.as_str();
    let tenant = t.a["tenant_id"].as_str().unwrap();
    for id in ["marketing.email", "analytics", "marketing.sms"] {
        let (s, p) = app
            .post(
                "/api/consent/purposes",
                Some(a),
                json!({ "purpose_id": id, "description": format!("{id} use"), "legal_basis": "consent", "default_jurisdictions": ["NL", "DE"] }),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{p}");
    }
    assert_error(
        app.post("/api/consent/purposes", Some(a), json!({ "purpose_id": "analytics", "description": "x", "legal_basis": "consent" })).await,
        409,
        "Conflict",
    );
    // The body against its schema first ...
    let b = assert_error(
        app.post("/api/consent/purposes", Some(a), json!({ "purpose_id": "Bad Id", "legal_basis": "because", "default_jurisdictions": "NL" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "description is required",
            "legal_basis must be one of: consent, contract, legal_obligation, vital_interests, public_task, legitimate_interests",
            "default_jurisdictions must be an array",
        ])
    );
    let many: Vec<&str> = vec!["NL"; 51];
    let b = assert_error(
        app.post("/api/consent/purposes", Some(a), json!({ "purpose_id": "p", "description": "x", "legal_basis": "consent", "default_jurisdictions": many }))
            .await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["default_jurisdictions must hold at most 50 items"]));
    // ... then what a schema cannot say.
    let b = assert_error(
        app.post(
            "/api/consent/purposes",
            Some(a),
            json!({ "purpose_id": "Bad Id", "description": "x", "legal_basis": "consent", "default_jurisdictions": ["nl"] }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "purpose_id must be 1 to 128 of a-z, 0-9, '.', '_' or '-'",
            "default_jurisdictions must be an array of at most 50 ISO 3166-1 alpha-2 codes (NL, DE, ...)",
        ])
    );

    let (s, list) = app.get(&format!("/api/consent/purposes?tenant_id={tenant}"), Some(a)).await;
    assert_eq!(s, StatusCode::OK);
    let ids: Vec<&str> = list["data"].as_array().unwrap().iter().map(|p| p["purpose_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["analytics", "marketing.email", "marketing.sms"], "ordered by purpose_id");
    assert_eq!((list["total"].as_i64(), list["data"][0]["app_id"].clone()), (Some(3), t.a["app_id"].clone()));
    assert_eq!(list["data"][0]["default_jurisdictions"], json!(["NL", "DE"]));
    assert_error(app.get("/api/consent/purposes", Some(a)).await, 400, "ValidationError");
    assert_error(app.get(&format!("/api/consent/purposes?tenant_id={}", t.b["tenant_id"].as_str().unwrap()), Some(a)).await, 403, "TenantMismatch");
    let (_, other) = app.get(&format!("/api/consent/purposes?tenant_id={}", t.b["tenant_id"].as_str().unwrap()), Some(&t.b_token)).await;
    assert_eq!(other["total"], 0);

    // Grant, withdraw, grant again: all kept, newest first.
    for action in ["granted", "withdrawn", "granted"] {
        let (s, r) = app
            .post(
                "/api/consent/grants",
                Some(a),
                json!({ "subject": "user-7", "purpose_id": "marketing.email", "action": action, "jurisdiction": "NL", "evidence": { "form": "v3" } }),
            )
            .await;
        assert_eq!((s, r["data"]["action"].as_str()), (StatusCode::CREATED, Some(action)), "{r}");
    }
    app.post("/api/consent/grants", Some(a), json!({ "subject": "user-7", "purpose_id": "analytics" })).await;
    let (_, h) = app.get("/api/consent/grants?subject=user-7&purpose_id=marketing.email", Some(a)).await;
    let actions: Vec<&str> = h["data"].as_array().unwrap().iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["granted", "withdrawn", "granted"]);
    assert_eq!(h["data"][0]["evidence"], json!({ "form": "v3" }));
    let (_, all) = app.get("/api/consent/grants?subject=user-7", Some(a)).await;
    assert_eq!(all["total"], 4);
    let (_, none) = app.get("/api/consent/grants?subject=user-7", Some(&t.b_token)).await;
    assert_eq!(none["total"], 0, "another tenant sees nothing");
    assert_error(app.get("/api/consent/grants", Some(a)).await, 400, "ValidationError");
    let b = assert_error(app.post("/api/consent/grants", Some(a), json!({ "subject": "u", "purpose_id": "nope" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["purpose_id is not a purpose of this tenant's catalogue"]));
    // Another tenant's purpose is not this tenant's.
    assert_error(app.post("/api/consent/grants", Some(&t.b_token), json!({ "subject": "u", "purpose_id": "analytics" })).await, 400, "ValidationError");
    let b = assert_error(
        app.post(
            "/api/consent/grants",
            Some(a),
            json!({ "subject": "u", "purpose_id": "analytics", "action": "maybe", "jurisdiction": "Netherlands", "evidence": [1] }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["action must be one of: granted, withdrawn", "evidence must be a JSON object"]));
    let b = assert_error(
        app.post("/api/consent/grants", Some(a), json!({ "subject": "u", "purpose_id": "analytics", "jurisdiction": "Netherlands" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["jurisdiction must be an ISO 3166-1 alpha-2 code (NL, DE, ...)"]));

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |n: &str| events.iter().filter(|e| *e == n).count();
    assert_eq!((count("consent.purpose.created.v1"), count("consent.consent.granted.v1"), count("consent.consent.withdrawn.v1")), (3, 3, 1));
}
db_test!(purposes_and_an_append_only_history_per_subject);

async fn a_purpose_is_read_and_retired_its_records_kept(app: TestApp) {
    let t = app.two_tenants("consent-retire").await;
    let a = t.a_token.as_str();
    let (s, p) =
        app.post("/api/consent/purposes", Some(a), json!({ "purpose_id": "newsletter", "description": "weekly news", "legal_basis": "consent" })).await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    assert_eq!((p["data"]["status"].as_str(), &p["data"]["retired_at"]), (Some("active"), &serde_json::Value::Null));
    let (s, one) = app.get("/api/consent/purposes/newsletter", Some(a)).await;
    assert_eq!((s, &one["data"]), (StatusCode::OK, &p["data"]));
    let grant = |action: &str| json!({ "subject": "user-1", "purpose_id": "newsletter", "action": action });
    let (s, _) = app.post("/api/consent/grants", Some(a), grant("granted")).await;
    assert_eq!(s, StatusCode::CREATED);

    let (s, r) = app.post("/api/consent/purposes/newsletter/retire", Some(a), json!({})).await;
    assert_eq!((s, r["data"]["status"].as_str()), (StatusCode::OK, Some("retired")), "{r}");
    assert!(r["data"]["retired_at"].is_string());
    let (s, again) = app.post("/api/consent/purposes/newsletter/retire", Some(a), json!({})).await;
    assert_eq!((s, &again["data"]), (StatusCode::OK, &r["data"]));
    let (_, read) = app.get("/api/consent/purposes/newsletter", Some(a)).await;
    assert_eq!(read["data"], r["data"]);

    // No new grant; a withdrawal still is recorded; the history stays.
    let body = assert_error(app.post("/api/consent/grants", Some(a), grant("granted")).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the purpose newsletter is retired: it takes withdrawals, no new grant"]));
    let (s, w) = app.post("/api/consent/grants", Some(a), grant("withdrawn")).await;
    assert_eq!((s, w["data"]["action"].as_str()), (StatusCode::CREATED, Some("withdrawn")), "{w}");
    let (_, history) = app.get("/api/consent/grants?subject=user-1", Some(a)).await;
    assert_eq!(history["total"], 2);
    let tenant = t.a["tenant_id"].as_str().unwrap();
    let (_, list) = app.get(&format!("/api/consent/purposes?tenant_id={tenant}"), Some(a)).await;
    assert_eq!((list["total"].as_i64(), list["data"][0]["status"].as_str()), (Some(1), Some("retired")));
    // An unknown purpose is still 400 on a grant.
    let body = assert_error(app.post("/api/consent/grants", Some(a), json!({ "subject": "u", "purpose_id": "nothing" })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["purpose_id is not a purpose of this tenant's catalogue"]));

    assert_error(app.get("/api/consent/purposes/newsletter", Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.post("/api/consent/purposes/newsletter/retire", Some(&t.b_token), json!({})).await, 404, "NotFound");
    assert_error(app.get("/api/consent/purposes/Not%20an%20id", Some(a)).await, 404, "NotFound");
    assert_error(app.post("/api/consent/purposes/unknown/retire", Some(a), json!({})).await, 404, "NotFound");
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "consent.purpose.retired.v1").count(), 1);
}
db_test!(a_purpose_is_read_and_retired_its_records_kept);
