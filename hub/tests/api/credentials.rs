//! Applications and API keys: issue, list, rotate, revoke, disable, scope
//! validation, expiry and rate limits.

use reqwest::StatusCode;
use serde_json::json;

use crate::{db_test, helpers::*};

async fn applications_and_keys_are_issued_and_listed_without_secrets(app: TestApp) {
    let t = app.signup("keys@example.com", "keys").await;
    let token = t["token"].as_str().unwrap();
    let (s, a) = app.post("/api/applications", Some(token), json!({ "name": "Billing", "slug": "billing", "description": "d", "environment": "test" })).await;
    assert_eq!(s, StatusCode::CREATED, "{a}");
    assert_eq!(a["data"]["status"], "active");
    assert_eq!(a["data"]["environment"], "test");
    assert_eq!(a["data"]["slug"], "billing");
    let id = a["data"]["application_id"].as_str().unwrap();
    assert_error(app.post("/api/applications", Some(token), json!({ "name": "B", "slug": "billing", "environment": "live" })).await, 409, "Conflict");
    let body =
        assert_error(app.post("/api/applications", Some(token), json!({ "name": "B", "slug": "x", "environment": "prod" })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["environment must be one of: live, test"]));

    let (s, k) = app
        .post(
            &format!("/api/applications/{id}/keys"),
            Some(token),
            json!({
                "name": "server", "scopes": ["crm.contact.read", "sla.*"], "rate_limit_rpm": 100, "expires_at": "2999-01-01T00:00:00Z",
            }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{k}");
    let key = &k["data"];
    let secret = key["api_key"].as_str().unwrap();
    assert!(secret.starts_with("pk_test_") && secret.len() >= 8 + 43, "{secret}");
    assert_eq!(key["prefix"], "pk_test_");
    assert_eq!(key["rate_limit_rpm"], 100);
    assert_eq!(key["expires_at"], "2999-01-01T00:00:00.000000Z");
    assert!(key["synthetic_persona_id"].is_string() && key["created_at"].is_string() && key["key_id"].is_string());
    // Only a hash is stored.
    let stored: String = sqlx::query_scalar("SELECT key_hash FROM credential_api_key").fetch_one(&app.state().db.read).await.unwrap();
    assert_ne!(stored, secret);
    assert_eq!(stored.len(), 64);
    // The synthetic persona exists, as a service persona without grants.
    let (s, roles) = app.get(&format!("/api/personas/{}/roles", key["synthetic_persona_id"].as_str().unwrap()), Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{roles}");
    assert_eq!(roles["data"]["roles"], json!([]));
    assert_eq!(roles["data"]["effective_permissions"], json!([]));

    let (s, list) = app.get(&format!("/api/applications/{id}/keys"), Some(token)).await;
    assert_eq!(s, StatusCode::OK);
    let listed = &list["data"][0];
    assert!(listed.get("api_key").is_none() && listed.get("key_hash").is_none(), "{listed}");
    assert!(!list.to_string().contains(secret));
    assert_eq!(listed["masked_key"], format!("pk_test_…{}", &secret[secret.len() - 4..]));
    assert_eq!(listed["scopes"], json!(["crm.contact.read", "sla.*"]));
    let (s, apps) = app.get("/api/applications", Some(token)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(apps["data"][0]["application_id"], id);
}
db_test!(applications_and_keys_are_issued_and_listed_without_secrets);

async fn key_requests_are_validated(app: TestApp) {
    let t = app.signup("kv@example.com", "kv").await;
    let token = t["token"].as_str().unwrap();
    let (id, _) = app.key(token, "kv", json!(["*"])).await;
    let path = format!("/api/applications/{id}/keys");
    let body =
        assert_error(app.post(&path, Some(token), json!({ "name": "k", "scopes": ["crm", "crm:read", "crm.contact.read", 5] })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["scopes[3] must be a string"]));
    let body =
        assert_error(app.post(&path, Some(token), json!({ "name": "k", "scopes": ["crm", "crm:read", "crm.contact.read"] })).await, 400, "ValidationError");
    let detail = body["details"][0].as_str().unwrap();
    assert!(detail.contains("crm, crm:read"), "{detail}");
    assert!(!detail.contains("crm.contact.read"), "{detail}");
    let body = assert_error(app.post(&path, Some(token), json!({ "name": "k", "scopes": [] })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["scopes must hold at least 1 items"]));
    let body = assert_error(app.post(&path, Some(token), json!({ "name": "k", "scopes": "crm.*" })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["scopes must be an array"]));
    let body = assert_error(app.post(&path, Some(token), json!({})).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["name is required", "scopes is required"]));
    let body = assert_error(
        app.post(&path, Some(token), json!({ "name": "k", "scopes": ["*"], "rate_limit_rpm": 0, "expires_at": "soon" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["rate_limit_rpm must be an integer of at least 1", "expires_at must be an RFC 3339 timestamp"]));
    // Once the body matches its schema: the expiry must lie ahead.
    let body =
        assert_error(app.post(&path, Some(token), json!({ "name": "k", "scopes": ["*"], "expires_at": "2001-01-01T00:00:00Z" })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["expires_at must be in the future"]));
}
db_test!(key_requests_are_validated);

async fn credential_management_refuses_api_keys(app: TestApp) {
    let t = app.signup("h@example.com", "h").await;
    let (id, key) = app.key(t["token"].as_str().unwrap(), "h", json!(["*"])).await;
    let k = key["api_key"].as_str();
    let body = assert_error(app.post("/api/applications", k, json!({ "name": "x", "slug": "x", "environment": "live" })).await, 403, "Forbidden");
    assert_eq!(body["details"], json!(["this route requires a human JWT; API keys are rejected"]));
    assert_error(app.get(&format!("/api/applications/{id}/keys"), k).await, 403, "Forbidden");
    assert_error(app.post(&format!("/api/api-keys/{}/revoke", key["key_id"].as_str().unwrap()), k, json!({})).await, 403, "Forbidden");
}
db_test!(credential_management_refuses_api_keys);

async fn rotate_revoke_and_disable_take_effect_at_once(app: TestApp) {
    let t = app.signup("rr@example.com", "rr").await;
    let token = t["token"].as_str().unwrap();
    let (id, k1) = app.key(token, "rr", json!(["*"])).await;
    let (s, k2) = app.post(&format!("/api/applications/{id}/keys"), Some(token), json!({ "name": "second", "scopes": ["*"] })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (first, second) = (k1["api_key"].as_str().unwrap(), k2["data"]["api_key"].as_str().unwrap());
    assert_eq!(app.get("/api/me", Some(first)).await.0, StatusCode::OK);

    // Rotation: a new secret for the same record; the old one stops working.
    let (s, rotated) = app.post(&format!("/api/api-keys/{}/rotate", k1["key_id"].as_str().unwrap()), Some(token), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{rotated}");
    assert_eq!(rotated["data"]["key_id"], k1["key_id"]);
    let new_secret = rotated["data"]["api_key"].as_str().unwrap();
    assert_ne!(new_secret, first);
    assert_error(app.get("/api/me", Some(first)).await, 401, "Unauthorized");
    let (s, me) = app.get("/api/me", Some(new_secret)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(me["data"]["key_id"], k1["key_id"]);

    // Revocation: that key stops; the other key is unaffected.
    let (s, revoked) = app.post(&format!("/api/api-keys/{}/revoke", k1["key_id"].as_str().unwrap()), Some(token), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(revoked["data"]["status"], "revoked");
    assert_error(app.get("/api/me", Some(new_secret)).await, 401, "Unauthorized");
    assert_eq!(app.get("/api/me", Some(second)).await.0, StatusCode::OK);
    // A revoked key cannot be rotated back to life.
    assert_error(app.post(&format!("/api/api-keys/{}/rotate", k1["key_id"].as_str().unwrap()), Some(token), json!({})).await, 409, "Conflict");

    // Disabling the application disables every key at once.
    let (s, d) = app.post(&format!("/api/applications/{id}/disable"), Some(token), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(d["data"]["status"], "disabled");
    assert_eq!(d["data"]["keys_disabled"], 1);
    assert_error(app.get("/api/me", Some(second)).await, 401, "Unauthorized");
    assert_error(app.post(&format!("/api/applications/{id}/keys"), Some(token), json!({ "name": "k", "scopes": ["*"] })).await, 409, "Conflict");
}
db_test!(rotate_revoke_and_disable_take_effect_at_once);

async fn an_expired_key_stops_working(app: TestApp) {
    let t = app.signup("ex@example.com", "ex").await;
    let token = t["token"].as_str().unwrap();
    let (id, _) = app.key(token, "ex", json!(["*"])).await;
    let expires = hub_kernel::db::format_time(chrono::Utc::now() + chrono::Duration::milliseconds(1500));
    let (s, k) = app.post(&format!("/api/applications/{id}/keys"), Some(token), json!({ "name": "short", "scopes": ["*"], "expires_at": expires })).await;
    assert_eq!(s, StatusCode::CREATED, "{k}");
    let secret = k["data"]["api_key"].as_str().unwrap();
    assert_eq!(app.get("/api/me", Some(secret)).await.0, StatusCode::OK);
    tokio::time::sleep(std::time::Duration::from_millis(1600)).await;
    assert_error(app.get("/api/me", Some(secret)).await, 401, "Unauthorized");
}
db_test!(an_expired_key_stops_working);

async fn rate_limits_answer_429_with_retry_after(app: TestApp) {
    let t = app.signup("rl@example.com", "rl").await;
    let token = t["token"].as_str().unwrap();
    let (id, _) = app.key(token, "rl", json!(["*"])).await;
    let (_, k) = app.post(&format!("/api/applications/{id}/keys"), Some(token), json!({ "name": "slow", "scopes": ["*"], "rate_limit_rpm": 3 })).await;
    let secret = k["data"]["api_key"].as_str().unwrap();
    // Align to the start of a minute window so the test is not split by one.
    within_one_minute(5).await;
    for _ in 0..3 {
        assert_eq!(app.get("/api/me", Some(secret)).await.0, StatusCode::OK);
    }
    let res = app.client.get(format!("{}/api/me", app.base)).bearer_auth(secret).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = res.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["error"], "RateLimited");
    // Another key of the same application is not limited by it.
    let (_, other) = app.post(&format!("/api/applications/{id}/keys"), Some(token), json!({ "name": "free", "scopes": ["*"] })).await;
    assert_eq!(app.get("/api/me", other["data"]["api_key"].as_str()).await.0, StatusCode::OK);
}
db_test!(rate_limits_answer_429_with_retry_after);

async fn tenant_level_issue_uses_the_default_live_application(app: TestApp) {
    let t = app.signup("tl@example.com", "tl").await;
    let token = t["token"].as_str().unwrap();
    let body = assert_error(app.post("/api/api-keys", Some(token), json!({ "name": "k", "scopes": ["*"] })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["tenant_id is required"]));
    let body = assert_error(
        app.post("/api/api-keys", Some(token), json!({ "tenant_id": t["tenant_id"], "application_id": "default", "name": "k", "scopes": ["crm.*"] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["application_id must be a UUID"]));
    let (s, k) = app.post("/api/api-keys", Some(token), json!({ "tenant_id": t["tenant_id"], "name": "k", "scopes": ["crm.*"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{k}");
    assert!(k["data"]["api_key"].as_str().unwrap().starts_with("pk_live_"));
    let (_, again) = app.post("/api/api-keys", Some(token), json!({ "tenant_id": t["tenant_id"], "name": "k2", "scopes": ["crm.*"] })).await;
    assert_eq!(k["data"]["application_id"], again["data"]["application_id"], "one default application");
    let (_, apps) = app.get("/api/applications", Some(token)).await;
    assert_eq!(apps["data"][0]["slug"], "default");
}
db_test!(tenant_level_issue_uses_the_default_live_application);

async fn a_key_is_read_changed_and_its_application_renamed_and_enabled_again(app: TestApp) {
    let t = app.two_tenants("kl").await;
    let token = t.a_token.as_str();
    let (id, k1) = app.key(token, "kl", json!(["crm.*"])).await;
    let key_id = k1["key_id"].as_str().unwrap().to_string();
    let secret = k1["api_key"].as_str().unwrap().to_string();
    let (s, k2) = app.post(&format!("/api/applications/{id}/keys"), Some(token), json!({ "name": "second", "scopes": ["*"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{k2}");
    let second = k2["data"]["api_key"].as_str().unwrap().to_string();
    let one = format!("/api/api-keys/{key_id}");

    // Read one key: masked, never its secret or hash.
    let (s, read) = app.get(&one, Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{read}");
    let k = &read["data"];
    assert_eq!((k["key_id"].as_str(), k["application_id"].as_str(), k["status"].as_str()), (Some(key_id.as_str()), Some(id.as_str()), Some("active")));
    assert_eq!(k["masked_key"], format!("pk_live_…{}", &secret[secret.len() - 4..]));
    assert!(k.get("api_key").is_none() && k.get("key_hash").is_none() && !read.to_string().contains(&secret), "{read}");
    assert_error(app.get(&one, Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/api-keys/not-a-key", Some(token)).await, 404, "NotFound");
    assert_error(app.get(&format!("/api/api-keys/{}", uuid::Uuid::now_v7()), Some(token)).await, 404, "NotFound");
    assert_error(app.get(&one, Some(&secret)).await, 403, "Forbidden");

    // Lists: pages with a total, oldest first.
    let (s, keys) = app.get(&format!("/api/applications/{id}/keys?limit=1&offset=1"), Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{keys}");
    assert_eq!((keys["total"].as_i64(), keys["data"].as_array().unwrap().len()), (Some(2), 1));
    assert_eq!(keys["data"][0]["key_id"], k2["data"]["key_id"]);
    assert_error(app.get(&format!("/api/applications/{id}/keys?limit=0"), Some(token)).await, 400, "ValidationError");
    app.post("/api/applications", Some(token), json!({ "name": "Other", "slug": "kl-other", "environment": "test" })).await;
    let (s, apps) = app.get("/api/applications?limit=1", Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{apps}");
    assert_eq!((apps["total"].as_i64(), apps["data"][0]["application_id"].as_str()), (Some(2), Some(id.as_str())));

    // Change a key: what is absent stays; the gate sees the change at once.
    let change = |body: serde_json::Value| app.call(reqwest::Method::PATCH, &one, Some(token), Some(body));
    let b = assert_error(change(json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of: name, rate_limit_rpm, expires_at"]));
    let b = assert_error(change(json!({ "rate_limit_rpm": 0, "expires_at": "soon" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["rate_limit_rpm must be an integer of at least 1", "expires_at must be an RFC 3339 timestamp"]));
    let b = assert_error(change(json!({ "expires_at": "2001-01-01T00:00:00Z" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["expires_at must be in the future"]));
    assert_error(app.call(reqwest::Method::PATCH, &one, Some(&t.b_token), Some(json!({ "name": "x" }))).await, 404, "NotFound");
    let (s, changed) = change(json!({ "name": " renamed ", "rate_limit_rpm": 1 })).await;
    assert_eq!(s, StatusCode::OK, "{changed}");
    assert_eq!((changed["data"]["name"].as_str(), changed["data"]["rate_limit_rpm"].as_i64()), (Some("renamed"), Some(1)));
    assert_eq!(changed["data"]["expires_at"], serde_json::Value::Null);
    assert_eq!(changed["data"]["scopes"], json!(["crm.*"]));
    let (s, changed) = change(json!({ "expires_at": "2999-01-01T00:00:00Z" })).await;
    assert_eq!(s, StatusCode::OK, "{changed}");
    assert_eq!((changed["data"]["name"].as_str(), changed["data"]["expires_at"].as_str()), (Some("renamed"), Some("2999-01-01T00:00:00.000000Z")));
    // The new limit holds at once: one request a minute.
    assert_eq!(app.get("/api/crm/contacts", Some(&secret)).await.0, StatusCode::OK);
    assert_error(app.get("/api/crm/contacts", Some(&secret)).await, 429, "RateLimited");

    // Rename the application; its slug and environment stay.
    let app_path = format!("/api/applications/{id}");
    let b = assert_error(app.call(reqwest::Method::PATCH, &app_path, Some(token), Some(json!({ "name": " " }))).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of: name, description"]));
    assert_error(app.call(reqwest::Method::PATCH, &app_path, Some(&t.b_token), Some(json!({ "name": "x" }))).await, 404, "NotFound");
    let (s, renamed) = app.call(reqwest::Method::PATCH, &app_path, Some(token), Some(json!({ "name": "Renamed", "description": "why" }))).await;
    assert_eq!(s, StatusCode::OK, "{renamed}");
    assert_eq!((renamed["data"]["name"].as_str(), renamed["data"]["description"].as_str()), (Some("Renamed"), Some("why")));
    assert_eq!((renamed["data"]["slug"].as_str(), renamed["data"]["environment"].as_str()), (Some("kl"), Some("live")));
    let (_, read) = app.get(&app_path, Some(token)).await;
    assert_eq!(read["data"], renamed["data"]);

    // Disable, then enable: the keys the disable stopped work again; a revoked key stays revoked.
    let (s, k3) = app.post(&format!("/api/applications/{id}/keys"), Some(token), json!({ "name": "third", "scopes": ["*"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{k3}");
    app.post(&format!("/api/api-keys/{}/revoke", k3["data"]["key_id"].as_str().unwrap()), Some(token), json!({})).await;
    let enable = format!("/api/applications/{id}/enable");
    let (s, same) = app.post(&enable, Some(token), json!({})).await;
    assert_eq!((s, same["data"]["status"].as_str(), same["data"]["keys_enabled"].as_u64()), (StatusCode::OK, Some("active"), Some(0)), "{same}");
    let (s, d) = app.post(&format!("/api/applications/{id}/disable"), Some(token), json!({})).await;
    assert_eq!((s, d["data"]["keys_disabled"].as_u64()), (StatusCode::OK, Some(2)));
    assert_error(app.get("/api/me", Some(&second)).await, 401, "Unauthorized");
    assert_error(app.post(&enable, Some(&t.b_token), json!({})).await, 404, "NotFound");
    let (s, e) = app.post(&enable, Some(token), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{e}");
    assert_eq!(e["data"], json!({ "application_id": id, "status": "active", "keys_enabled": 2 }));
    assert_eq!(app.get("/api/me", Some(&second)).await.0, StatusCode::OK);
    let (_, k3) = app.get(&format!("/api/api-keys/{}", k3["data"]["key_id"].as_str().unwrap()), Some(token)).await;
    assert_eq!(k3["data"]["status"], "revoked");
    let (s, again) = app.post(&enable, Some(token), json!({})).await;
    assert_eq!((s, again["data"]["keys_enabled"].as_u64()), (StatusCode::OK, Some(0)));
    // A revoked key cannot be changed.
    let b = assert_error(
        app.call(reqwest::Method::PATCH, &format!("/api/api-keys/{}", k3["data"]["key_id"].as_str().unwrap()), Some(token), Some(json!({ "name": "x" }))).await,
        409,
        "Conflict",
    );
    assert_eq!(b["details"], json!(["the key is revoked: only an active or disabled key can be changed"]));

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |name: &str| events.iter().filter(|e| *e == name).count();
    assert_eq!(
        (count("identity.api_key.updated.v1"), count("identity.application.updated.v1"), count("identity.application.enabled.v1")),
        (2, 1, 1),
        "{events:?}"
    );
}
db_test!(a_key_is_read_changed_and_its_application_renamed_and_enabled_again);
