//! Authorization: the scopes of machine callers on every scoped route, and
//! role authority resolved at request time for people and keys alike.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

const ID: &str = "0190a000-0000-7000-8000-000000000000";

/// Every scoped route of the hub, with the scope the rule derives for it.
fn scoped_routes() -> Vec<(Method, String, &'static str)> {
    let r = |m: Method, p: &str, s: &'static str| (m, p.replace("{id}", ID), s);
    vec![
        r(Method::POST, "/api/applications", "application.application.write"),
        r(Method::GET, "/api/applications", "application.application.read"),
        r(Method::GET, "/api/applications/{id}", "application.application.read"),
        r(Method::POST, "/api/applications/{id}/keys", "application.application.write"),
        r(Method::GET, "/api/applications/{id}/keys", "application.application.read"),
        r(Method::POST, "/api/applications/{id}/disable", "application.application.write"),
        r(Method::POST, "/api/api-keys", "api-key.api-key.write"),
        r(Method::POST, "/api/api-keys/{id}/rotate", "api-key.api-key.write"),
        r(Method::POST, "/api/api-keys/{id}/revoke", "api-key.api-key.write"),
        r(Method::POST, "/api/tenants", "tenant.tenant.write"),
        r(Method::POST, "/api/memberships", "membership.membership.write"),
        r(Method::GET, "/api/memberships", "membership.membership.read"),
        r(Method::POST, "/api/memberships/{id}/personas", "membership.membership.write"),
        r(Method::POST, "/api/app-identities", "app-identity.app-identity.write"),
        r(Method::GET, "/api/app-identities/{id}", "app-identity.app-identity.read"),
        r(Method::POST, "/api/app-identities/{id}/memberships", "app-identity.app-identity.write"),
        r(Method::POST, "/api/personas", "persona.persona.write"),
        r(Method::GET, "/api/personas/{id}", "persona.persona.read"),
        r(Method::POST, "/api/personas/{id}/shred", "persona.persona.write"),
        r(Method::GET, "/api/personas/{id}/roles", "persona.persona.read"),
        r(Method::POST, "/api/role-assignments", "role-assignment.role-assignment.write"),
        r(Method::POST, "/api/role-assignments/{id}/revoke", "role-assignment.role-assignment.write"),
        r(Method::POST, "/api/role-templates", "role-template.role-template.write"),
        r(Method::GET, "/api/me", "me.me.read"),
    ]
}

async fn a_key_lacking_the_scope_is_refused_on_every_scoped_route(app: TestApp) {
    let t = app.signup("sc@example.com", "sc").await;
    assert_scoped(&app, t["token"].as_str().unwrap(), json!(["crm.*", "sla.clock.read"]), &scoped_routes()).await;
}
db_test!(a_key_lacking_the_scope_is_refused_on_every_scoped_route);

async fn a_keys_synthetic_persona_needs_a_role_grant_for_identity_administration(app: TestApp) {
    let t = app.signup("syn@example.com", "syn").await;
    let owner = t["token"].as_str().unwrap();
    let (_, key) = app.key(owner, "syn", json!(["*"])).await;
    let secret = key["api_key"].as_str().unwrap();
    // Scope alone is enough for routes that do not consult roles...
    assert_eq!(app.get("/api/me", Some(secret)).await.0, StatusCode::OK);
    // ...but a route that consults the role template answers 403 without naming a scope.
    let body = assert_error(app.post("/api/personas", Some(secret), json!({ "kind": "agent" })).await, 403, "Forbidden");
    assert!(body.get("required_scopes").is_none(), "{body}");
    // The owner grants the owner role to the key's persona.
    let owner_template = owner_role(&app, owner, t["persona_id"].as_str().unwrap()).await;
    let (s, grant) =
        app.post("/api/role-assignments", Some(owner), json!({ "persona_id": key["synthetic_persona_id"], "role_template_id": owner_template })).await;
    assert_eq!(s, StatusCode::CREATED, "{grant}");
    let (s, p) = app.post("/api/personas", Some(secret), json!({ "kind": "agent" })).await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    // Revoking the grant takes effect on the next request.
    let (s, _) = app.post(&format!("/api/role-assignments/{}/revoke", grant["data"]["assignment_id"].as_str().unwrap()), Some(owner), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    assert_error(app.post("/api/personas", Some(secret), json!({ "kind": "agent" })).await, 403, "Forbidden");
}
db_test!(a_keys_synthetic_persona_needs_a_role_grant_for_identity_administration);

async fn owner_role(app: &TestApp, token: &str, persona: &str) -> Value {
    let (_, roles) = app.get(&format!("/api/personas/{persona}/roles"), Some(token)).await;
    roles["data"]["roles"][0]["role_template_id"].clone()
}

async fn human_authority_follows_grants_at_request_time(app: TestApp) {
    let t = app.signup("boss@example.com", "hr").await;
    let owner = t["token"].as_str().unwrap();
    let (token, persona) = app.member(owner, &t["tenant_id"], "m@example.com").await;
    // A member holds nothing: refused, with the scope it would need.
    let body = assert_error(app.get("/api/applications", Some(&token)).await, 403, "Forbidden");
    assert_eq!(body["required_scopes"], json!(["application.application.read"]));
    // A tenant template granting application reads, assigned to the member.
    let (s, tpl) = app.post("/api/role-templates", Some(owner), json!({ "name": "reader", "permissions": { "application.*": true } })).await;
    assert_eq!(s, StatusCode::CREATED, "{tpl}");
    let (s, grant) =
        app.post("/api/role-assignments", Some(owner), json!({ "persona_id": persona, "role_template_id": tpl["data"]["role_template_id"] })).await;
    assert_eq!(s, StatusCode::CREATED);
    // The same token now passes: authority is not in the token.
    assert_eq!(app.get("/api/applications", Some(&token)).await.0, StatusCode::OK);
    let (_, roles) = app.get(&format!("/api/personas/{persona}/roles"), Some(owner)).await;
    assert_eq!(roles["data"]["effective_permissions"], json!(["application.*"]));
    app.post(&format!("/api/role-assignments/{}/revoke", grant["data"]["assignment_id"].as_str().unwrap()), Some(owner), json!({})).await;
    assert_error(app.get("/api/applications", Some(&token)).await, 403, "Forbidden");
}
db_test!(human_authority_follows_grants_at_request_time);

async fn a_tenant_template_overrides_the_platform_default_of_the_same_name(app: TestApp) {
    let t = app.signup("ovr@example.com", "ovr").await;
    let owner = t["token"].as_str().unwrap();
    let (token, _) = app.member(owner, &t["tenant_id"], "mm@example.com").await;
    assert_error(app.get("/api/applications", Some(&token)).await, 403, "Forbidden");
    // The member's template is the platform default `member`; the tenant overrides it.
    let (s, _) = app.post("/api/role-templates", Some(owner), json!({ "name": "member", "permissions": { "application.application.read": true } })).await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(app.get("/api/applications", Some(&token)).await.0, StatusCode::OK);
    assert_error(app.post("/api/role-templates", Some(owner), json!({ "name": "member" })).await, 409, "Conflict");
}
db_test!(a_tenant_template_overrides_the_platform_default_of_the_same_name);

async fn templates_inherit_from_their_parent(app: TestApp) {
    let t = app.signup("inh@example.com", "inh").await;
    let owner = t["token"].as_str().unwrap();
    let (token, persona) = app.member(owner, &t["tenant_id"], "kid@example.com").await;
    let (_, parent) = app
        .post("/api/role-templates", Some(owner), json!({ "name": "base", "permissions": { "me.me.read": true, "application.application.read": true } }))
        .await;
    let (s, child) = app
        .post(
            "/api/role-templates",
            Some(owner),
            json!({ "name": "child", "parent_role_template_id": parent["data"]["role_template_id"], "permissions": { "persona.persona.read": true } }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{child}");
    app.post("/api/role-assignments", Some(owner), json!({ "persona_id": persona, "role_template_id": child["data"]["role_template_id"] })).await;
    let (_, roles) = app.get(&format!("/api/personas/{persona}/roles"), Some(owner)).await;
    assert_eq!(roles["data"]["effective_permissions"], json!(["application.application.read", "me.me.read", "persona.persona.read"]));
    assert_eq!(app.get("/api/applications", Some(&token)).await.0, StatusCode::OK);
    let body = assert_error(
        app.post("/api/role-templates", Some(owner), json!({ "name": "bad", "permissions": { "crm": true, "x.y.z": "yes" } })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["permissions.x.y.z must be true or false"]));
    // Once every value is a boolean: every key must be a scope.
    let body = assert_error(
        app.post("/api/role-templates", Some(owner), json!({ "name": "bad", "permissions": { "crm": true, "x.y.z": false, "crm:read": true } })).await,
        400,
        "ValidationError",
    );
    assert!(body["details"][0].as_str().unwrap().ends_with("bad entries: crm, crm:read"), "{body}");
}
db_test!(templates_inherit_from_their_parent);
