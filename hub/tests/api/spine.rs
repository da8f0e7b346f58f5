//! Tenants, memberships, app identities, personas and crypto-shredding.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn a_tenant_creates_a_child_tenant_with_its_app_row(app: TestApp) {
    let t = app.signup("parent@example.com", "parent").await;
    let owner = t["token"].as_str().unwrap();
    let body = assert_error(
        app.post("/api/tenants", Some(owner), json!({ "app_id": "kid", "display_name": "Kid", "person_id": t["person_id"] })).await,
        400,
        "ValidationError",
    );
    assert!(body["details"][0].as_str().unwrap().starts_with("person_id is not accepted"));
    let (s, child) = app.post("/api/tenants", Some(owner), json!({ "app_id": "kid", "display_name": "Kid", "region": "eu-west-1" })).await;
    assert_eq!(s, StatusCode::CREATED, "{child}");
    let c = &child["data"];
    assert_eq!(c["app_id"], "kid");
    assert_eq!(c["parent_tenant_id"], t["tenant_id"]);
    assert_eq!(c["root_tenant_id"], t["tenant_id"]);
    assert_eq!(c["org_id"], t["org_id"]);
    assert_eq!(c["status"], "trial");
    assert_eq!(c["isolation_tier"], "S");
    assert_eq!(c["app_pool_index"], json!({ "kid": 0 }));
    assert_error(app.post("/api/tenants", Some(owner), json!({ "app_id": "kid", "display_name": "Again" })).await, 409, "Conflict");
    assert_error(
        app.post("/api/tenants", Some(owner), json!({ "app_id": "k2", "display_name": "K", "parent_tenant_id": uuid::Uuid::now_v7().to_string() })).await,
        403,
        "TenantMismatch",
    );
    // The parent admits its owner into the child, who can then log in there.
    let (s, m) = app.post("/api/memberships", Some(owner), json!({ "person_id": t["person_id"], "tenant_id": c["tenant_id"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{m}");
    let (s, login) =
        app.post("/api/auth/login", None, json!({ "email": "parent@example.com", "password": "correct horse battery", "tenant_id": c["tenant_id"] })).await;
    assert_eq!(s, StatusCode::OK);
    let claims = claims(login["data"]["token"].as_str().unwrap());
    assert_eq!(claims["parent_tenant_id"], t["tenant_id"]);
    assert_eq!(claims["root_tenant_id"], t["tenant_id"]);
}
db_test!(a_tenant_creates_a_child_tenant_with_its_app_row);

async fn memberships_bind_existing_people(app: TestApp) {
    let t = app.signup("mb@example.com", "mb").await;
    let owner = t["token"].as_str().unwrap();
    let (_, reg) = app.post("/api/auth/register", None, json!({ "email": "p@example.com", "password": "p password", "display_name": "P" })).await;
    let person = reg["data"]["person_id"].clone();
    let body = assert_error(app.post("/api/memberships", Some(owner), json!({ "person_id": uuid::Uuid::now_v7().to_string() })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["person_id does not name a person"]));
    assert_error(app.post("/api/memberships", Some(owner), json!({ "person_id": "nope" })).await, 400, "ValidationError");
    let (s, m) = app.post("/api/memberships", Some(owner), json!({ "person_id": person, "bu_id": "sales" })).await;
    assert_eq!(s, StatusCode::CREATED, "{m}");
    assert_eq!(m["data"]["bu_id"], "sales");
    assert_eq!(m["data"]["tenant_id"], t["tenant_id"]);
    assert_error(app.post("/api/memberships", Some(owner), json!({ "person_id": person })).await, 409, "Conflict");
    // A further persona under the membership.
    let (s, p) =
        app.post(&format!("/api/memberships/{}/personas", m["data"]["membership_id"].as_str().unwrap()), Some(owner), json!({ "kind": "human" })).await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    assert_eq!(p["data"]["membership_id"], m["data"]["membership_id"]);
    let (_, login) = app.post("/api/auth/login", None, json!({ "email": "p@example.com", "password": "p password", "tenant_id": t["tenant_id"] })).await;
    let c = claims(login["data"]["token"].as_str().unwrap());
    assert_eq!(c["bu_id"], "sales");
    assert_eq!(c["primary_persona_id"], m["data"]["persona_id"]);
    assert_eq!(c["all_persona_ids"], json!([m["data"]["persona_id"], p["data"]["persona_id"]]));
    // The membership and the further persona are in the tenant's chain; the
    // refused attempts are not.
    let (s, a) = app.post("/api/applications", Some(owner), json!({ "name": "Mobile", "slug": "mobile", "environment": "live" })).await;
    assert_eq!(s, StatusCode::CREATED, "{a}");
    let events = app.events_of(&t["tenant_id"]).await;
    assert_eq!(events, ["tenant.tenant.created.v1", "tenant.membership.created.v1", "identity.persona.created.v1", "identity.application.created.v1"],);
}
db_test!(memberships_bind_existing_people);

async fn app_identities_are_created_and_admitted(app: TestApp) {
    let t = app.signup("ai@example.com", "aiapp").await;
    let owner = t["token"].as_str().unwrap();
    let (_, reg) = app.post("/api/auth/register", None, json!({ "email": "q@example.com", "password": "q password", "display_name": "Q" })).await;
    let person = reg["data"]["person_id"].clone();
    assert_error(app.post("/api/app-identities", Some(owner), json!({ "person_id": person, "app_id": "other" })).await, 400, "ValidationError");
    let (s, ai) = app.post("/api/app-identities", Some(owner), json!({ "person_id": person, "app_id": "aiapp" })).await;
    assert_eq!(s, StatusCode::CREATED, "{ai}");
    let id = ai["data"]["app_identity_id"].as_str().unwrap();
    assert_error(app.post("/api/app-identities", Some(owner), json!({ "person_id": person, "app_id": "aiapp" })).await, 409, "Conflict");
    // Not visible while the person is no member of the tenant.
    assert_error(app.get(&format!("/api/app-identities/{id}"), Some(owner)).await, 404, "NotFound");
    let (s, m) = app.post(&format!("/api/app-identities/{id}/memberships"), Some(owner), json!({ "bu_id": "ops" })).await;
    assert_eq!(s, StatusCode::CREATED, "{m}");
    assert_eq!(m["data"]["person_id"], person);
    let (s, got) = app.get(&format!("/api/app-identities/{id}"), Some(owner)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(got["data"]["person_id"], person);
    assert_eq!(got["data"]["app_id"], "aiapp");
}
db_test!(app_identities_are_created_and_admitted);

async fn personas_are_created_and_crypto_shredded(app: TestApp) {
    let t = app.signup("ps@example.com", "ps").await;
    let owner = t["token"].as_str().unwrap();
    let body = assert_error(app.post("/api/personas", Some(owner), json!({ "kind": "robot" })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["kind must be one of: human, service, agent"]));
    let body = assert_error(
        app.post("/api/personas", Some(owner), json!({ "kind": "agent", "primary_role_template_id": "x", "attributes": ["Scout"] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["primary_role_template_id must be a UUID", "attributes must be a JSON object"]));
    let (s, p) = app.post("/api/personas", Some(owner), json!({ "kind": "agent", "attributes": { "nickname": "Scout" } })).await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    let id = p["data"]["persona_id"].as_str().unwrap().to_string();
    assert_eq!(p["data"]["attributes"], json!({ "nickname": "Scout" }));
    let sealed: Vec<u8> =
        sqlx::query_scalar("SELECT attributes_envelope FROM persona_persona WHERE persona_id = $1").bind(&id).fetch_one(&app.state().db.read).await.unwrap();
    assert!(!String::from_utf8_lossy(&sealed).contains("Scout"), "attributes are encrypted at rest");

    let (s, shredded) = app.post(&format!("/api/personas/{id}/shred"), Some(owner), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{shredded}");
    assert_eq!(shredded["data"]["status"], "shredded");
    assert_eq!(shredded["data"]["attributes"], Value::Null);
    assert!(shredded["data"]["shredded_at"].is_string());
    // The data key is gone: the ciphertext remains and can never be opened.
    let key: Option<Vec<u8>> =
        sqlx::query_scalar("SELECT k.wrapped_key FROM crypto_data_key k JOIN persona_persona p ON p.data_key_id = k.key_id WHERE p.persona_id = $1")
            .bind(&id)
            .fetch_one(&app.state().db.read)
            .await
            .unwrap();
    assert!(key.is_none());
    // Repeating answers the same; the person and their own persona are untouched.
    let (s, again) = app.post(&format!("/api/personas/{id}/shred"), Some(owner), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(again["data"]["shredded_at"], shredded["data"]["shredded_at"]);
    assert_eq!(app.get("/api/me", Some(owner)).await.0, StatusCode::OK);
    // A shredded persona holds no authority and takes no grants.
    let (_, roles) = app.get(&format!("/api/personas/{}/roles", t["persona_id"].as_str().unwrap()), Some(owner)).await;
    let owner_tpl = roles["data"]["roles"][0]["role_template_id"].clone();
    assert_error(app.post("/api/role-assignments", Some(owner), json!({ "persona_id": id, "role_template_id": owner_tpl })).await, 409, "Conflict");
}
db_test!(personas_are_created_and_crypto_shredded);

async fn role_routes_validate_their_references(app: TestApp) {
    let t = app.signup("rv@example.com", "rv").await;
    let owner = t["token"].as_str().unwrap();
    let other = app.signup("rv2@example.com", "rv2").await;
    let (_, roles) = app.get(&format!("/api/personas/{}/roles", other["persona_id"].as_str().unwrap()), other["token"].as_str()).await;
    let foreign_template = roles["data"]["roles"][0]["role_template_id"].clone();
    let body = assert_error(
        app.post("/api/role-assignments", Some(owner), json!({ "persona_id": t["persona_id"], "role_template_id": foreign_template })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["role_template_id does not name a role template of this tenant's app"]));
    let body = assert_error(
        app.post("/api/role-assignments", Some(owner), json!({ "persona_id": other["persona_id"], "role_template_id": foreign_template })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["persona_id does not name a persona of this tenant"]));
    let body = assert_error(app.post("/api/role-assignments", Some(owner), json!({})).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["persona_id is required", "role_template_id is required"]));
    let (s, r) = app.post(&format!("/api/role-assignments/{}/revoke", uuid::Uuid::now_v7()), Some(owner), json!({})).await;
    assert_eq!((s, r["error"].clone()), (StatusCode::NOT_FOUND, json!("NotFound")));
}
db_test!(role_routes_validate_their_references);
