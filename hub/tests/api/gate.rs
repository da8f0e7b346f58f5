//! The gateway: default deny, health, header forms, operator guard, modes.

use reqwest::StatusCode;
use serde_json::json;

use crate::{db_test, helpers::*};

async fn health_is_public_whatever_the_authorization_header(app: TestApp) {
    for token in [None, Some("garbage"), Some("pk_live_nonexistent"), Some("eyJhbGciOiJFUzI1NiJ9.e30.x")] {
        let (s, body) = app.get("/health", token).await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(body["data"]["status"], "ok");
    }
}
db_test!(health_is_public_whatever_the_authorization_header);

async fn every_other_path_is_denied_without_a_credential(app: TestApp) {
    for path in ["/api/me", "/api/crm/contacts", "/no/such/path", "/api/applications"] {
        let body = assert_error(app.get(path, None).await, 401, "Unauthorized");
        assert_eq!(body["details"], json!(["missing bearer token"]));
        assert_error(app.get(path, Some("not-a-jwt")).await, 401, "Unauthorized");
    }
}
db_test!(every_other_path_is_denied_without_a_credential);

async fn only_one_bearer_header_carries_credentials(app: TestApp) {
    let t = app.signup("one@example.com", "one").await;
    let token = t["token"].as_str().unwrap();
    let (_, key) = app.key(token, "app", json!(["*"])).await;
    let api_key = key["api_key"].as_str().unwrap();
    // X-API-Key is not a credential.
    let res = app.client.get(format!("{}/api/me", app.base)).header("x-api-key", api_key).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    // Two Authorization headers are refused.
    let res = app
        .client
        .get(format!("{}/api/me", app.base))
        .header("authorization", format!("Bearer {api_key}"))
        .header("authorization", format!("Bearer {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    // A non-bearer scheme is refused.
    let res = app.client.get(format!("{}/api/me", app.base)).header("authorization", format!("Token {api_key}")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    // The same key as a bearer works, and so does the JWT.
    let (s, me) = app.get("/api/me", Some(api_key)).await;
    assert_eq!(s, StatusCode::OK, "{me}");
    assert_eq!(me["data"]["actor"]["kind"], "service");
    let (s, me) = app.get("/api/me", Some(token)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(me["data"]["actor"]["kind"], "human");
}
db_test!(only_one_bearer_header_carries_credentials);

async fn admin_routes_take_only_the_operator_header(app: TestApp) {
    let t = app.signup("op@example.com", "op").await;
    let body = assert_error(app.get("/admin/anything", None).await, 401, "Unauthorized");
    assert_eq!(body["details"], json!(["admin token required"]));
    // A tenant JWT is refused on /admin/*.
    assert_error(app.get("/admin/anything", t["token"].as_str()).await, 401, "Unauthorized");
    let wrong = app.client.get(format!("{}/admin/anything", app.base)).header("x-admin-ops-token", "nope").send().await.unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    // With the right token the gate lets it through; the path itself does not exist.
    let right = app.client.get(format!("{}/admin/anything", app.base)).header("x-admin-ops-token", "test-ops-token").send().await.unwrap();
    assert_eq!(right.status(), StatusCode::NOT_FOUND);
    // The operator credential is no tenant credential.
    let res = app.client.get(format!("{}/api/me", app.base)).header("x-admin-ops-token", "test-ops-token").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
}
db_test!(admin_routes_take_only_the_operator_header);

async fn report_mode_lets_requests_through_but_handlers_still_need_a_caller(_app: TestApp) {
    let app = _app.variant(|c| c.gate_mode = hub_kernel::config::GateMode::Report).await;
    // An unknown path is no longer refused by the gate: it is simply not found.
    assert_error(app.get("/api/nothing-here", None).await, 404, "NotFound");
    // A handler that needs a caller still answers 401.
    assert_error(app.get("/api/me", None).await, 401, "Unauthorized");
    // A key lacking the scope is let through in report mode.
    let t = app.signup("rep@example.com", "rep").await;
    let (_, key) = app.key(t["token"].as_str().unwrap(), "a", json!(["crm.*"])).await;
    let (s, _) = app.get("/api/me", key["api_key"].as_str()).await;
    assert_eq!(s, StatusCode::OK);
}
db_test!(report_mode_lets_requests_through_but_handlers_still_need_a_caller);

#[tokio::test]
async fn gate_off_is_refused_outside_development_mode() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = hub_kernel::config::Config::for_tests(dir.path().into(), None);
    config.dev = false;
    config.gate_mode = hub_kernel::config::GateMode::Off;
    let err = hub::prepare(config).await.err().expect("refused");
    assert!(err.to_string().contains("AUTH_GATE_MODE=off"), "{err}");
}

#[tokio::test]
async fn production_mode_requires_a_master_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = hub_kernel::config::Config::for_tests(dir.path().into(), None);
    config.dev = false;
    config.master_key = None;
    let err = hub::prepare(config).await.err().expect("refused");
    assert!(err.to_string().contains("HUB_MASTER_KEY"), "{err}");
}

async fn malformed_bodies_and_ids_answer_in_the_envelope(app: TestApp) {
    let t = app.signup("err@example.com", "err").await;
    let token = t["token"].as_str().unwrap();
    // Malformed JSON.
    let res = app
        .client
        .post(format!("{}/api/applications", app.base))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["error"], "ValidationError");
    assert!(body["details"].is_array());
    // Wrong types.
    assert_error(app.post("/api/applications", Some(token), json!({ "name": 5, "slug": "x", "environment": "live" })).await, 400, "ValidationError");
    // Every missing field in one details array.
    let body = assert_error(app.post("/api/applications", Some(token), json!({})).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["name is required", "slug is required", "environment is required"]));
    // Non-UUID path ids are not found.
    assert_error(app.get("/api/applications/not-a-uuid/keys", Some(token)).await, 404, "NotFound");
    assert_error(app.post("/api/personas/12/shred", Some(token), json!({})).await, 404, "NotFound");
    // A body tenant_id that is not the caller's is 403.
    assert_error(
        app.post("/api/api-keys", Some(token), json!({ "tenant_id": uuid::Uuid::now_v7().to_string(), "name": "k", "scopes": ["*"] })).await,
        403,
        "TenantMismatch",
    );
}
db_test!(malformed_bodies_and_ids_answer_in_the_envelope);

async fn a_database_failure_is_an_opaque_500(app: TestApp) {
    let t = app.signup("db@example.com", "dbfail").await;
    let token = t["token"].as_str().unwrap();
    // Take the database away from under the hub.
    app.state().db.read.close().await;
    app.state().db.writer().close().await;
    let (s, body) = app.post("/api/applications", Some(token), json!({ "name": "x", "slug": "x", "environment": "live" })).await;
    assert_eq!(s, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(body, json!({ "success": false, "error": "InternalError" }));
}
db_test!(a_database_failure_is_an_opaque_500);

#[tokio::test]
async fn gate_report_is_refused_outside_development_mode() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = hub_kernel::config::Config::for_tests(dir.path().into(), None);
    config.dev = false;
    config.gate_mode = hub_kernel::config::GateMode::Report;
    let err = hub::prepare(config).await.err().expect("refused");
    assert!(err.to_string().contains("AUTH_GATE_MODE=report"), "{err}");
}

/// A JWT naming a key this hub does not know, with a well-formed (64-byte,
/// low-S) signature that is never checked: the kid alone refuses it.
fn token_with_kid(kid: &str) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let part = |v: serde_json::Value| b64.encode(v.to_string());
    format!("{}.{}.{}", part(json!({ "alg": "ES256", "typ": "JWT", "kid": kid })), part(json!({ "sub": "x" })), b64.encode([0u8; 64]))
}

/// Tokens naming unknown keys: each is 401, the keys are reloaded at most
/// once a second however many arrive, and the verified tokens of everyone
/// else stay cached (an unchanged key set drops nothing).
async fn unknown_key_ids_neither_hammer_the_database_nor_clear_the_token_cache(app: TestApp) {
    let t = app.signup("kid@example.com", "kid").await;
    let token = t["token"].as_str().unwrap();
    assert_eq!(app.get("/api/me", Some(token)).await.0, StatusCode::OK);
    let state = app.state();
    assert!(state.tokens.get(token).is_some(), "a verified token is cached");
    let reloads = state.key_reloads();
    let start = std::time::Instant::now();
    for _ in 0..30 {
        let forged = token_with_kid(&uuid::Uuid::new_v4().simple().to_string());
        assert_error(app.get("/api/me", Some(&forged)).await, 401, "Unauthorized");
    }
    let seconds = start.elapsed().as_secs();
    assert!(state.key_reloads() - reloads <= seconds + 1, "{} reloads in {seconds} s", state.key_reloads() - reloads);
    assert!(state.key_reloads() > reloads, "an unknown kid does make the hub look for a new key");
    assert!(state.tokens.get(token).is_some(), "the verified-token cache survived");
    assert_eq!(app.get("/api/me", Some(token)).await.0, StatusCode::OK);
}
db_test!(unknown_key_ids_neither_hammer_the_database_nor_clear_the_token_cache);

/// ES256 signatures are taken in low-S form only: (r, n - s) verifies just
/// as well as (r, s) in a stock library, so accepting both would give every
/// token a second spelling.
async fn a_high_s_signature_is_refused(app: TestApp) {
    use base64::Engine;
    const N: [u8; 32] = [
        0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xbc, 0xe6, 0xfa, 0xad, 0xa7, 0x17, 0x9e, 0x84, 0xf3,
        0xb9, 0xca, 0xc2, 0xfc, 0x63, 0x25, 0x51,
    ];
    let t = app.signup("lows@example.com", "lows").await;
    let token = t["token"].as_str().unwrap();
    let (head, sig) = token.rsplit_once('.').unwrap();
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut sig = b64.decode(sig).unwrap();
    assert_eq!(sig.len(), 64);
    // s := n - s
    let mut borrow = 0i16;
    for i in (0..32).rev() {
        let d = i16::from(N[i]) - i16::from(sig[32 + i]) - borrow;
        borrow = i16::from(d < 0);
        sig[32 + i] = (d + if d < 0 { 256 } else { 0 }) as u8;
    }
    let flipped = format!("{head}.{}", b64.encode(&sig));
    // A stock library accepts the twin with the published key...
    let (_, jwks) = app.get("/.well-known/jwks.json", None).await;
    let key = &jwks["keys"][0];
    let decoding = jsonwebtoken::DecodingKey::from_ec_components(key["x"].as_str().unwrap(), key["y"].as_str().unwrap()).unwrap();
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    validation.set_issuer(&["http://localhost"]);
    jsonwebtoken::decode::<serde_json::Value>(&flipped, &decoding, &validation).expect("(r, n - s) is a valid ECDSA signature");
    // ...the hub does not, while the token it minted (low S) works.
    assert_error(app.get("/api/me", Some(&flipped)).await, 401, "Unauthorized");
    assert_eq!(app.get("/api/me", Some(token)).await.0, StatusCode::OK);
}
db_test!(a_high_s_signature_is_refused);
