//! Tenant isolation: tenant B's credentials on each of tenant A's resources
//! answer 404, never 403.

use reqwest::Method;
use serde_json::json;

use crate::{db_test, helpers::*};

async fn another_tenants_resources_are_not_found(app: TestApp) {
    let t = app.two_tenants("iso").await;
    let (a, a_token) = (&t.a, t.a_token.as_str());
    let (a_app, a_key) = app.key(a_token, "a-app", json!(["*"])).await;
    let (_, reg) = app.post("/api/auth/register", None, json!({ "email": "x@example.com", "password": "x password", "display_name": "X" })).await;
    let (_, m) = app.post("/api/memberships", Some(a_token), json!({ "person_id": reg["data"]["person_id"] })).await;
    let (_, ai) = app.post("/api/app-identities", Some(a_token), json!({ "person_id": a["person_id"], "app_id": "iso-a" })).await;
    let owner = app.owner_template(a_token, a["persona_id"].as_str().unwrap()).await;
    let (_, grant) = app.post("/api/role-assignments", Some(a_token), json!({ "persona_id": m["data"]["persona_id"], "role_template_id": owner })).await;
    let ai_id = ai["data"]["app_identity_id"].as_str().map(str::to_string).unwrap_or_else(|| a["app_identity_id"].as_str().unwrap().to_string());
    let key_id = a_key["key_id"].as_str().unwrap();
    let persona = a["persona_id"].as_str().unwrap();
    let membership = m["data"]["membership_id"].as_str().unwrap();
    let assignment = grant["data"]["assignment_id"].as_str().unwrap();

    let routes = vec![
        (Method::GET, format!("/api/applications/{a_app}")),
        (Method::GET, format!("/api/applications/{a_app}/keys")),
        (Method::POST, format!("/api/applications/{a_app}/keys")),
        (Method::POST, format!("/api/applications/{a_app}/disable")),
        (Method::POST, format!("/api/api-keys/{key_id}/rotate")),
        (Method::POST, format!("/api/api-keys/{key_id}/revoke")),
        (Method::GET, format!("/api/personas/{persona}")),
        (Method::GET, format!("/api/personas/{persona}/roles")),
        (Method::POST, format!("/api/personas/{persona}/shred")),
        (Method::POST, format!("/api/memberships/{membership}/personas")),
        (Method::POST, format!("/api/role-assignments/{assignment}/revoke")),
        (Method::GET, format!("/api/app-identities/{ai_id}")),
        (Method::POST, format!("/api/app-identities/{ai_id}/memberships")),
    ];
    // Credential management refuses keys before looking anything up.
    assert_isolated(&app, &t, &routes, |p| p.starts_with("/api/applications") || p.starts_with("/api/api-keys")).await;
    // B's credentials work on B's own resources, so the 404s above are the boundary's.
    let b_persona = format!("/api/personas/{}", t.b["persona_id"].as_str().unwrap());
    assert_eq!(app.get(&b_persona, Some(&t.b_token)).await.0.as_u16(), 200);
    assert_eq!(app.get(&b_persona, Some(&t.b_key)).await.0.as_u16(), 200);
    // Tenant A's resources are intact.
    let (s, me) = app.get("/api/me", a_key["api_key"].as_str()).await;
    assert_eq!(s.as_u16(), 200, "{me}");
    let (s, p) = app.get(&format!("/api/personas/{persona}"), Some(a_token)).await;
    assert_eq!((s.as_u16(), p["data"]["status"].clone()), (200, json!("active")));
}
db_test!(another_tenants_resources_are_not_found);
