//! Signup, registration, verification, login and the six-layer token.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

fn signup_body(email: &str, app_id: &str) -> Value {
    json!({
        "email": email, "password": "correct horse battery", "org_name": "Acme",
        "app_id": app_id, "display_name": "Ada Admin", "region": "eu-west-1",
    })
}

async fn signup_creates_the_whole_tenant_spine(app: TestApp) {
    let (s, body) = app.post("/api/auth/signup-tenant", None, signup_body("Ada@Example.com", "acme")).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let d = &body["data"];
    assert_eq!(body["success"], true);
    assert_eq!(d["status"], "trial");
    assert_eq!(d["isolation_tier"], "S");
    assert_eq!(d["app_id"], "acme");
    for f in ["tenant_id", "person_id", "org_id", "membership_id", "persona_id", "app_identity_id"] {
        assert!(uuid::Uuid::parse_str(d[f].as_str().unwrap()).is_ok(), "{f}: {d}");
    }
    let c = claims(d["token"].as_str().unwrap());
    assert_eq!(c["sub"], d["person_id"]);
    assert_eq!(c["email"], "ada@example.com");
    assert_eq!(c["display_name"], "Ada Admin");
    assert_eq!(c["tenant_id"], d["tenant_id"]);
    assert_eq!(c["org_id"], d["org_id"]);
    assert_eq!(c["app_id"], "acme");
    assert_eq!(c["bu_id"], Value::Null);
    assert_eq!(c["parent_tenant_id"], Value::Null);
    assert_eq!(c["root_tenant_id"], d["tenant_id"]);
    assert_eq!(c["reseller_id"], Value::Null);
    assert_eq!(c["primary_persona_id"], d["persona_id"]);
    assert_eq!(c["all_persona_ids"], json!([d["persona_id"]]));
    assert_eq!(c["admin_pool_index"], 0);
    assert_eq!(c["app_pool_index"], json!({ "acme": 0 }));
    assert_eq!(c["actor"], json!({ "kind": "human" }));
    assert_eq!(c["amr"], json!(["pwd"]));
    assert!(c.get("scopes").is_none(), "human tokens carry no scopes: {c}");
    assert_eq!(c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap(), 3600);
    assert_eq!(c["iss"], "http://localhost");
    assert!(c["jti"].is_string());
    // The email is stored encrypted: its plaintext is nowhere in the alias row.
    let enc: Vec<u8> = sqlx::query_scalar("SELECT value_enc FROM identity_alias").fetch_one(&app.state().db.read).await.unwrap();
    assert!(!String::from_utf8_lossy(&enc).contains("ada@example.com"));
    let band: Vec<u8> = sqlx::query_scalar("SELECT fields_envelope FROM profile_band").fetch_one(&app.state().db.read).await.unwrap();
    assert!(!String::from_utf8_lossy(&band).contains("Ada Admin"));
}
db_test!(signup_creates_the_whole_tenant_spine);

async fn signup_refuses_an_existing_person_unless_that_person_signs_in(app: TestApp) {
    let first = app.signup("dup@example.com", "one").await;
    let body = assert_error(app.post("/api/auth/signup-tenant", None, signup_body("DUP@example.com", "two")).await, 409, "PersonExistsError");
    assert!(body["details"].is_array());
    // Another person's token does not help.
    let other = app.signup("other@example.com", "three").await;
    assert_error(app.post("/api/auth/signup-tenant", other["token"].as_str(), signup_body("dup@example.com", "two")).await, 409, "PersonExistsError");
    // The person's own token reuses the person.
    let (s, body) = app.post("/api/auth/signup-tenant", first["token"].as_str(), signup_body("dup@example.com", "two")).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    assert_eq!(body["data"]["person_id"], first["person_id"]);
    assert_ne!(body["data"]["tenant_id"], first["tenant_id"]);
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM identity_person").fetch_one(&app.state().db.read).await.unwrap();
    assert_eq!(n, 2);
}
db_test!(signup_refuses_an_existing_person_unless_that_person_signs_in);

async fn a_failed_signup_leaves_nothing_behind(app: TestApp) {
    app.signup("first@example.com", "taken").await;
    // The app_id is taken: the transaction fails after the person was written.
    let body = assert_error(app.post("/api/auth/signup-tenant", None, signup_body("second@example.com", "taken")).await, 409, "Conflict");
    assert!(body["details"][0].as_str().unwrap().contains("taken"));
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM identity_person").fetch_one(&app.state().db.read).await.unwrap();
    assert_eq!(n, 1, "no person of the failed signup remains");
    // So the same email can sign up again.
    app.signup("second@example.com", "fresh").await;
}
db_test!(a_failed_signup_leaves_nothing_behind);

async fn signup_reports_every_missing_field(app: TestApp) {
    let body = assert_error(app.post("/api/auth/signup-tenant", None, json!({ "email": " ", "password": null })).await, 400, "ValidationError");
    assert_eq!(
        body["details"],
        json!(["email is required", "password is required", "org_name is required", "app_id is required", "display_name is required", "region is required",])
    );
    let body = assert_error(
        app.post(
            "/api/auth/signup-tenant",
            None,
            json!({
                "email": "not-an-email", "password": "short", "org_name": "o", "app_id": "a", "display_name": "d", "region": "r",
            }),
        )
        .await,
        400,
        "ValidationError",
    );
    // The body's schema first (the password's length); then the email's
    // form, which the schema cannot say.
    assert_eq!(body["details"], json!(["password must be at least 8 characters"]));
    let body = assert_error(
        app.post(
            "/api/auth/signup-tenant",
            None,
            json!({
                "email": "not-an-email", "password": "long enough", "org_name": "o", "app_id": "a", "display_name": "d", "region": "r",
            }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["email must be an email address"]));
}
db_test!(signup_reports_every_missing_field);

async fn login_mints_person_and_tenant_tokens(app: TestApp) {
    let t = app.signup("log@example.com", "logapp").await;
    let creds = json!({ "email": "log@example.com", "password": "correct horse battery" });
    let (s, body) = app.post("/api/auth/login", None, creds.clone()).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let c = claims(body["data"]["token"].as_str().unwrap());
    assert_eq!(c["sub"], t["person_id"]);
    for absent in ["tenant_id", "org_id", "app_id", "bu_id", "primary_persona_id", "scopes"] {
        assert!(c.get(absent).is_none(), "person-level token has no {absent}: {c}");
    }
    // The person-level token lists memberships but reaches no tenant route.
    let person_token = body["data"]["token"].as_str().unwrap().to_string();
    let (s, list) = app.get("/api/memberships", Some(&person_token)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(list["data"][0]["tenant_id"], t["tenant_id"]);
    assert_eq!(list["data"][0]["role_template_name"], "owner");
    assert_eq!(list["data"][0]["has_app_identity"], true);
    assert_error(app.get("/api/applications", Some(&person_token)).await, 403, "Forbidden");

    let mut with_tenant = creds.clone();
    with_tenant["tenant_id"] = t["tenant_id"].clone();
    let (s, body) = app.post("/api/auth/login", None, with_tenant).await;
    assert_eq!(s, StatusCode::OK);
    let c = claims(body["data"]["token"].as_str().unwrap());
    assert_eq!(c["tenant_id"], t["tenant_id"]);
    assert_eq!(c["primary_persona_id"], t["persona_id"]);

    // Wrong password and unknown email look the same.
    assert_error(app.post("/api/auth/login", None, json!({ "email": "log@example.com", "password": "wrong password" })).await, 401, "Unauthorized");
    assert_error(app.post("/api/auth/login", None, json!({ "email": "nobody@example.com", "password": "wrong password" })).await, 401, "Unauthorized");
    // A tenant the person is not a member of.
    let other = app.signup("else@example.com", "elseapp").await;
    let mut foreign = creds.clone();
    foreign["tenant_id"] = other["tenant_id"].clone();
    assert_error(app.post("/api/auth/login", None, foreign).await, 403, "NoMembership");
    // Every missing field at once, and a tenant_id that is no UUID, before any password check.
    let body = assert_error(app.post("/api/auth/login", None, json!({ "password": " ", "tenant_id": "" })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["email is required", "password is required", "tenant_id must be a UUID"]));
}
db_test!(login_mints_person_and_tenant_tokens);

async fn scoped_login_creates_the_app_identity_on_first_use(app: TestApp) {
    let owner = app.signup("own@example.com", "shop").await;
    let owner_token = owner["token"].as_str().unwrap();
    let (s, reg) = app.post("/api/auth/register", None, json!({ "email": "user@example.com", "password": "user password", "display_name": "Uma" })).await;
    assert_eq!(s, StatusCode::CREATED, "{reg}");
    let person = reg["data"]["person_id"].as_str().unwrap();
    let (s, m) = app.post("/api/memberships", Some(owner_token), json!({ "person_id": person })).await;
    assert_eq!(s, StatusCode::CREATED, "{m}");
    let login = |app_id: Option<&str>| {
        let mut b = json!({ "email": "user@example.com", "password": "user password", "tenant_id": owner["tenant_id"] });
        if let Some(a) = app_id {
            b["app_id"] = json!(a);
        }
        b
    };
    let (_, body) = app.post("/api/auth/login", None, login(None)).await;
    let (_, list) = app.get("/api/memberships", body["data"]["token"].as_str()).await;
    assert_eq!(list["data"][0]["has_app_identity"], false);
    let (s, body) = app.post("/api/auth/login", None, login(Some("shop"))).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let (_, list) = app.get("/api/memberships", body["data"]["token"].as_str()).await;
    assert_eq!(list["data"][0]["has_app_identity"], true);
    assert_eq!(list["data"][0]["role_template_name"], "member");
    // Logging in again does not create a second one.
    app.post("/api/auth/login", None, login(Some("shop"))).await;
    let n: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM identity_app_identity WHERE person_id = $1").bind(person).fetch_one(&app.state().db.read).await.unwrap();
    assert_eq!(n, 1);
}
db_test!(scoped_login_creates_the_app_identity_on_first_use);

async fn register_and_verify_an_email(app: TestApp) {
    let (s, _) = app.post("/api/auth/register", None, json!({ "email": "v@example.com", "password": "a long password", "display_name": "Vee" })).await;
    assert_eq!(s, StatusCode::CREATED);
    assert_error(
        app.post("/api/auth/register", None, json!({ "email": "V@example.com", "password": "a long password", "display_name": "Vee" })).await,
        409,
        "PersonExistsError",
    );

    let (s, st) = app.get("/api/auth/verification-status?email=v@example.com", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(st["data"]["verified"], false);
    assert_error(app.get("/api/auth/verification-status", None).await, 400, "ValidationError");

    let (s, sent) = app.post("/api/auth/send-verification-email", None, json!({ "email": "v@example.com" })).await;
    assert_eq!(s, StatusCode::OK, "{sent}");
    let token = sent["data"]["dev_token"].as_str().unwrap().to_string();
    // An unknown email gets the same answer, without a token.
    let (s, unknown) = app.post("/api/auth/send-verification-email", None, json!({ "email": "ghost@example.com" })).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(unknown["data"]["sent"], true);
    assert!(unknown["data"].get("dev_token").is_none());

    assert_error(app.post("/api/auth/verify-email", None, json!({ "token": "wrong" })).await, 400, "ValidationError");
    let (s, v) = app.post("/api/auth/verify-email", None, json!({ "token": token })).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["data"]["verified"], true);
    // A token works once.
    assert_error(app.post("/api/auth/verify-email", None, json!({ "token": token })).await, 400, "ValidationError");
    let (_, st) = app.get("/api/auth/verification-status?email=V@example.com", None).await;
    assert_eq!(st["data"]["verified"], true);
    assert!(st["data"]["verified_at"].is_string());
}
db_test!(register_and_verify_an_email);

async fn jwks_publishes_the_key_that_signs_tokens(app: TestApp) {
    let t = app.signup("jw@example.com", "jw").await;
    let (s, jwks) = app.get("/.well-known/jwks.json", None).await;
    assert_eq!(s, StatusCode::OK);
    let key = &jwks["keys"][0];
    assert_eq!(key["kty"], "EC");
    assert_eq!(key["crv"], "P-256");
    assert_eq!(key["alg"], "ES256");
    assert_eq!(key["use"], "sig");
    let token = t["token"].as_str().unwrap();
    let header = jsonwebtoken::decode_header(token).unwrap();
    assert_eq!(header.alg, jsonwebtoken::Algorithm::ES256);
    assert_eq!(header.kid.as_deref(), key["kid"].as_str());
    // A stock JWT library verifies the token with the published key alone.
    let decoding = jsonwebtoken::DecodingKey::from_ec_components(key["x"].as_str().unwrap(), key["y"].as_str().unwrap()).unwrap();
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    validation.set_issuer(&["http://localhost"]);
    let data = jsonwebtoken::decode::<Value>(token, &decoding, &validation).unwrap();
    assert_eq!(data.claims["sub"], t["person_id"]);
}
db_test!(jwks_publishes_the_key_that_signs_tokens);

async fn rotation_keeps_old_tokens_valid_through_the_grace_window(app: TestApp) {
    let t = app.signup("rot@example.com", "rot").await;
    let old = t["token"].as_str().unwrap().to_string();
    let state = app.state();
    let (rotation, keys) = hub_kernel::crypto::signing::rotate(&state.db, &state.master, chrono::Duration::hours(1), false).await.unwrap();
    state.set_keys(keys);
    assert_ne!(rotation.fingerprint_current, rotation.fingerprint_previous.clone().unwrap());
    assert_eq!(rotation.grace_window_ms, 3_600_000);
    let (_, jwks) = app.get("/.well-known/jwks.json", None).await;
    assert_eq!(jwks["keys"].as_array().unwrap().len(), 2);
    assert_eq!(jwks["keys"][0]["kid"], rotation.fingerprint_current);
    let (s, _) = app.get("/api/me", Some(&old)).await;
    assert_eq!(s, StatusCode::OK, "a token of the previous key verifies in the window");
    // New tokens carry the new kid.
    let (_, body) = app.post("/api/auth/login", None, json!({ "email": "rot@example.com", "password": "correct horse battery" })).await;
    let header = jsonwebtoken::decode_header(body["data"]["token"].as_str().unwrap()).unwrap();
    assert_eq!(header.kid.unwrap(), rotation.fingerprint_current);
    // With no grace window the rotated-out key's tokens stop verifying at
    // once, while the first key is still inside its own one-hour window.
    let (_, keys) = hub_kernel::crypto::signing::rotate(&state.db, &state.master, chrono::Duration::zero(), false).await.unwrap();
    state.set_keys(keys);
    let fresh = body["data"]["token"].as_str().unwrap();
    assert_error(app.get("/api/me", Some(fresh)).await, 401, "Unauthorized");
    assert_eq!(app.get("/api/me", Some(&old)).await.0, StatusCode::OK);
    let (_, jwks) = app.get("/.well-known/jwks.json", None).await;
    assert_eq!(jwks["keys"].as_array().unwrap().len(), 2, "the closed key is no longer published");
}
db_test!(rotation_keeps_old_tokens_valid_through_the_grace_window);

async fn the_rotation_grace_defaults_to_the_token_lifetime(app: TestApp) {
    let t = app.signup("rot-default@example.com", "rot-default").await;
    let old = t["token"].as_str().unwrap().to_string();
    let rotation = app.state().rotate_signing_key(None, true).await.unwrap();
    assert_eq!(rotation.grace_window_ms, 3_600_000, "HUB_TOKEN_TTL_SECONDS in tests is 3600");
    assert!(rotation.emergency);
    assert_eq!(app.get("/api/me", Some(&old)).await.0, StatusCode::OK, "a token minted before verifies until it expires");
    let rotation = app.state().rotate_signing_key(Some(chrono::Duration::seconds(5)), false).await.unwrap();
    assert_eq!((rotation.grace_window_ms, rotation.emergency), (5_000, false));
}
db_test!(the_rotation_grace_defaults_to_the_token_lifetime);

async fn an_expired_token_is_refused(_app: TestApp) {
    let app = _app.variant(|c| c.token_ttl_seconds = 1).await;
    let t = app.signup("exp@example.com", "exp").await;
    let token = t["token"].as_str().unwrap();
    let (s, _) = app.get("/api/me", Some(token)).await;
    assert_eq!(s, StatusCode::OK);
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    assert_error(app.get("/api/me", Some(token)).await, 401, "Unauthorized");
}
db_test!(an_expired_token_is_refused);

async fn login_status(app: &TestApp, email: &str, password: &str) -> StatusCode {
    app.post("/api/auth/login", None, json!({ "email": email, "password": password })).await.0
}

/// A reset token for `email`, as development mode hands it back.
async fn reset_token(app: &TestApp, email: &str) -> String {
    let (s, sent) = app.post("/api/auth/password-reset", None, json!({ "email": email })).await;
    assert_eq!(s, StatusCode::OK, "{sent}");
    sent["data"]["dev_token"].as_str().expect("a dev_token for a known email").to_string()
}

async fn a_forgotten_password_is_reset_with_a_single_use_token(app: TestApp) {
    let email = "reset@example.com";
    let (s, _) = app.post("/api/auth/register", None, json!({ "email": email, "password": "old password", "display_name": "Rae" })).await;
    assert_eq!(s, StatusCode::CREATED);
    // The same answer for an unknown email, without a token.
    let (s, unknown) = app.post("/api/auth/password-reset", None, json!({ "email": "ghost@example.com" })).await;
    assert_eq!(s, StatusCode::OK, "{unknown}");
    assert_eq!(unknown["data"]["sent"], true);
    assert!(unknown["data"]["expires_at"].is_string() && unknown["data"].get("dev_token").is_none(), "{unknown}");
    let body = assert_error(app.post("/api/auth/password-reset", None, json!({ "email": "nope" })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["email must be an email address"]));
    let body = assert_error(app.post("/api/auth/password-reset", None, json!({})).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["email is required"]));

    let (s, sent) = app.post("/api/auth/password-reset", None, json!({ "email": "RESET@example.com " })).await;
    assert_eq!(s, StatusCode::OK, "{sent}");
    let token = sent["data"]["dev_token"].as_str().unwrap().to_string();
    let expires = chrono::DateTime::parse_from_rfc3339(sent["data"]["expires_at"].as_str().unwrap()).unwrap();
    let ahead = (expires.with_timezone(&chrono::Utc) - chrono::Utc::now()).num_seconds();
    assert!((14 * 60..=15 * 60).contains(&ahead), "15 minutes: {ahead}");
    // Only the token's hash is stored.
    let stored: Vec<String> =
        sqlx::query_scalar("SELECT token_hash FROM identity_verification WHERE purpose = 'password-reset'").fetch_all(&app.state().db.read).await.unwrap();
    assert_eq!(stored.len(), 1);
    assert!(stored[0] != token && stored[0].len() == 64);
    // A reset token verifies no email, and a verification token resets no password.
    assert_error(app.post("/api/auth/verify-email", None, json!({ "token": token })).await, 400, "ValidationError");
    let (_, v) = app.post("/api/auth/send-verification-email", None, json!({ "email": email })).await;
    let verification = v["data"]["dev_token"].as_str().unwrap();
    let body = assert_error(
        app.post("/api/auth/password-reset/confirm", None, json!({ "token": verification, "new_password": "new password" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["token is invalid, expired or already used"]));

    // Bad input: every problem at once, and the token is not spent.
    let body = assert_error(app.post("/api/auth/password-reset/confirm", None, json!({ "new_password": "short" })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["token is required", "new_password must be at least 8 characters"]));
    let body = assert_error(
        app.post("/api/auth/password-reset/confirm", None, json!({ "token": "wrong", "new_password": "new password" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["token is invalid, expired or already used"]));

    let (s, done) = app.post("/api/auth/password-reset/confirm", None, json!({ "token": token, "new_password": "new password" })).await;
    assert_eq!(s, StatusCode::OK, "{done}");
    assert_eq!(done["data"]["changed"], true);
    assert!(done["data"]["updated_at"].is_string());
    assert_eq!(login_status(&app, email, "old password").await, StatusCode::UNAUTHORIZED);
    assert_eq!(login_status(&app, email, "new password").await, StatusCode::OK);
    let hash: String = sqlx::query_scalar("SELECT secret_hash FROM identity_credential").fetch_one(&app.state().db.read).await.unwrap();
    assert!(hash.starts_with("$argon2id$"), "{hash}");
    // The token works once.
    assert_error(app.post("/api/auth/password-reset/confirm", None, json!({ "token": token, "new_password": "third password" })).await, 400, "ValidationError");
    assert_eq!(login_status(&app, email, "new password").await, StatusCode::OK);

    // Redeeming one token spends the person's other open ones.
    let (first, second) = (reset_token(&app, email).await, reset_token(&app, email).await);
    let (s, _) = app.post("/api/auth/password-reset/confirm", None, json!({ "token": second, "new_password": "fourth password" })).await;
    assert_eq!(s, StatusCode::OK);
    assert_error(app.post("/api/auth/password-reset/confirm", None, json!({ "token": first, "new_password": "fifth password" })).await, 400, "ValidationError");
    assert_eq!(login_status(&app, email, "fourth password").await, StatusCode::OK);
}
db_test!(a_forgotten_password_is_reset_with_a_single_use_token);

async fn a_reset_token_expires_and_requests_are_limited(app: TestApp) {
    let email = "limit@example.com";
    let (s, _) = app.post("/api/auth/register", None, json!({ "email": email, "password": "old password", "display_name": "Lim" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let token = reset_token(&app, email).await;
    sqlx::query("UPDATE identity_verification SET expires_at = '2020-01-01T00:00:00.000000Z'").execute(app.state().db.writer()).await.unwrap();
    let body = assert_error(
        app.post("/api/auth/password-reset/confirm", None, json!({ "token": token, "new_password": "new password" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["token is invalid, expired or already used"]));
    assert_eq!(login_status(&app, email, "old password").await, StatusCode::OK);
    // Known or not, an account's requests slow down alike after a few.
    for who in [email, "nobody-here@example.com"] {
        let mut statuses = Vec::new();
        for _ in 0..5 {
            statuses.push(app.post("/api/auth/password-reset", None, json!({ "email": who })).await.0.as_u16());
        }
        let expected = if who == email { [200, 200, 200, 429, 429] } else { [200, 200, 200, 200, 429] };
        assert_eq!(statuses, expected, "{who}");
    }
}
db_test!(a_reset_token_expires_and_requests_are_limited);

async fn a_person_changes_their_password_with_the_current_one(app: TestApp) {
    let owner = app.signup("own-pw@example.com", "own-pw").await;
    let owner_token = owner["token"].as_str().unwrap();
    let email = "pw@example.com";
    let (_, reg) = app.post("/api/auth/register", None, json!({ "email": email, "password": "old password", "display_name": "Pat" })).await;
    let (s, m) = app.post("/api/memberships", Some(owner_token), json!({ "person_id": reg["data"]["person_id"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{m}");
    // A member with no role that administers anything: their own password is theirs.
    let (s, login) = app.post("/api/auth/login", None, json!({ "email": email, "password": "old password", "tenant_id": owner["tenant_id"] })).await;
    assert_eq!(s, StatusCode::OK, "{login}");
    let member = login["data"]["token"].as_str().unwrap().to_string();
    let change = |current: &str, new: &str| json!({ "current_password": current, "new_password": new });

    assert_error(app.post("/api/me/password", None, change("old password", "new password")).await, 401, "Unauthorized");
    let (_, key) = app.key(owner_token, "pw-key", json!(["*"])).await;
    let b = assert_error(app.post("/api/me/password", key["api_key"].as_str(), change("x", "new password")).await, 403, "Forbidden");
    assert_eq!(b["details"], json!(["this route requires a human JWT; API keys are rejected"]));
    let b = assert_error(app.post("/api/me/password", Some(&member), json!({ "new_password": "short" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["current_password is required", "new_password must be at least 8 characters"]));
    let b = assert_error(app.post("/api/me/password", Some(&member), change("wrong password", "new password")).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["current_password is not the person's password"]));
    assert_eq!(login_status(&app, email, "old password").await, StatusCode::OK);

    let open_reset = reset_token(&app, email).await;
    let (s, done) = app.post("/api/me/password", Some(&member), change("old password", "new password")).await;
    assert_eq!(s, StatusCode::OK, "{done}");
    assert_eq!(done["data"]["changed"], true);
    assert_eq!(login_status(&app, email, "old password").await, StatusCode::UNAUTHORIZED);
    assert_eq!(login_status(&app, email, "new password").await, StatusCode::OK);
    // A reset asked for before the change can no longer set the password.
    assert_error(
        app.post("/api/auth/password-reset/confirm", None, json!({ "token": open_reset, "new_password": "other password" })).await,
        400,
        "ValidationError",
    );
    // A person-level token changes it too; the old password no longer does.
    let (_, person) = app.post("/api/auth/login", None, json!({ "email": email, "password": "new password" })).await;
    let person = person["data"]["token"].as_str().unwrap().to_string();
    assert_error(app.post("/api/me/password", Some(&person), change("old password", "third password")).await, 400, "ValidationError");
    let (s, _) = app.post("/api/me/password", Some(&person), change("new password", "third password")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(login_status(&app, email, "third password").await, StatusCode::OK);

    // Wrong current passwords slow down after the sixth.
    let mut statuses = Vec::new();
    for _ in 0..7 {
        statuses.push(app.post("/api/me/password", Some(&person), change("guess password", "fourth password")).await.0.as_u16());
    }
    assert_eq!(statuses, [400, 400, 400, 400, 400, 400, 429]);
    // The person's change records nothing in the tenant's chain.
    assert!(!app.events_of(&owner["tenant_id"]).await.iter().any(|e| e.contains("password")));
}
db_test!(a_person_changes_their_password_with_the_current_one);

async fn a_person_changes_their_display_name(app: TestApp) {
    let owner = app.signup("name@example.com", "name-app").await;
    let token = owner["token"].as_str().unwrap();
    let (s, me) = app.call(reqwest::Method::PATCH, "/api/me", Some(token), Some(json!({ "display_name": "  Ada Lovelace " }))).await;
    assert_eq!(s, StatusCode::OK, "{me}");
    assert_eq!(me["data"], json!({ "person_id": owner["person_id"], "email": "name@example.com", "display_name": "Ada Lovelace" }));
    // Tokens carry it from the next login on.
    let (_, login) = app.post("/api/auth/login", None, json!({ "email": "name@example.com", "password": "correct horse battery" })).await;
    let fresh = login["data"]["token"].as_str().unwrap();
    assert_eq!(claims(fresh)["display_name"], "Ada Lovelace");
    let (_, read) = app.get("/api/me", Some(fresh)).await;
    assert_eq!(read["data"]["display_name"], "Ada Lovelace");

    let b = assert_error(app.call(reqwest::Method::PATCH, "/api/me", Some(token), Some(json!({}))).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of: display_name"]));
    let b =
        assert_error(app.call(reqwest::Method::PATCH, "/api/me", Some(token), Some(json!({ "display_name": "x".repeat(201) }))).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["display_name must be at most 200 characters"]));
    assert_error(app.call(reqwest::Method::PATCH, "/api/me", None, Some(json!({ "display_name": "N" }))).await, 401, "Unauthorized");
    let (_, key) = app.key(token, "name-key", json!(["*"])).await;
    assert_error(app.call(reqwest::Method::PATCH, "/api/me", key["api_key"].as_str(), Some(json!({ "display_name": "N" }))).await, 403, "Forbidden");
}
db_test!(a_person_changes_their_display_name);
