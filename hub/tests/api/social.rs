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
