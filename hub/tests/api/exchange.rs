//! `POST /api/auth/token`: the client-credentials exchange.

use base64::Engine;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn setup(app: &TestApp) -> (Value, String, String) {
    let t = app.signup("ex@example.com", "exch").await;
    let (id, key) = app.key(t["token"].as_str().unwrap(), "my-client", json!(["crm.*", "me.me.read"])).await;
    (t, id, key["api_key"].as_str().unwrap().to_string())
}

async fn the_exchange_mints_a_900_second_machine_token(app: TestApp) {
    let (t, id, secret) = setup(&app).await;
    let res = app
        .client
        .post(format!("{}/api/auth/token", app.base))
        .json(&json!({ "grant_type": "client_credentials", "client_secret": secret }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()["cache-control"], "no-store");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["expires_in"], 900);
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["scope"], "crm.* me.me.read");
    assert_eq!(body["tenant_id"], t["tenant_id"]);
    assert_eq!(body["application_id"], id);
    let token = body["access_token"].as_str().unwrap();
    let c = claims(token);
    assert_eq!(c["actor"], json!({ "kind": "service" }));
    assert_eq!(c["scopes"], json!(["crm.*", "me.me.read"]));
    assert_eq!(c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap(), 900);
    assert_eq!(c["tenant_id"], t["tenant_id"]);
    let (s, me) = app.get("/api/me", Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{me}");
    assert_eq!(me["data"]["scopes"], json!(["crm.*", "me.me.read"]));
}
db_test!(the_exchange_mints_a_900_second_machine_token);

async fn the_exchange_accepts_forms_and_basic_authentication(app: TestApp) {
    let (_, id, secret) = setup(&app).await;
    let form = app
        .client
        .post(format!("{}/api/auth/token", app.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("grant_type=client_credentials&client_id=my-client&client_secret={secret}&scope=crm.contact.read"))
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), StatusCode::OK);
    let body: Value = form.json().await.unwrap();
    assert_eq!(body["scope"], "crm.contact.read");
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"));
    let res = app
        .client
        .post(format!("{}/api/auth/token", app.base))
        .header("authorization", format!("Basic {basic}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("grant_type=client_credentials")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
}
db_test!(the_exchange_accepts_forms_and_basic_authentication);

async fn the_exchange_only_narrows_and_checks_the_client(app: TestApp) {
    let (_, id, secret) = setup(&app).await;
    let ex = |body: Value| app.post("/api/auth/token", None, body);
    // Narrowing to a scope the key holds through its wildcard is allowed.
    let (s, b) = ex(json!({ "grant_type": "client_credentials", "client_secret": secret, "scope": "crm.contact.read", "client_id": id })).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (_, b) = app.get("/api/me", b["access_token"].as_str()).await;
    assert_eq!(b["success"], false, "narrowed token lost me.me.read");
    let body = assert_error(ex(json!({ "grant_type": "client_credentials", "client_secret": secret, "scope": "sla.clock.write" })).await, 400, "invalid_scope");
    assert!(body["details"][0].as_str().unwrap().contains("sla.clock.write"));
    assert_error(ex(json!({ "grant_type": "client_credentials", "client_secret": secret, "client_id": "someone-else" })).await, 401, "invalid_client");
    assert_error(ex(json!({ "grant_type": "client_credentials", "client_secret": "pk_live_wrong" })).await, 401, "invalid_client");
    assert_error(ex(json!({ "grant_type": "password", "client_secret": secret })).await, 400, "unsupported_grant_type");
    let body = assert_error(ex(json!({})).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["grant_type is required", "client_secret is required"]));
    // Types as the request's schema says, with the missing secret named alike.
    let body = assert_error(ex(json!({ "grant_type": 5, "scope": ["crm.*"] })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["grant_type must be a string", "scope must be a string", "client_secret is required"]));
}
db_test!(the_exchange_only_narrows_and_checks_the_client);

async fn an_exchanged_token_dies_with_its_key(app: TestApp) {
    let (t, _, secret) = setup(&app).await;
    let (_, b) = app.post("/api/auth/token", None, json!({ "grant_type": "client_credentials", "client_secret": secret })).await;
    let token = b["access_token"].as_str().unwrap().to_string();
    assert_eq!(app.get("/api/me", Some(&token)).await.0, StatusCode::OK);
    let (_, me) = app.get("/api/me", Some(&secret)).await;
    let key_id = me["data"]["key_id"].as_str().unwrap();
    app.post(&format!("/api/api-keys/{key_id}/revoke"), t["token"].as_str(), json!({})).await;
    assert_error(app.get("/api/me", Some(&token)).await, 401, "Unauthorized");
}
db_test!(an_exchanged_token_dies_with_its_key);
