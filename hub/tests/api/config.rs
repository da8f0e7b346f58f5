//! sdk-config: values at four scopes, resolved most specific first;
//! revoke, rotate to a secret_ref; platform values are the operator's.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn values_resolve_from_the_most_specific_scope(app: TestApp) {
    let t = app.two_tenants("cfg").await;
    let a = t.a_token.as_str();
    let tenant = t.a["tenant_id"].as_str().unwrap();
    let me = claims(a)["sub"].as_str().unwrap().to_string();
    let set = async |scope: &str, scope_id: Option<&str>, value: Value| {
        let mut body = json!({ "key": "ui.theme", "scope": scope, "value": value });
        if let Some(id) = scope_id {
            body["scope_id"] = json!(id);
        }
        app.post("/api/config", Some(a), body).await
    };

    // A new key is 201, a new value of it 200 with the next version.
    let (s, first) = set("tenant", None, json!("light")).await;
    assert_eq!(s, StatusCode::CREATED, "{first}");
    assert_eq!((first["data"]["scope_id"].as_str(), first["data"]["version"].as_i64()), (Some(tenant), Some(1)));
    let (s, second) = set("tenant", None, json!({ "name": "dark" })).await;
    assert_eq!((s, second["data"]["version"].as_i64()), (StatusCode::OK, Some(2)));
    assert_eq!(second["data"]["config_id"], first["data"]["config_id"]);
    assert_eq!(set("app", Some("cfg"), json!("blue")).await.0, StatusCode::CREATED);
    assert_eq!(set("app_user", Some(&me), json!("mine")).await.0, StatusCode::CREATED);

    let resolve = async |query: String| app.get(&format!("/api/config/resolve?key=ui.theme{query}"), Some(a)).await;
    let (s, r) = resolve(String::new()).await;
    assert_eq!((s, r["data"]["scope"].as_str(), r["data"]["value"].clone()), (StatusCode::OK, Some("app_user"), json!("mine")), "{r}");
    let (_, r) = resolve("&person_id=someone-else&app_id=cfg".into()).await;
    assert_eq!((r["data"]["scope"].as_str(), r["data"]["value"].clone()), (Some("app"), json!("blue")));
    let (_, r) = resolve("&person_id=someone-else&app_id=other-app".into()).await;
    assert_eq!((r["data"]["scope"].as_str(), r["data"]["value"].clone()), (Some("tenant"), json!({ "name": "dark" })));
    // The platform's value comes last (platform rows are the operator's).
    sqlx::query(
        "INSERT INTO config_value (config_id, tenant_id, scope, scope_id, key, value, status, version, updated_by, created_at, updated_at) \
         VALUES ('p-1', NULL, 'platform', 'platform', 'ui.locale', '\"en\"', 'active', 1, 'operator', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')",
    )
    .execute(app.state().db.writer())
    .await
    .unwrap();
    let (_, r) = app.get("/api/config/resolve?key=ui.locale", Some(a)).await;
    assert_eq!((r["data"]["scope"].as_str(), r["data"]["value"].clone()), (Some("platform"), json!("en")));
    assert_error(app.get("/api/config/resolve?key=ui.nothing", Some(a)).await, 404, "NotFound");

    // Lists and reads.
    let (s, list) = app.get("/api/config?scope=tenant", Some(a)).await;
    assert_eq!((s, list["total"].as_i64()), (StatusCode::OK, Some(1)), "{list}");
    let (_, list) = app.get("/api/config?scope=platform", Some(a)).await;
    assert_eq!(list["data"][0]["key"], "ui.locale");
    let (s, one) = app.get("/api/config/value?key=ui.theme&scope=app&scope_id=cfg", Some(a)).await;
    assert_eq!((s, one["data"]["value"].clone()), (StatusCode::OK, json!("blue")));

    // Rotation swaps the value for a reference; revocation ends the row.
    let (s, rotated) =
        app.post("/api/config/rotate", Some(a), json!({ "key": "ui.theme", "scope": "app", "scope_id": "cfg", "secret_ref": "vault://cfg/theme" })).await;
    assert_eq!((s, rotated["data"]["value"].clone(), rotated["data"]["secret_ref"].as_str()), (StatusCode::OK, Value::Null, Some("vault://cfg/theme")));
    let (s, revoked) = app.post("/api/config/revoke", Some(a), json!({ "key": "ui.theme", "scope": "app_user", "scope_id": me })).await;
    assert_eq!((s, revoked["data"]["status"].as_str()), (StatusCode::OK, Some("revoked")));
    assert_error(app.post("/api/config/revoke", Some(a), json!({ "key": "ui.theme", "scope": "app_user", "scope_id": me })).await, 404, "NotFound");
    let (_, r) = resolve("&app_id=cfg".into()).await;
    assert_eq!((r["data"]["scope"].as_str(), r["data"]["secret_ref"].as_str()), (Some("app"), Some("vault://cfg/theme")), "revoked rows no longer win");

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |e: &str| events.iter().filter(|x| *x == e).count();
    assert_eq!((count("config.value.set.v1"), count("config.secret_ref.rotated.v1"), count("config.value.revoked.v1")), (4, 1, 1));
}
db_test!(values_resolve_from_the_most_specific_scope);

async fn config_refuses_bad_input_other_tenants_and_platform_writes(app: TestApp) {
    let t = app.two_tenants("cfg2").await;
    let a = t.a_token.as_str();
    let b = assert_error(app.post("/api/config", Some(a), json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["key is required", "scope is required", "value is required"]));
    let b = assert_error(app.post("/api/config", Some(a), json!({ "key": "bad key", "scope": "galaxy", "value": 1 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["scope must be one of: platform, tenant, app, app_user"]));
    let b =
        assert_error(app.post("/api/config", Some(a), json!({ "key": "bad key", "scope": "app", "scope_id": "x", "value": 1 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["key must be 1 to 200 letters, digits, '.', '_', '-', '/' or ':'"]));
    let b =
        assert_error(app.post("/api/config/rotate", Some(a), json!({ "key": "k", "scope": "app", "scope_id": "x".repeat(129) })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["scope_id must be at most 128 characters", "secret_ref is required"]));
    let b = assert_error(app.post("/api/config/revoke", Some(a), json!({ "scope": "tenant" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["key is required"]));
    let b = assert_error(app.post("/api/config", Some(a), json!({ "key": "k", "scope": "app", "value": 1 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["scope_id is required"]));
    assert_error(app.get("/api/config", Some(a)).await, 400, "ValidationError");
    let b = assert_error(app.post("/api/config", Some(a), json!({ "key": "k", "scope": "platform", "value": 1 })).await, 403, "Forbidden");
    assert!(b["details"][0].as_str().unwrap().contains("operator"), "{b}");

    // Another tenant's scope is not there; its values are not seen.
    assert_eq!(app.post("/api/config", Some(a), json!({ "key": "k", "scope": "tenant", "value": 1 })).await.0, StatusCode::CREATED);
    let other = t.b["tenant_id"].as_str().unwrap();
    assert_error(app.post("/api/config", Some(a), json!({ "key": "k", "scope": "tenant", "scope_id": other, "value": 1 })).await, 404, "NotFound");
    let mine = t.a["tenant_id"].as_str().unwrap();
    assert_error(app.get(&format!("/api/config/value?key=k&scope=tenant&scope_id={mine}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/config/resolve?key=k", Some(&t.b_token)).await, 404, "NotFound");
    let (_, list) = app.get("/api/config?scope=tenant", Some(&t.b_token)).await;
    assert_eq!(list["total"], 0);

    // A key without the write scope.
    let (_, key) = app.key(a, "cfg-reader", json!(["config.config.read", "config.resolve.read"])).await;
    let b = assert_error(app.post("/api/config", key["api_key"].as_str(), json!({ "key": "k", "scope": "tenant", "value": 2 })).await, 403, "Forbidden");
    assert_eq!(b["required_scopes"], json!(["config.config.write"]));
    let (s, _) = app.get("/api/config/resolve?key=k", key["api_key"].as_str()).await;
    assert_eq!(s, StatusCode::OK);
}
db_test!(config_refuses_bad_input_other_tenants_and_platform_writes);

async fn revoked_rows_are_kept_as_history(app: TestApp) {
    let t = app.two_tenants("cfg-history").await;
    let a = t.a_token.as_str();
    let set = async |value: Value| app.post("/api/config", Some(a), json!({ "key": "ui.theme", "scope": "app", "scope_id": "web", "value": value })).await;
    let revoke = async || app.post("/api/config/revoke", Some(a), json!({ "key": "ui.theme", "scope": "app", "scope_id": "web" })).await;
    assert_eq!(set(json!("light")).await.0, StatusCode::CREATED);
    assert_eq!(set(json!("dark")).await.0, StatusCode::OK);
    let (s, first) = revoke().await;
    assert_eq!(s, StatusCode::OK, "{first}");
    let (s, second) = set(json!("blue")).await;
    assert_eq!(s, StatusCode::CREATED, "{second}");
    app.post("/api/config", Some(a), json!({ "key": "ui.other", "scope": "app", "scope_id": "web", "value": 1 })).await;

    let (s, h) = app.get("/api/config/history?key=ui.theme&scope=app&scope_id=web", Some(a)).await;
    assert_eq!((s, h["total"].as_i64()), (StatusCode::OK, Some(2)), "{h}");
    let rows: Vec<(Value, Value, Value)> =
        h["data"].as_array().unwrap().iter().map(|r| (r["config_id"].clone(), r["status"].clone(), r["value"].clone())).collect();
    assert_eq!(
        rows,
        [(second["data"]["config_id"].clone(), json!("active"), json!("blue")), (first["data"]["config_id"].clone(), json!("revoked"), json!("dark")),],
        "newest first, the revoked row as it was ended"
    );
    assert_eq!((h["data"][1]["version"].as_i64(), h["data"][1]["revoked_at"].is_string()), (Some(2), true));
    let (_, page) = app.get("/api/config/history?key=ui.theme&scope=app&scope_id=web&limit=1&offset=1", Some(a)).await;
    assert_eq!((page["total"].as_i64(), page["data"][0]["status"].as_str()), (Some(2), Some("revoked")));
    let (_, none) = app.get("/api/config/history?key=ui.theme&scope=app&scope_id=mobile", Some(a)).await;
    assert_eq!(none["total"], 0);
    let (_, theirs) = app.get("/api/config/history?key=ui.theme&scope=app&scope_id=web", Some(&t.b_token)).await;
    assert_eq!(theirs["total"], 0, "another tenant's rows are not its history");
    let other = t.b["tenant_id"].as_str().unwrap();
    assert_error(app.get(&format!("/api/config/history?key=ui.theme&scope=tenant&scope_id={other}"), Some(a)).await, 404, "NotFound");
    let body = assert_error(app.get("/api/config/history?key=bad%20key&scope=app", Some(a)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["key must be 1 to 200 letters, digits, '.', '_', '-', '/' or ':'", "scope_id is required"]));
    assert_error(app.get("/api/config/history?key=ui.theme&scope=galaxy", Some(a)).await, 400, "ValidationError");
}
db_test!(revoked_rows_are_kept_as_history);
