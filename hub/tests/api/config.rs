//! sdk-config: values at four scopes, resolved most specific first;
//! revoke, rotate to a secret_ref; platform values are the operator's.

use reqwest::{Method, StatusCode};
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

async fn the_operator_sets_platform_values_every_tenant_resolves_last(app: TestApp) {
    let t = app.two_tenants("cfgop").await;
    let (a, b) = (t.a_token.as_str(), t.b_token.as_str());
    let set = |value: Value| app.op(Method::POST, "/admin/config", Some(json!({ "key": "ui.locale", "value": value })));
    let resolve = async |token: &str| {
        let (s, r) = app.get("/api/config/resolve?key=ui.locale", Some(token)).await;
        assert_eq!(s, StatusCode::OK, "{r}");
        (r["data"]["scope"].clone(), r["data"]["value"].clone())
    };

    // A platform default: versioned as a tenant's row.
    let (s, first) = set(json!("en")).await;
    assert_eq!(s, StatusCode::CREATED, "{first}");
    assert_eq!(
        (first["data"]["scope"].as_str(), first["data"]["scope_id"].as_str(), first["data"]["version"].as_i64(), first["data"]["status"].as_str()),
        (Some("platform"), Some("platform"), Some(1), Some("active"))
    );
    let (s, second) = set(json!("en-GB")).await;
    assert_eq!((s, second["data"]["version"].as_i64(), second["data"]["config_id"].clone()), (StatusCode::OK, Some(2), first["data"]["config_id"].clone()));
    // Every tenant resolves it; a tenant's own value wins (app_user, app,
    // tenant, then platform).
    assert_eq!(resolve(a).await, (json!("platform"), json!("en-GB")));
    assert_eq!(resolve(b).await, (json!("platform"), json!("en-GB")));
    assert_eq!(app.post("/api/config", Some(a), json!({ "key": "ui.locale", "scope": "tenant", "value": "fr" })).await.0, StatusCode::CREATED);
    assert_eq!(resolve(a).await, (json!("tenant"), json!("fr")));
    assert_eq!(resolve(b).await, (json!("platform"), json!("en-GB")));
    let (_, seen) = app.get("/api/config/value?key=ui.locale&scope=platform", Some(a)).await;
    assert_eq!(seen["data"]["config_id"], first["data"]["config_id"]);
    // A tenant still never writes the platform's rows.
    for (path, body) in [
        ("/api/config", json!({ "key": "ui.locale", "scope": "platform", "value": "de" })),
        ("/api/config/revoke", json!({ "key": "ui.locale", "scope": "platform" })),
        ("/api/config/rotate", json!({ "key": "ui.locale", "scope": "platform", "secret_ref": "vault://x" })),
    ] {
        let refused = assert_error(app.post(path, Some(a), body).await, 403, "Forbidden");
        assert_eq!(refused["details"], json!(["platform values are written by the platform operator only"]), "{path}");
    }

    // The operator's list holds the platform's active rows only.
    let (s, list) = app.op(Method::GET, "/admin/config", None).await;
    assert_eq!(
        (s, list["total"].as_i64(), list["data"][0]["key"].as_str(), list["data"][0]["value"].clone()),
        (StatusCode::OK, Some(1), Some("ui.locale"), json!("en-GB")),
        "{list}"
    );

    // Revoked: tenants resolve from their own scopes only; history stays.
    let (s, revoked) = app.op(Method::POST, "/admin/config/revoke", Some(json!({ "key": "ui.locale" }))).await;
    assert_eq!((s, revoked["data"]["status"].as_str(), revoked["data"]["revoked_at"].is_string()), (StatusCode::OK, Some("revoked"), true), "{revoked}");
    assert_error(app.op(Method::POST, "/admin/config/revoke", Some(json!({ "key": "ui.locale" }))).await, 404, "NotFound");
    assert_eq!(resolve(a).await, (json!("tenant"), json!("fr")));
    assert_error(app.get("/api/config/resolve?key=ui.locale", Some(b)).await, 404, "NotFound");
    let (s, third) = set(json!("de")).await;
    assert_eq!((s, third["data"]["version"].as_i64()), (StatusCode::CREATED, Some(1)));
    let (s, history) = app.op(Method::GET, "/admin/config/history?key=ui.locale", None).await;
    assert_eq!(s, StatusCode::OK, "{history}");
    let rows: Vec<(Value, Value)> = history["data"].as_array().unwrap().iter().map(|r| (r["status"].clone(), r["value"].clone())).collect();
    assert_eq!(rows, [(json!("active"), json!("de")), (json!("revoked"), json!("en-GB"))]);
    let (_, list) = app.op(Method::GET, "/admin/config", None).await;
    assert_eq!((list["total"].as_i64(), list["data"][0]["config_id"].clone()), (Some(1), third["data"]["config_id"].clone()));

    // The tenant route's rules; a tenant's credential is no operator's.
    let bad = assert_error(app.op(Method::POST, "/admin/config", Some(json!({}))).await, 400, "ValidationError");
    assert_eq!(bad["details"], json!(["key is required", "value is required"]));
    let bad = assert_error(app.op(Method::POST, "/admin/config", Some(json!({ "key": "bad key", "value": "x".repeat(70_000) }))).await, 400, "ValidationError");
    assert_eq!(bad["details"], json!(["value must be at most 64 KiB of JSON", "key must be 1 to 200 letters, digits, '.', '_', '-', '/' or ':'"]));
    let bad = assert_error(app.op(Method::POST, "/admin/config/revoke", Some(json!({ "key": "bad key" }))).await, 400, "ValidationError");
    assert_eq!(bad["details"], json!(["key must be 1 to 200 letters, digits, '.', '_', '-', '/' or ':'"]));
    assert_error(app.op(Method::GET, "/admin/config/history", None).await, 400, "ValidationError");
    for (method, path) in [(Method::POST, "/admin/config"), (Method::GET, "/admin/config"), (Method::POST, "/admin/config/revoke")] {
        let body = (method == Method::POST).then(|| json!({ "key": "ui.locale", "value": "xx" }));
        let refused = assert_error(app.call(method, path, Some(a), body).await, 401, "Unauthorized");
        assert_eq!(refused["details"], json!(["admin token required"]));
    }

    // Each write in the platform chain, the operator credential as actor;
    // the tenant's chain holds only its own write.
    let platform: Vec<(String, String)> = app.platform_events().await.into_iter().filter(|(e, _)| e.starts_with("config.")).collect();
    let names: Vec<&str> = platform.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(names, ["config.value.set.v1", "config.value.set.v1", "config.value.revoked.v1", "config.value.set.v1"]);
    assert!(platform.iter().all(|(_, who)| who == "break-glass"), "{platform:?}");
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| e.starts_with("config.")).count(), 1, "{events:?}");
}
db_test!(the_operator_sets_platform_values_every_tenant_resolves_last);
