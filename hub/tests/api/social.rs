//! sdk-social: authorised handles bound to a persona of the tenant.

use reqwest::StatusCode;
use serde_json::json;

use crate::{db_test, helpers::*};

async fn handles_are_authorised_once_and_bound_to_a_persona_of_the_tenant(app: TestApp) {
    let t = app.two_tenants("social").await;
    let a = t.a_token.as_str();
    let (tenant, persona) = (&t.a["tenant_id"], &t.a["persona_id"]);
    let (s, h) = app
        .post(
            "/api/social/handles",
            Some(a),
            json!({ "tenant_id": tenant, "network": "linkedin", "external_handle_id": "urn:li:org:1", "authorized_persona_id": persona, "display_name": "Acme" }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{h}");
    assert_eq!(
        (&h["data"]["network"], &h["data"]["external_handle_id"], &h["data"]["authorized_persona_id"], &h["data"]["status"], &h["data"]["tenant_id"]),
        (&json!("linkedin"), &json!("urn:li:org:1"), persona, &json!("authorised"), tenant)
    );
    let (s, _) = app
        .post("/api/social/handles", Some(a), json!({ "tenant_id": tenant, "network": "x", "external_handle_id": "42", "authorized_persona_id": persona }))
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let b = assert_error(
        app.post("/api/social/handles", Some(a), json!({ "tenant_id": tenant, "network": "x", "external_handle_id": "42", "authorized_persona_id": persona }))
            .await,
        409,
        "Conflict",
    );
    assert_eq!(b["details"], json!(["this tenant has authorised the x handle 42 already"]));

    let (s, list) = app.get("/api/social/handles", Some(a)).await;
    assert_eq!((s, list["total"].as_i64()), (StatusCode::OK, Some(2)));
    let networks: Vec<&str> = list["data"].as_array().unwrap().iter().map(|h| h["network"].as_str().unwrap()).collect();
    assert_eq!(networks, ["x", "linkedin"], "newest first");
    let (_, one) = app.get("/api/social/handles?network=linkedin", Some(a)).await;
    assert_eq!((one["total"].as_i64(), &one["data"][0]["display_name"]), (Some(1), &json!("Acme")));
    let b = assert_error(app.get("/api/social/handles?network=myspace&authorized_persona_id=p", Some(a)).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!([
            "network must be one of: x, linkedin, facebook, instagram, tiktok, youtube, threads, bluesky, mastodon",
            "authorized_persona_id must be a UUID"
        ])
    );
    assert_error(app.get("/api/social/handles?limit=-1", Some(a)).await, 400, "ValidationError");
    let (_, none) = app.get("/api/social/handles", Some(&t.b_token)).await;
    assert_eq!(none["total"], 0, "another tenant sees none of them");

    let b = assert_error(app.post("/api/social/handles", Some(a), json!({ "network": "myspace" })).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!([
            "tenant_id is required",
            "network must be one of: x, linkedin, facebook, instagram, tiktok, youtube, threads, bluesky, mastodon",
            "external_handle_id is required",
            "authorized_persona_id is required"
        ])
    );
    let b = assert_error(
        app.post(
            "/api/social/handles",
            Some(a),
            json!({ "tenant_id": t.b["tenant_id"], "network": "x", "external_handle_id": "1", "authorized_persona_id": persona }),
        )
        .await,
        403,
        "TenantMismatch",
    );
    assert_eq!(b["details"], json!(["tenant_id does not match the credential's tenant"]));
    let b = assert_error(
        app.post(
            "/api/social/handles",
            Some(a),
            json!({ "tenant_id": tenant, "network": "x", "external_handle_id": "1", "authorized_persona_id": t.b["persona_id"] }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["authorized_persona_id is not a persona of this tenant"]));
    let events = app.events_of(tenant).await;
    assert_eq!(events.iter().filter(|e| *e == "social.handle.authorised.v1").count(), 2);
}
db_test!(handles_are_authorised_once_and_bound_to_a_persona_of_the_tenant);

/// A handle is read one by one, rebound to another persona, revoked once
/// (a revoked handle takes no change) and authorised again in its row.
async fn handles_are_read_rebound_revoked_and_authorised_again(app: TestApp) {
    let t = app.two_tenants("social-life").await;
    let (a, b) = (t.a_token.as_str(), t.b_token.as_str());
    let (tenant, owner) = (&t.a["tenant_id"], &t.a["persona_id"]);
    let new =
        json!({ "tenant_id": tenant, "network": "linkedin", "external_handle_id": "urn:li:org:7", "authorized_persona_id": owner, "display_name": "Acme" });
    let (s, h) = app.post("/api/social/handles", Some(a), new.clone()).await;
    assert_eq!(s, StatusCode::CREATED, "{h}");
    let handle = h["data"].clone();
    assert_eq!(handle["revoked_at"], serde_json::Value::Null);
    let id = handle["handle_id"].as_str().unwrap();
    let url = |verb: &str| format!("/api/social/handles/{id}{verb}");

    let (s, one) = app.get(&url(""), Some(a)).await;
    assert_eq!((s, &one["data"]), (StatusCode::OK, &handle));
    assert_error(app.get(&url(""), Some(b)).await, 404, "NotFound");
    assert_error(app.get("/api/social/handles/acme", Some(a)).await, 404, "NotFound");

    // Rebinding: at least one field; the persona is one of the tenant's.
    let (_, p) = app.post("/api/personas", Some(a), json!({ "kind": "service" })).await;
    let staff = p["data"]["persona_id"].clone();
    let app = &app;
    let patch = |token: &str, body: serde_json::Value| {
        let (url, token) = (url(""), token.to_string());
        async move { app.call(reqwest::Method::PATCH, &url, Some(&token), Some(body)).await }
    };
    let body = assert_error(patch(a, json!({})).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["give at least one of: display_name, authorized_persona_id"]));
    let body = assert_error(patch(a, json!({ "authorized_persona_id": "p", "display_name": "d".repeat(201) })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["display_name must be at most 200 characters", "authorized_persona_id must be a UUID"]));
    let body = assert_error(patch(a, json!({ "authorized_persona_id": t.b["persona_id"] })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["authorized_persona_id is not a persona of this tenant"]));
    assert_error(patch(b, json!({ "display_name": "theirs" })).await, 404, "NotFound");
    let (s, rebound) = patch(a, json!({ "authorized_persona_id": staff })).await;
    assert_eq!(s, StatusCode::OK, "{rebound}");
    assert_eq!((&rebound["data"]["authorized_persona_id"], &rebound["data"]["display_name"]), (&staff, &json!("Acme")), "absent fields stay");
    let (s, cleared) = patch(a, json!({ "display_name": "" })).await;
    assert_eq!((s, &cleared["data"]["display_name"]), (StatusCode::OK, &serde_json::Value::Null));
    let (_, by_staff) = app.get(&format!("/api/social/handles?authorized_persona_id={}", staff.as_str().unwrap()), Some(a)).await;
    assert_eq!(by_staff["total"], 1);

    // Revoked once; then no change and no second revoke.
    assert_error(app.post(&url("/revoke"), Some(b), json!({})).await, 404, "NotFound");
    let (s, revoked) = app.post(&url("/revoke"), Some(a), json!({})).await;
    assert_eq!((s, &revoked["data"]["status"]), (StatusCode::OK, &json!("revoked")), "{revoked}");
    assert!(revoked["data"]["revoked_at"].is_string());
    let body = assert_error(app.post(&url("/revoke"), Some(a), json!({})).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the handle is revoked: only an authorised handle can be revoked"]));
    let body = assert_error(patch(a, json!({ "display_name": "Acme" })).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the handle is revoked: only an authorised handle can be changed"]));
    let (_, revoked_list) = app.get("/api/social/handles?status=revoked", Some(a)).await;
    assert_eq!((&revoked_list["total"], &revoked_list["data"][0]["handle_id"]), (&json!(1), &handle["handle_id"]));
    let (_, authorised) = app.get("/api/social/handles?status=authorised", Some(a)).await;
    assert_eq!(authorised["total"], 0);
    assert_error(app.get("/api/social/handles?status=lapsed", Some(a)).await, 400, "ValidationError");

    // Authorised again: the same row, active, bound to the new authoriser.
    let (s, again) = app.post("/api/social/handles", Some(a), new.clone()).await;
    assert_eq!(s, StatusCode::CREATED, "{again}");
    assert_eq!(
        (&again["data"]["handle_id"], &again["data"]["status"], &again["data"]["revoked_at"], &again["data"]["authorized_persona_id"]),
        (&handle["handle_id"], &json!("authorised"), &serde_json::Value::Null, owner)
    );
    assert_error(app.post("/api/social/handles", Some(a), new).await, 409, "Conflict");

    let events = app.events_of(tenant).await;
    let count = |ty: &str| events.iter().filter(|e| *e == ty).count();
    assert_eq!((count("social.handle.authorised.v1"), count("social.handle.updated.v1"), count("social.handle.revoked.v1")), (2, 2, 1));
}
db_test!(handles_are_read_rebound_revoked_and_authorised_again);
