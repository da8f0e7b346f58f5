//! Privilege containment: nobody issues a key, grants a role, creates a
//! persona or membership, or defines a template that carries a permission
//! they do not hold themselves. Each test first tries the attack that used
//! to reach owner, then the contained action that is still allowed.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

/// A tenant with its owner, the owner template, and a person admitted as
/// `member` and then granted a template with exactly `permissions`.
struct Tenant {
    owner: String,
    tenant_id: Value,
    owner_template: Value,
    /// The narrow person's tenant token and persona.
    narrow: String,
    narrow_persona: String,
    narrow_template: Value,
}

async fn tenant_with_narrow_person(app: &TestApp, slug: &str, permissions: Value) -> Tenant {
    let t = app.signup(&format!("owner@{slug}.example.com"), slug).await;
    let owner = t["token"].as_str().unwrap().to_string();
    let (_, roles) = app.get(&format!("/api/personas/{}/roles", t["persona_id"].as_str().unwrap()), Some(&owner)).await;
    let owner_template = roles["data"]["roles"][0]["role_template_id"].clone();
    assert_eq!(roles["data"]["effective_permissions"], json!(["*"]), "{roles}");

    let email = format!("narrow@{slug}.example.com");
    let (s, reg) = app.post("/api/auth/register", None, json!({ "email": email, "password": "narrow password", "display_name": "N" })).await;
    assert_eq!(s, StatusCode::CREATED, "{reg}");
    let (s, m) = app.post("/api/memberships", Some(&owner), json!({ "person_id": reg["data"]["person_id"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{m}");
    let narrow_persona = m["data"]["persona_id"].as_str().unwrap().to_string();
    let (s, tpl) = app.post("/api/role-templates", Some(&owner), json!({ "name": "narrow", "permissions": permissions })).await;
    assert_eq!(s, StatusCode::CREATED, "{tpl}");
    let narrow_template = tpl["data"]["role_template_id"].clone();
    let (s, g) = app.post("/api/role-assignments", Some(&owner), json!({ "persona_id": narrow_persona, "role_template_id": narrow_template })).await;
    assert_eq!(s, StatusCode::CREATED, "{g}");
    let (s, login) = app.post("/api/auth/login", None, json!({ "email": email, "password": "narrow password", "tenant_id": t["tenant_id"] })).await;
    assert_eq!(s, StatusCode::OK, "{login}");
    Tenant {
        owner,
        tenant_id: t["tenant_id"].clone(),
        owner_template,
        narrow: login["data"]["token"].as_str().unwrap().to_string(),
        narrow_persona,
        narrow_template,
    }
}

/// The 403 of a containment refusal, naming exactly `missing`.
#[track_caller]
fn assert_contained(res: (StatusCode, Value), missing: Value) -> Value {
    let body = assert_error(res, 403, "Forbidden");
    assert_eq!(body["required_scopes"], missing, "{body}");
    assert!(body["details"][0].as_str().unwrap().contains("does not hold"), "{body}");
    body
}

async fn effective(app: &TestApp, token: &str, persona: &str) -> Value {
    let (s, roles) = app.get(&format!("/api/personas/{persona}/roles"), Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{roles}");
    roles["data"]["effective_permissions"].clone()
}

async fn a_key_carries_only_scopes_its_issuer_holds(app: TestApp) {
    let perms = json!({ "application.application.write": true, "application.application.read": true, "api-key.api-key.write": true });
    let t = tenant_with_narrow_person(&app, "keys", perms).await;
    let (s, created) = app.post("/api/applications", Some(&t.narrow), json!({ "name": "a", "slug": "a", "environment": "live" })).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    let app_id = created["data"]["application_id"].as_str().unwrap();

    // The attack: a key with every scope, issued by a person holding three.
    let body =
        assert_contained(app.post(&format!("/api/applications/{app_id}/keys"), Some(&t.narrow), json!({ "name": "k", "scopes": ["*"] })).await, json!(["*"]));
    assert_eq!(body["granted_scopes"], json!(["api-key.api-key.write", "application.application.read", "application.application.write"]));
    // A wildcard wider than what is held, mixed with a held scope: only the wider one is named.
    assert_contained(
        app.post(
            &format!("/api/applications/{app_id}/keys"),
            Some(&t.narrow),
            json!({ "name": "k", "scopes": ["application.application.read", "application.*"] }),
        )
        .await,
        json!(["application.*"]),
    );
    assert_contained(
        app.post("/api/api-keys", Some(&t.narrow), json!({ "tenant_id": t.tenant_id, "name": "k", "scopes": ["command.command.write"] })).await,
        json!(["command.command.write"]),
    );
    // Within what is held: issued.
    let (s, key) =
        app.post(&format!("/api/applications/{app_id}/keys"), Some(&t.narrow), json!({ "name": "k", "scopes": ["application.application.read"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{key}");
    let (s, other) =
        app.post("/api/api-keys", Some(&t.narrow), json!({ "tenant_id": t.tenant_id, "name": "k", "scopes": ["application.application.write"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{other}");

    // Rotating is issuing again: the owner's all-scope key cannot be
    // rotated by the narrow person, their own key can.
    let (_, owners) = app.key(&t.owner, "owners", json!(["*"])).await;
    assert_contained(app.post(&format!("/api/api-keys/{}/rotate", owners["key_id"].as_str().unwrap()), Some(&t.narrow), json!({})).await, json!(["*"]));
    let (s, rotated) = app.post(&format!("/api/api-keys/{}/rotate", key["data"]["key_id"].as_str().unwrap()), Some(&t.narrow), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{rotated}");
    // The owner's key was not rotated: its secret still works.
    assert_eq!(app.get("/api/me", owners["api_key"].as_str()).await.0, StatusCode::OK);
}
db_test!(a_key_carries_only_scopes_its_issuer_holds);

async fn a_persona_cannot_be_created_with_a_role_beyond_the_creators(app: TestApp) {
    let t = tenant_with_narrow_person(&app, "pers", json!({ "persona.persona.write": true, "persona.persona.read": true })).await;
    // The attack: a second persona under one's own membership with the
    // owner template as its primary role.
    assert_contained(app.post("/api/personas", Some(&t.narrow), json!({ "kind": "human", "primary_role_template_id": t.owner_template })).await, json!(["*"]));
    // A persona with the role the creator holds, or with none, is fine.
    let (s, p) = app.post("/api/personas", Some(&t.narrow), json!({ "kind": "agent", "primary_role_template_id": t.narrow_template })).await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    let (s, p) = app.post("/api/personas", Some(&t.narrow), json!({ "kind": "agent" })).await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    // Shredding the current persona and logging in again gains nothing:
    // no persona of the membership carries the owner's role.
    let (s, _) = app.post(&format!("/api/personas/{}/shred", t.narrow_persona), Some(&t.narrow), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    let (s, login) =
        app.post("/api/auth/login", None, json!({ "email": "narrow@pers.example.com", "password": "narrow password", "tenant_id": t.tenant_id })).await;
    assert_eq!(s, StatusCode::OK, "{login}");
    let token = login["data"]["token"].as_str().unwrap();
    let persona = claims(token)["primary_persona_id"].as_str().unwrap().to_string();
    assert_ne!(persona, t.narrow_persona);
    let perms = effective(&app, &t.owner, &persona).await;
    assert!(!perms.as_array().unwrap().contains(&json!("*")), "{perms}");
    assert_error(app.post("/api/tenants", Some(token), json!({ "app_id": "child", "display_name": "C" })).await, 403, "Forbidden");
}
db_test!(a_persona_cannot_be_created_with_a_role_beyond_the_creators);

async fn a_role_beyond_the_granters_cannot_be_assigned(app: TestApp) {
    let t = tenant_with_narrow_person(&app, "asg", json!({ "role-assignment.role-assignment.write": true })).await;
    // The attack: assigning the owner template to oneself.
    assert_contained(
        app.post("/api/role-assignments", Some(&t.narrow), json!({ "persona_id": t.narrow_persona, "role_template_id": t.owner_template })).await,
        json!(["*"]),
    );
    assert_eq!(effective(&app, &t.owner, &t.narrow_persona).await, json!(["role-assignment.role-assignment.write"]));
    // A role whose permissions the granter holds may be handed on.
    let (s, g) = app.post("/api/role-assignments", Some(&t.narrow), json!({ "persona_id": t.narrow_persona, "role_template_id": t.narrow_template })).await;
    assert_eq!(s, StatusCode::CREATED, "{g}");

    // A key's synthetic persona with the owner role is still bounded by
    // the key's scopes.
    let (_, key) = app.key(&t.owner, "asg", json!(["role-assignment.*", "persona.persona.read"])).await;
    let (s, _) =
        app.post("/api/role-assignments", Some(&t.owner), json!({ "persona_id": key["synthetic_persona_id"], "role_template_id": t.owner_template })).await;
    assert_eq!(s, StatusCode::CREATED);
    let body = assert_contained(
        app.post("/api/role-assignments", key["api_key"].as_str(), json!({ "persona_id": t.narrow_persona, "role_template_id": t.owner_template })).await,
        json!(["*"]),
    );
    assert_eq!(body["granted_scopes"], json!(["persona.persona.read", "role-assignment.*"]), "what both the persona and the key allow: {body}");
}
db_test!(a_role_beyond_the_granters_cannot_be_assigned);

async fn a_membership_cannot_carry_a_role_beyond_the_admitters(app: TestApp) {
    let t = tenant_with_narrow_person(&app, "mem", json!({ "membership.membership.write": true })).await;
    let (_, reg) = app.post("/api/auth/register", None, json!({ "email": "eve@mem.example.com", "password": "eve password", "display_name": "E" })).await;
    let eve = reg["data"]["person_id"].clone();
    // The attack: admitting an accomplice account as owner.
    assert_contained(app.post("/api/memberships", Some(&t.narrow), json!({ "person_id": eve, "role_template_id": t.owner_template })).await, json!(["*"]));
    let (s, login) = app.post("/api/auth/login", None, json!({ "email": "eve@mem.example.com", "password": "eve password", "tenant_id": t.tenant_id })).await;
    assert_error((s, login), 403, "NoMembership");
    // As a plain member (the default template grants nothing) it works.
    let (s, m) = app.post("/api/memberships", Some(&t.narrow), json!({ "person_id": eve })).await;
    assert_eq!(s, StatusCode::CREATED, "{m}");
    assert_eq!(effective(&app, &t.owner, m["data"]["persona_id"].as_str().unwrap()).await, json!([]));
}
db_test!(a_membership_cannot_carry_a_role_beyond_the_admitters);

async fn a_template_cannot_define_more_than_its_author_holds(app: TestApp) {
    let t = tenant_with_narrow_person(&app, "tpl", json!({ "role-template.role-template.write": true, "persona.persona.read": true })).await;
    // The attacks: a tenant `member` that grants everything (every member
    // holds it as primary role), a child of the owner template, and an
    // `owner` override that would strip the real owner.
    assert_contained(app.post("/api/role-templates", Some(&t.narrow), json!({ "name": "member", "permissions": { "*": true } })).await, json!(["*"]));
    assert_contained(
        app.post("/api/role-templates", Some(&t.narrow), json!({ "name": "heir", "parent_role_template_id": t.owner_template })).await,
        json!(["*"]),
    );
    assert_contained(app.post("/api/role-templates", Some(&t.narrow), json!({ "name": "owner", "permissions": {} })).await, json!(["*"]));
    assert_eq!(effective(&app, &t.owner, &t.narrow_persona).await, json!(["persona.persona.read", "role-template.role-template.write"]));
    // Within what the author holds: created, also as a child of a held template.
    let (s, tpl) = app
        .post(
            "/api/role-templates",
            Some(&t.narrow),
            json!({ "name": "reader", "permissions": { "persona.persona.read": true, "persona.persona.write": false } }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{tpl}");
    let (s, tpl) = app.post("/api/role-templates", Some(&t.narrow), json!({ "name": "child", "parent_role_template_id": t.narrow_template })).await;
    assert_eq!(s, StatusCode::CREATED, "{tpl}");
}
db_test!(a_template_cannot_define_more_than_its_author_holds);

async fn rotating_a_key_ends_the_tokens_exchanged_for_it(app: TestApp) {
    let t = app.signup("rot@example.com", "rot").await;
    let owner = t["token"].as_str().unwrap();
    let (_, key) = app.key(owner, "rot", json!(["*"])).await;
    let exchange = |secret: String| {
        let app = &app;
        async move {
            let (s, body) = app.post("/api/auth/token", None, json!({ "grant_type": "client_credentials", "client_secret": secret })).await;
            assert_eq!(s, StatusCode::OK, "{body}");
            body["access_token"].as_str().unwrap().to_string()
        }
    };
    let before = exchange(key["api_key"].as_str().unwrap().to_string()).await;
    assert_eq!(app.get("/api/me", Some(&before)).await.0, StatusCode::OK);
    let (s, rotated) = app.post(&format!("/api/api-keys/{}/rotate", key["key_id"].as_str().unwrap()), Some(owner), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{rotated}");
    let body = assert_error(app.get("/api/me", Some(&before)).await, 401, "Unauthorized");
    assert_eq!(body["details"], json!(["the API key behind this token was rotated"]));
    // A token exchanged for the new secret works, in the same second too.
    let after = exchange(rotated["data"]["api_key"].as_str().unwrap().to_string()).await;
    assert_eq!(app.get("/api/me", Some(&after)).await.0, StatusCode::OK);
}
db_test!(rotating_a_key_ends_the_tokens_exchanged_for_it);

/// A relationship whose kind is a permission is a grant of it at the gate
/// (ReBAC): writing or deleting one takes holding that permission.
async fn a_relationship_cannot_grant_a_permission_its_writer_lacks(app: TestApp) {
    let t = tenant_with_narrow_person(&app, "rel", json!({ "rebac.relationship.write": true })).await;
    let (_, me) = app.get("/api/me", Some(&t.owner)).await;
    let owner_persona = me["data"]["persona_id"].as_str().expect("the owner's persona").to_string();
    let tuple = |relation: &str| json!({ "subject_persona_id": t.narrow_persona, "relation": relation, "object_persona_id": owner_persona });
    let read_owner = format!("/api/personas/{owner_persona}");

    // Before: the narrow person cannot read the owner's persona.
    assert_error(app.get(&read_owner, Some(&t.narrow)).await, 403, "Forbidden");
    // The attack: relations named after a read and a write scope.
    for relation in ["persona.persona.read", "assignment.workload.write"] {
        assert_contained(app.post("/api/rebac/relationships", Some(&t.narrow), tuple(relation)).await, json!([relation]));
    }
    // Nothing was written: the read is still refused.
    assert_error(app.get(&read_owner, Some(&t.narrow)).await, 403, "Forbidden");
    // A relation kind that is no permission confers nothing at the gate and stays free.
    let (s, manages) = app.post("/api/rebac/relationships", Some(&t.narrow), tuple("manages")).await;
    assert_eq!(s, StatusCode::CREATED, "{manages}");
    // A key whose scope allows the route but whose persona holds nothing is contained too.
    let (_, key) = app.key(&t.owner, "relkey", json!(["rebac.relationship.write"])).await;
    let key = key["api_key"].as_str().unwrap();
    assert_contained(app.post("/api/rebac/relationships", Some(key), tuple("persona.persona.read")).await, json!(["persona.persona.read"]));

    // The owner holds the permission: the grant is written and works.
    let (s, granted) = app.post("/api/rebac/relationships", Some(&t.owner), tuple("persona.persona.read")).await;
    assert_eq!(s, StatusCode::CREATED, "{granted}");
    let (s, read) = app.get(&read_owner, Some(&t.narrow)).await;
    assert_eq!(s, StatusCode::OK, "{read}");
    assert_eq!(read["data"]["persona_id"], json!(owner_persona), "{read}");
    // Deleting it takes the permission too: the narrow person cannot, the owner can.
    assert_contained(app.post("/api/rebac/relationships/delete", Some(&t.narrow), tuple("persona.persona.read")).await, json!(["persona.persona.read"]));
    let (s, gone) = app.post("/api/rebac/relationships/delete", Some(&t.owner), tuple("persona.persona.read")).await;
    assert_eq!(s, StatusCode::OK, "{gone}");
    assert_error(app.get(&read_owner, Some(&t.narrow)).await, 403, "Forbidden");
    let (s, gone) = app.post("/api/rebac/relationships/delete", Some(&t.narrow), tuple("manages")).await;
    assert_eq!(s, StatusCode::OK, "{gone}");
}
db_test!(a_relationship_cannot_grant_a_permission_its_writer_lacks);
