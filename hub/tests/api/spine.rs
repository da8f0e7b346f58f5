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

async fn patch(app: &TestApp, path: &str, token: &str, body: Value) -> (StatusCode, Value) {
    app.call(reqwest::Method::PATCH, path, Some(token), Some(body)).await
}

/// Registers a person and admits them (with `body` besides the person);
/// answers the membership and the person's tenant token.
async fn admit(app: &TestApp, owner: &str, tenant_id: &Value, email: &str, body: Value) -> (Value, String) {
    let (s, reg) = app.post("/api/auth/register", None, json!({ "email": email, "password": "member password", "display_name": "M" })).await;
    assert_eq!(s, StatusCode::CREATED, "{reg}");
    let mut body = body;
    body["person_id"] = reg["data"]["person_id"].clone();
    let (s, m) = app.post("/api/memberships", Some(owner), body).await;
    assert_eq!(s, StatusCode::CREATED, "{m}");
    let (s, login) = app.post("/api/auth/login", None, json!({ "email": email, "password": "member password", "tenant_id": tenant_id })).await;
    assert_eq!(s, StatusCode::OK, "{login}");
    (m["data"].clone(), login["data"]["token"].as_str().unwrap().to_string())
}

async fn members_are_listed_changed_and_revoked_at_once(app: TestApp) {
    let t = app.signup("ml@example.com", "ml").await;
    let owner = t["token"].as_str().unwrap();
    let tid = t["tenant_id"].as_str().unwrap();
    let owner_tpl = app.owner_template(owner, t["persona_id"].as_str().unwrap()).await;
    let (m, member) = admit(&app, owner, &t["tenant_id"], "ml-p@example.com", json!({ "bu_id": "sales" })).await;
    let mid = m["membership_id"].as_str().unwrap().to_string();
    let members = format!("/api/tenants/{tid}/memberships");

    // The list, with each filter and its total.
    let (s, all) = app.get(&members, Some(owner)).await;
    assert_eq!((s, all["total"].as_i64()), (StatusCode::OK, Some(2)), "{all}");
    assert_eq!(all["data"][0]["membership_id"], mid.as_str(), "newest first");
    let (_, sales) = app.get(&format!("{members}?bu_id=sales"), Some(owner)).await;
    assert_eq!((sales["total"].as_i64(), sales["data"][0]["membership_id"].as_str()), (Some(1), Some(mid.as_str())));
    let (_, owners) = app.get(&format!("{members}?role_template_id={}", owner_tpl.as_str().unwrap()), Some(owner)).await;
    assert_eq!((owners["total"].as_i64(), owners["data"][0]["person_id"].clone()), (Some(1), t["person_id"].clone()));
    let (_, paged) = app.get(&format!("{members}?status=active&limit=1&offset=1"), Some(owner)).await;
    assert_eq!((paged["total"].as_i64(), paged["data"].as_array().unwrap().len()), (Some(2), 1));
    let b = assert_error(app.get(&format!("{members}?status=gone&role_template_id=x"), Some(owner)).await, 400, "ValidationError");
    assert_eq!(b["details"].as_array().unwrap().len(), 2, "{b}");
    assert_error(app.get(&format!("/api/tenants/{}/memberships", uuid::Uuid::now_v7()), Some(owner)).await, 404, "NotFound");

    // A role that grants something, given through the membership.
    let (s, tpl) = app.post("/api/role-templates", Some(owner), json!({ "name": "reader", "permissions": { "persona.persona.read": true } })).await;
    assert_eq!(s, StatusCode::CREATED, "{tpl}");
    let reader = tpl["data"]["role_template_id"].clone();
    assert_error(app.get("/api/personas", Some(&member)).await, 403, "Forbidden");
    let b = assert_error(patch(&app, &format!("/api/memberships/{mid}"), owner, json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of bu_id, role_template_id"]));
    let b = assert_error(
        patch(&app, &format!("/api/memberships/{mid}"), owner, json!({ "role_template_id": uuid::Uuid::now_v7().to_string() })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["role_template_id does not name a role template of the tenant's app"]));
    let (s, changed) = patch(&app, &format!("/api/memberships/{mid}"), owner, json!({ "bu_id": "ops", "role_template_id": reader })).await;
    assert_eq!(s, StatusCode::OK, "{changed}");
    assert_eq!((changed["data"]["bu_id"].as_str(), changed["data"]["role_template_id"].clone()), (Some("ops"), reader.clone()));
    // The member's persona took the role: it acts with it on the next request.
    let (s, listed) = app.get("/api/personas", Some(&member)).await;
    assert_eq!(s, StatusCode::OK, "{listed}");
    assert_error(patch(&app, &format!("/api/memberships/{}", uuid::Uuid::now_v7()), owner, json!({ "bu_id": "x" })).await, 404, "NotFound");

    // Revoked: the member's token holds nothing from the next request on.
    let revoke = format!("/api/memberships/{mid}/revoke");
    let (s, revoked) = app.post(&revoke, Some(owner), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{revoked}");
    assert_eq!(revoked["data"]["status"], "revoked");
    assert_error(app.get("/api/personas", Some(&member)).await, 403, "Forbidden");
    let (s, again) = app.post(&revoke, Some(owner), json!({})).await;
    assert_eq!((s, &again["data"]), (StatusCode::OK, &revoked["data"]));
    // Its persona is revoked with it; the person can no longer log in here.
    let (_, personas) = app.get(&format!("/api/personas?membership_id={mid}"), Some(owner)).await;
    assert_eq!((personas["total"].as_i64(), personas["data"][0]["status"].as_str()), (Some(1), Some("revoked")));
    let (s, _) = app.post("/api/auth/login", None, json!({ "email": "ml-p@example.com", "password": "member password", "tenant_id": tid })).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let b = assert_error(patch(&app, &format!("/api/memberships/{mid}"), owner, json!({ "bu_id": "x" })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the membership is revoked: only an active membership can be changed"]));
    let (_, gone) = app.get(&format!("{members}?status=revoked"), Some(owner)).await;
    assert_eq!(gone["total"], 1);
    assert_error(app.post(&format!("/api/memberships/{}/revoke", uuid::Uuid::now_v7()), Some(owner), json!({})).await, 404, "NotFound");

    // Admitted again: the same membership, active, with a new persona.
    let (s, back) = app.post("/api/memberships", Some(owner), json!({ "person_id": m["person_id"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{back}");
    assert_eq!((back["data"]["membership_id"].as_str(), back["data"]["status"].as_str()), (Some(mid.as_str()), Some("active")));
    assert_ne!(back["data"]["persona_id"], m["persona_id"]);
    let (s, login) = app.post("/api/auth/login", None, json!({ "email": "ml-p@example.com", "password": "member password", "tenant_id": tid })).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(claims(login["data"]["token"].as_str().unwrap())["primary_persona_id"], back["data"]["persona_id"]);
    // The old token stays powerless: its persona stays revoked.
    assert_error(app.get("/api/personas", Some(&member)).await, 403, "Forbidden");

    let events = app.events_of(&t["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "tenant.membership.updated.v1").count(), 1);
    assert_eq!(events.iter().filter(|e| *e == "tenant.membership.revoked.v1").count(), 1);
}
db_test!(members_are_listed_changed_and_revoked_at_once);

async fn a_revoked_member_is_refused_on_every_replica(app: TestApp) {
    if app.backend != Backend::Postgres {
        return;
    }
    let t = app.signup("rr@example.com", "rr").await;
    let owner = t["token"].as_str().unwrap();
    let (s, tpl) = app.post("/api/role-templates", Some(owner), json!({ "name": "reader", "permissions": { "persona.persona.read": true } })).await;
    assert_eq!(s, StatusCode::CREATED, "{tpl}");
    let (m, member) = admit(&app, owner, &t["tenant_id"], "rr-p@example.com", json!({ "role_template_id": tpl["data"]["role_template_id"] })).await;
    let replica = app.replica().await;
    // The replica has the member's permissions cached.
    assert_eq!(replica.get("/api/personas", Some(&member)).await.0, StatusCode::OK);
    let (s, r) = app.post(&format!("/api/memberships/{}/revoke", m["membership_id"].as_str().unwrap()), Some(owner), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let mut refused = false;
    for _ in 0..100 {
        if replica.get("/api/personas", Some(&member)).await.0 == StatusCode::FORBIDDEN {
            refused = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(refused, "the replica dropped the revoked persona's permissions");
}
db_test!(a_revoked_member_is_refused_on_every_replica);

async fn the_last_owner_cannot_be_removed_or_demoted(app: TestApp) {
    let t = app.signup("lo@example.com", "lo").await;
    let owner = t["token"].as_str().unwrap();
    let own = t["membership_id"].as_str().unwrap();
    let owner_tpl = app.owner_template(owner, t["persona_id"].as_str().unwrap()).await;
    let (_, member_tpl) = app.get("/api/role-templates?name=member", Some(owner)).await;
    let member_tpl = member_tpl["data"][0]["role_template_id"].clone();
    let last = json!(["the tenant's last owner cannot be removed or demoted: make another member an owner first"]);
    let b = assert_error(app.post(&format!("/api/memberships/{own}/revoke"), Some(owner), json!({})).await, 409, "Conflict");
    assert_eq!(b["details"], last);
    let b = assert_error(patch(&app, &format!("/api/memberships/{own}"), owner, json!({ "role_template_id": member_tpl })).await, 409, "Conflict");
    assert_eq!(b["details"], last);
    let b = assert_error(
        patch(&app, &format!("/api/personas/{}", t["persona_id"].as_str().unwrap()), owner, json!({ "primary_role_template_id": member_tpl })).await,
        409,
        "Conflict",
    );
    assert_eq!(b["details"], last);
    // A change that keeps the owner is no demotion.
    let (s, _) = patch(&app, &format!("/api/memberships/{own}"), owner, json!({ "bu_id": "board" })).await;
    assert_eq!(s, StatusCode::OK);

    // With a second owner, the first may go; then the second is the last.
    let (second, second_token) = admit(&app, owner, &t["tenant_id"], "lo-2@example.com", json!({ "role_template_id": owner_tpl })).await;
    let (s, r) = app.post(&format!("/api/memberships/{own}/revoke"), Some(&second_token), json!({})).await;
    assert_eq!((s, r["data"]["status"].as_str()), (StatusCode::OK, Some("revoked")), "{r}");
    assert_error(app.get("/api/personas", Some(owner)).await, 403, "Forbidden");
    let b = assert_error(
        app.post(&format!("/api/memberships/{}/revoke", second["membership_id"].as_str().unwrap()), Some(&second_token), json!({})).await,
        409,
        "Conflict",
    );
    assert_eq!(b["details"], last);
}
db_test!(the_last_owner_cannot_be_removed_or_demoted);

async fn nobody_changes_a_member_beyond_their_own_authority(app: TestApp) {
    let t = app.signup("mc@example.com", "mc").await;
    let owner = t["token"].as_str().unwrap();
    let owner_tpl = app.owner_template(owner, t["persona_id"].as_str().unwrap()).await;
    let perms = json!({ "membership.membership.write": true, "persona.persona.write": true, "persona.persona.read": true });
    let (s, tpl) = app.post("/api/role-templates", Some(owner), json!({ "name": "admin-lite", "permissions": perms })).await;
    assert_eq!(s, StatusCode::CREATED, "{tpl}");
    let (_, admin) = admit(&app, owner, &t["tenant_id"], "mc-a@example.com", json!({ "role_template_id": tpl["data"]["role_template_id"] })).await;
    let (plain, _) = admit(&app, owner, &t["tenant_id"], "mc-p@example.com", json!({})).await;
    let plain_id = plain["membership_id"].as_str().unwrap();
    // The owner holds more than the admin: neither removed nor changed by them.
    let b =
        assert_error(app.post(&format!("/api/memberships/{}/revoke", t["membership_id"].as_str().unwrap()), Some(&admin), json!({})).await, 403, "Forbidden");
    assert!(b["details"][0].as_str().unwrap().contains("does not hold"), "{b}");
    assert_error(patch(&app, &format!("/api/memberships/{plain_id}"), &admin, json!({ "role_template_id": owner_tpl })).await, 403, "Forbidden");
    assert_error(
        patch(&app, &format!("/api/personas/{}", plain["persona_id"].as_str().unwrap()), &admin, json!({ "primary_role_template_id": owner_tpl })).await,
        403,
        "Forbidden",
    );
    // A member within the admin's authority may be changed and removed.
    let (s, _) = patch(&app, &format!("/api/memberships/{plain_id}"), &admin, json!({ "bu_id": "field" })).await;
    assert_eq!(s, StatusCode::OK);
    let (s, r) = app.post(&format!("/api/memberships/{plain_id}/revoke"), Some(&admin), json!({})).await;
    assert_eq!((s, r["data"]["status"].as_str()), (StatusCode::OK, Some("revoked")), "{r}");
}
db_test!(nobody_changes_a_member_beyond_their_own_authority);

async fn tenants_are_read_listed_and_changed(app: TestApp) {
    let t = app.signup("tl@example.com", "tl").await;
    let owner = t["token"].as_str().unwrap();
    let tid = t["tenant_id"].as_str().unwrap();
    let other = app.signup("tl2@example.com", "tl2").await;
    let mut kids = Vec::new();
    for app_id in ["tl-kid-1", "tl-kid-2"] {
        let (s, c) = app.post("/api/tenants", Some(owner), json!({ "app_id": app_id, "display_name": app_id })).await;
        assert_eq!(s, StatusCode::CREATED, "{c}");
        kids.push(c["data"]["tenant_id"].as_str().unwrap().to_string());
    }
    let (s, own) = app.get(&format!("/api/tenants/{tid}"), Some(owner)).await;
    assert_eq!((s, own["data"]["tenant_id"].as_str(), own["data"]["status"].as_str()), (StatusCode::OK, Some(tid), Some("trial")));
    let (s, kid) = app.get(&format!("/api/tenants/{}", kids[0]), Some(owner)).await;
    assert_eq!((s, kid["data"]["parent_tenant_id"].as_str()), (StatusCode::OK, Some(tid)));
    assert_error(app.get(&format!("/api/tenants/{}", other["tenant_id"].as_str().unwrap()), Some(owner)).await, 404, "NotFound");
    assert_error(app.get("/api/tenants/not-a-uuid", Some(owner)).await, 404, "NotFound");

    let (s, list) = app.get("/api/tenants", Some(owner)).await;
    assert_eq!((s, list["total"].as_i64()), (StatusCode::OK, Some(2)), "{list}");
    assert_eq!(list["data"][0]["tenant_id"], kids[1].as_str(), "newest first");
    let (_, trial) = app.get("/api/tenants?status=trial&limit=1", Some(owner)).await;
    assert_eq!((trial["total"].as_i64(), trial["data"].as_array().unwrap().len()), (Some(2), 1));
    let (_, none) = app.get("/api/tenants?status=offboarding", Some(owner)).await;
    assert_eq!(none["total"], 0);
    assert_error(app.get("/api/tenants?status=sleeping", Some(owner)).await, 400, "ValidationError");
    let (_, theirs) = app.get("/api/tenants", other["token"].as_str()).await;
    assert_eq!(theirs["total"], 0);

    let url = format!("/api/tenants/{}", kids[0]);
    let b = assert_error(patch(&app, &url, owner, json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of display_name, brand_domain, module_subscriptions"]));
    let b = assert_error(patch(&app, &url, owner, json!({ "display_name": " " })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["display_name is required"]));
    let b = assert_error(patch(&app, &url, owner, json!({ "module_subscriptions": ["crm", ""] })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["module_subscriptions must be names of 1-128 characters"]));
    assert_error(patch(&app, &url, owner, json!({ "display_name": "d".repeat(201) })).await, 400, "ValidationError");
    let (s, changed) =
        patch(&app, &url, owner, json!({ "display_name": "Kid One", "brand_domain": "kid.example.com", "module_subscriptions": ["crm", "ai"] })).await;
    assert_eq!(s, StatusCode::OK, "{changed}");
    let c = &changed["data"];
    assert_eq!(
        (c["display_name"].as_str(), c["brand_domain"].as_str(), c["module_subscriptions"].clone()),
        (Some("Kid One"), Some("kid.example.com"), json!(["crm", "ai"]))
    );
    let (s, renamed) = patch(&app, &format!("/api/tenants/{tid}"), owner, json!({ "display_name": "Parent" })).await;
    assert_eq!(
        (s, renamed["data"]["display_name"].as_str(), renamed["data"]["brand_domain"].clone()),
        (StatusCode::OK, Some("Parent"), own["data"]["brand_domain"].clone())
    );
    assert_error(
        patch(&app, &format!("/api/tenants/{}", other["tenant_id"].as_str().unwrap()), owner, json!({ "display_name": "Mine" })).await,
        404,
        "NotFound",
    );
    let events = app.events_of(&t["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "tenant.tenant.updated.v1").count(), 2);
}
db_test!(tenants_are_read_listed_and_changed);

async fn personas_are_listed_and_changed(app: TestApp) {
    let t = app.signup("pl@example.com", "pl").await;
    let owner = t["token"].as_str().unwrap();
    let (s, agent) = app.post("/api/personas", Some(owner), json!({ "kind": "agent", "attributes": { "nickname": "Scout" } })).await;
    assert_eq!(s, StatusCode::CREATED, "{agent}");
    let id = agent["data"]["persona_id"].as_str().unwrap().to_string();
    let (_, service) = app.post("/api/personas", Some(owner), json!({ "kind": "service" })).await;

    let (s, all) = app.get("/api/personas", Some(owner)).await;
    assert_eq!((s, all["total"].as_i64()), (StatusCode::OK, Some(3)), "{all}");
    assert_eq!(all["data"][0]["persona_id"], service["data"]["persona_id"], "newest first");
    assert!(all["data"][0].get("attributes_envelope").is_none() && all["data"][0].get("data_key_id").is_none());
    let (_, agents) = app.get("/api/personas?kind=agent", Some(owner)).await;
    assert_eq!((agents["total"].as_i64(), agents["data"][0]["persona_id"].as_str()), (Some(1), Some(id.as_str())));
    let (_, mine) = app.get(&format!("/api/personas?membership_id={}&status=active", t["membership_id"].as_str().unwrap()), Some(owner)).await;
    assert_eq!(mine["total"], 3);
    let b = assert_error(app.get("/api/personas?kind=robot&membership_id=x&status=gone", Some(owner)).await, 400, "ValidationError");
    assert_eq!(b["details"].as_array().unwrap().len(), 3, "{b}");
    let other = app.signup("pl2@example.com", "pl2").await;
    let (_, theirs) = app.get("/api/personas", other["token"].as_str()).await;
    assert_eq!(theirs["total"], 1);

    let url = format!("/api/personas/{id}");
    let b = assert_error(patch(&app, &url, owner, json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of primary_role_template_id, attributes"]));
    assert_error(patch(&app, &url, owner, json!({ "attributes": ["x"], "primary_role_template_id": "x" })).await, 400, "ValidationError");
    let (s, tpl) = app.post("/api/role-templates", Some(owner), json!({ "name": "scout", "permissions": { "crm.contact.read": true } })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, changed) =
        patch(&app, &url, owner, json!({ "attributes": { "nickname": "Ranger" }, "primary_role_template_id": tpl["data"]["role_template_id"] })).await;
    assert_eq!(s, StatusCode::OK, "{changed}");
    assert_eq!(
        (changed["data"]["attributes"].clone(), changed["data"]["primary_role_template_id"].clone()),
        (json!({ "nickname": "Ranger" }), tpl["data"]["role_template_id"].clone())
    );
    let (_, read) = app.get(&url, Some(owner)).await;
    assert_eq!(read["data"]["attributes"], json!({ "nickname": "Ranger" }));
    let (_, roles) = app.get(&format!("{url}/roles"), Some(owner)).await;
    assert_eq!(roles["data"]["effective_permissions"], json!(["crm.contact.read"]));
    // Only the role: the attributes stay.
    let (s, kept) = patch(&app, &url, owner, json!({ "primary_role_template_id": tpl["data"]["role_template_id"] })).await;
    assert_eq!((s, kept["data"]["attributes"].clone()), (StatusCode::OK, json!({ "nickname": "Ranger" })));
    let sealed: Vec<u8> =
        sqlx::query_scalar("SELECT attributes_envelope FROM persona_persona WHERE persona_id = $1").bind(&id).fetch_one(&app.state().db.read).await.unwrap();
    assert!(!String::from_utf8_lossy(&sealed).contains("Ranger"), "attributes are encrypted at rest");

    let (s, _) = app.post(&format!("{url}/shred"), Some(owner), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    let b = assert_error(patch(&app, &url, owner, json!({ "attributes": {} })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the persona is shredded: only an active persona can be changed"]));
    let (_, shredded) = app.get("/api/personas?status=shredded", Some(owner)).await;
    assert_eq!(shredded["total"], 1);
    assert_error(patch(&app, &format!("/api/personas/{}", uuid::Uuid::now_v7()), owner, json!({ "attributes": {} })).await, 404, "NotFound");
    let events = app.events_of(&t["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "identity.persona.updated.v1").count(), 2);
}
db_test!(personas_are_listed_and_changed);

async fn role_templates_are_listed_read_changed_and_deleted(app: TestApp) {
    let t = app.signup("rt@example.com", "rt").await;
    let owner = t["token"].as_str().unwrap();
    let other = app.signup("rt2@example.com", "rt2").await;
    let (s, tpl) = app.post("/api/role-templates", Some(owner), json!({ "name": "clerk", "permissions": { "crm.contact.read": true } })).await;
    assert_eq!(s, StatusCode::CREATED, "{tpl}");
    let id = tpl["data"]["role_template_id"].as_str().unwrap().to_string();

    let (s, all) = app.get("/api/role-templates", Some(owner)).await;
    assert_eq!((s, all["total"].as_i64()), (StatusCode::OK, Some(3)), "{all}");
    assert_eq!(all["data"][0]["role_template_id"], id.as_str(), "newest first");
    let (_, platform) = app.get("/api/role-templates?owner=platform", Some(owner)).await;
    let mut names: Vec<&str> = platform["data"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!((platform["total"].as_i64(), names), (Some(2), vec!["member", "owner"]));
    let (_, own) = app.get("/api/role-templates?owner=tenant", Some(owner)).await;
    assert_eq!(own["total"], 1);
    let (_, named) = app.get("/api/role-templates?name=owner", Some(owner)).await;
    assert_eq!((named["total"].as_i64(), named["data"][0]["tenant_id"].clone()), (Some(1), Value::Null));
    assert_error(app.get("/api/role-templates?owner=someone", Some(owner)).await, 400, "ValidationError");
    let (_, theirs) = app.get("/api/role-templates", other["token"].as_str()).await;
    assert_eq!(theirs["total"], 2);

    let url = format!("/api/role-templates/{id}");
    let (s, read) = app.get(&url, Some(owner)).await;
    assert_eq!((s, read["data"]["name"].as_str()), (StatusCode::OK, Some("clerk")));
    let owner_tpl = named["data"][0]["role_template_id"].as_str().unwrap().to_string();
    let (s, default) = app.get(&format!("/api/role-templates/{owner_tpl}"), Some(owner)).await;
    assert_eq!((s, default["data"]["permissions"].clone()), (StatusCode::OK, json!({ "*": true })));
    assert_error(app.get(&url, other["token"].as_str()).await, 404, "NotFound");

    // A holder's authority follows the template.
    let (s, p) = app.post("/api/personas", Some(owner), json!({ "kind": "service", "primary_role_template_id": id })).await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    let holder = p["data"]["persona_id"].as_str().unwrap().to_string();
    let b = assert_error(patch(&app, &url, owner, json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of permissions, parent_role_template_id"]));
    let b = assert_error(patch(&app, &url, owner, json!({ "permissions": { "not a scope": true } })).await, 400, "ValidationError");
    assert!(b["details"][0].as_str().unwrap().contains("not a scope"), "{b}");
    let b = assert_error(patch(&app, &url, owner, json!({ "parent_role_template_id": id })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["parent_role_template_id would make the template inherit from itself"]));
    let (s, changed) = patch(&app, &url, owner, json!({ "permissions": { "crm.contact.read": true, "crm.lead.read": true } })).await;
    assert_eq!(s, StatusCode::OK, "{changed}");
    assert_eq!(changed["data"]["permissions"], json!({ "crm.contact.read": true, "crm.lead.read": true }));
    let (_, roles) = app.get(&format!("/api/personas/{holder}/roles"), Some(owner)).await;
    assert_eq!(roles["data"]["effective_permissions"], json!(["crm.contact.read", "crm.lead.read"]));
    let b = assert_error(patch(&app, &format!("/api/role-templates/{owner_tpl}"), owner, json!({ "permissions": {} })).await, 409, "Conflict");
    assert!(b["details"][0].as_str().unwrap().contains("platform default"), "{b}");
    assert_error(patch(&app, &url, other["token"].as_str().unwrap(), json!({ "permissions": {} })).await, 404, "NotFound");

    // Deleted only when nothing uses it.
    let b = assert_error(app.call(reqwest::Method::DELETE, &url, Some(owner), None).await, 409, "Conflict");
    assert!(b["details"][0].as_str().unwrap().contains("in use"), "{b}");
    assert_error(app.call(reqwest::Method::DELETE, &format!("/api/role-templates/{owner_tpl}"), Some(owner), None).await, 409, "Conflict");
    let (s, spare) = app.post("/api/role-templates", Some(owner), json!({ "name": "spare" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let spare = spare["data"]["role_template_id"].as_str().unwrap().to_string();
    let (s, gone) = app.call(reqwest::Method::DELETE, &format!("/api/role-templates/{spare}"), Some(owner), None).await;
    assert_eq!((s, gone["data"].clone()), (StatusCode::OK, json!({ "role_template_id": spare, "deleted": true })));
    assert_error(app.get(&format!("/api/role-templates/{spare}"), Some(owner)).await, 404, "NotFound");
    assert_error(app.call(reqwest::Method::DELETE, &format!("/api/role-templates/{spare}"), Some(owner), None).await, 404, "NotFound");
    let events = app.events_of(&t["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "identity.role_template.updated.v1").count(), 1);
    assert_eq!(events.iter().filter(|e| *e == "identity.role_template.deleted.v1").count(), 1);
}
db_test!(role_templates_are_listed_read_changed_and_deleted);

async fn a_template_is_changed_only_within_the_changers_authority(app: TestApp) {
    let t = app.signup("tc@example.com", "tc").await;
    let owner = t["token"].as_str().unwrap();
    let perms = json!({ "role-template.role-template.write": true, "crm.contact.read": true });
    let (s, admin_tpl) = app.post("/api/role-templates", Some(owner), json!({ "name": "template-admin", "permissions": perms })).await;
    assert_eq!(s, StatusCode::CREATED, "{admin_tpl}");
    let (_, admin) = admit(&app, owner, &t["tenant_id"], "tc-a@example.com", json!({ "role_template_id": admin_tpl["data"]["role_template_id"] })).await;
    let (s, wide) = app.post("/api/role-templates", Some(owner), json!({ "name": "wide", "permissions": { "crm.*": true } })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, narrow) = app.post("/api/role-templates", Some(&admin), json!({ "name": "narrow", "permissions": { "crm.contact.read": true } })).await;
    assert_eq!(s, StatusCode::CREATED, "{narrow}");
    // Neither widening a template nor narrowing one above the changer.
    let narrow_url = format!("/api/role-templates/{}", narrow["data"]["role_template_id"].as_str().unwrap());
    let b = assert_error(patch(&app, &narrow_url, &admin, json!({ "permissions": { "crm.contact.write": true } })).await, 403, "Forbidden");
    assert_eq!(b["required_scopes"], json!(["crm.contact.write"]));
    let wide_url = format!("/api/role-templates/{}", wide["data"]["role_template_id"].as_str().unwrap());
    assert_error(patch(&app, &wide_url, &admin, json!({ "permissions": {} })).await, 403, "Forbidden");
    assert_error(patch(&app, &narrow_url, &admin, json!({ "parent_role_template_id": wide["data"]["role_template_id"] })).await, 403, "Forbidden");
    let (s, _) = patch(&app, &narrow_url, &admin, json!({ "permissions": {} })).await;
    assert_eq!(s, StatusCode::OK);
}
db_test!(a_template_is_changed_only_within_the_changers_authority);

async fn role_assignments_are_listed(app: TestApp) {
    let t = app.signup("ra@example.com", "ra").await;
    let owner = t["token"].as_str().unwrap();
    let (_, tpl) = app.post("/api/role-templates", Some(owner), json!({ "name": "viewer", "permissions": { "crm.contact.read": true } })).await;
    let tpl = tpl["data"]["role_template_id"].clone();
    let mut grants = Vec::new();
    let mut personas = Vec::new();
    for _ in 0..2 {
        let (_, p) = app.post("/api/personas", Some(owner), json!({ "kind": "service" })).await;
        let (s, g) = app.post("/api/role-assignments", Some(owner), json!({ "persona_id": p["data"]["persona_id"], "role_template_id": tpl })).await;
        assert_eq!(s, StatusCode::CREATED, "{g}");
        personas.push(p["data"]["persona_id"].as_str().unwrap().to_string());
        grants.push(g["data"]["assignment_id"].as_str().unwrap().to_string());
    }
    let (s, r) = app.post(&format!("/api/role-assignments/{}/revoke", grants[0]), Some(owner), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let (s, all) = app.get("/api/role-assignments", Some(owner)).await;
    assert_eq!((s, all["total"].as_i64()), (StatusCode::OK, Some(2)), "{all}");
    assert_eq!(all["data"][0]["assignment_id"], grants[1].as_str(), "newest first");
    assert_eq!(all["data"][0]["granted_by"], t["persona_id"]);
    let (_, holders) = app.get(&format!("/api/role-assignments?role_template_id={}&status=live", tpl.as_str().unwrap()), Some(owner)).await;
    assert_eq!((holders["total"].as_i64(), holders["data"][0]["persona_id"].as_str()), (Some(1), Some(personas[1].as_str())));
    let (_, of) = app.get(&format!("/api/role-assignments?persona_id={}", personas[0]), Some(owner)).await;
    assert_eq!((of["total"].as_i64(), of["data"][0]["revoked_at"].is_string()), (Some(1), true));
    let (_, revoked) = app.get("/api/role-assignments?status=revoked&limit=1", Some(owner)).await;
    assert_eq!(revoked["total"], 1);
    assert_error(app.get("/api/role-assignments?status=expired&persona_id=x", Some(owner)).await, 400, "ValidationError");
    let other = app.signup("ra2@example.com", "ra2").await;
    let (_, theirs) = app.get("/api/role-assignments", other["token"].as_str()).await;
    assert_eq!(theirs["total"], 0);
}
db_test!(role_assignments_are_listed);
