//! sdk-secrets: references registered, read by their URL-encoded ref with
//! their rotation schedule, rotated, every lookup audited; never a secret.

use reqwest::StatusCode;
use serde_json::json;

use crate::{db_test, helpers::*};

async fn references_are_registered_read_and_rotated(app: TestApp) {
    let t = app.two_tenants("secrets").await;
    let a = t.a_token.as_str();
    let body = json!({ "ref": "payments/stripe:live", "scope": "service", "kms_key_id": "arn:aws:kms:eu-west-1:1:key/abc", "rotation_period_days": 30, "last_rotated_at": "2020-01-01T00:00:00Z" });
    let (s, made) = app.post("/api/secrets/refs", Some(a), body.clone()).await;
    assert_eq!(s, StatusCode::CREATED, "{made}");
    let r = &made["data"];
    assert_eq!((r["ref"].as_str(), r["scope"].as_str(), r["version"].as_i64()), (Some("payments/stripe:live"), Some("service"), Some(1)));
    assert_eq!((r["next_rotation_at"].as_str(), r["rotation_due"].as_bool()), (Some("2020-01-31T00:00:00.000000Z"), Some(true)));
    assert_error(app.post("/api/secrets/refs", Some(a), body).await, 409, "Conflict");

    let path = "/api/secrets/refs/payments%2Fstripe%3Alive";
    let (s, read) = app.get(path, Some(a)).await;
    assert_eq!((s, read["data"]["kms_key_id"].as_str()), (StatusCode::OK, Some("arn:aws:kms:eu-west-1:1:key/abc")));
    assert!(read["data"].as_object().unwrap().keys().all(|k| !k.contains("secret") && k != "value"), "{read}");
    assert_error(app.get(path, Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/secrets/refs/nothing-here", Some(a)).await, 404, "NotFound");

    let (s, rotated) = app.post(&format!("{path}/rotate"), Some(a), json!({ "kms_key_id": "arn:aws:kms:eu-west-1:1:key/def" })).await;
    assert_eq!(s, StatusCode::OK, "{rotated}");
    assert_eq!((rotated["data"]["version"].as_i64(), rotated["data"]["rotation_due"].as_bool()), (Some(2), Some(false)));
    assert_eq!(rotated["data"]["kms_key_id"], "arn:aws:kms:eu-west-1:1:key/def");
    assert_error(app.post(&format!("{path}/rotate"), Some(&t.b_token), json!({})).await, 404, "NotFound");

    let (_, plain) = app.post("/api/secrets/refs", Some(a), json!({ "ref": "smtp", "kms_key_id": "k" })).await;
    assert_eq!((plain["data"]["scope"].as_str(), plain["data"]["next_rotation_at"].clone()), (Some("tenant"), json!(null)));
    let b = assert_error(
        app.post("/api/secrets/refs", Some(a), json!({ "ref": "bad ref", "scope": "global", "rotation_period_days": 0 })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!(["scope must be one of: tenant, app, service, app_user", "kms_key_id is required", "rotation_period_days must be an integer from 1 to 3650",])
    );
    let b = assert_error(
        app.post("/api/secrets/refs", Some(a), json!({ "ref": "bad ref", "kms_key_id": "k", "last_rotated_at": "2999-01-01T00:00:00Z" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!(["ref must be 1 to 256 of letters, digits, '.', '_', '-', '/' or ':'", "last_rotated_at must not be more than 5 minutes in the future"])
    );
    let b =
        assert_error(app.post("/api/secrets/refs", Some(a), json!({ "ref": "r", "kms_key_id": "k", "last_rotated_at": "soon" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["last_rotated_at must be an RFC 3339 timestamp"]));
    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |n: &str| events.iter().filter(|e| *e == n).count();
    assert_eq!((count("secrets.reference.created.v1"), count("secrets.reference.accessed.v1"), count("secrets.reference.rotated.v1")), (2, 1, 1));
}
db_test!(references_are_registered_read_and_rotated);

async fn the_registry_lists_what_is_due_and_references_change_and_go(app: TestApp) {
    let t = app.two_tenants("secrets-life").await;
    let a = t.a_token.as_str();
    let app = &app;
    let make = |body: serde_json::Value| async move {
        let (s, r) = app.post("/api/secrets/refs", Some(a), body).await;
        assert_eq!(s, StatusCode::CREATED, "{r}");
        r
    };
    make(json!({ "ref": "old/key", "kms_key_id": "k1", "rotation_period_days": 30, "last_rotated_at": "2020-01-01T00:00:00Z" })).await;
    make(json!({ "ref": "fresh/key", "kms_key_id": "k2", "rotation_period_days": 30 })).await;
    make(json!({ "ref": "smtp", "scope": "app", "kms_key_id": "k3" })).await;
    let (s, _) = app
        .post(
            "/api/secrets/refs",
            Some(&t.b_token),
            json!({ "ref": "theirs", "kms_key_id": "k", "rotation_period_days": 1, "last_rotated_at": "2020-01-01T00:00:00Z" }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);

    let refs = |v: &serde_json::Value| v["data"].as_array().unwrap().iter().map(|r| r["ref"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let (s, all) = app.get("/api/secrets/refs", Some(a)).await;
    assert_eq!((s, all["total"].as_i64(), refs(&all)), (StatusCode::OK, Some(3), vec!["smtp".to_string(), "fresh/key".into(), "old/key".into()]), "{all}");
    assert!(all["data"].as_array().unwrap().iter().all(|r| r.get("kms_key_id").is_none()), "the list does not say where secrets live: {all}");
    assert_eq!((all["data"][2]["rotation_due"].as_bool(), all["data"][2]["next_rotation_at"].as_str()), (Some(true), Some("2020-01-31T00:00:00.000000Z")));
    assert_eq!((all["data"][1]["rotation_due"].as_bool(), all["data"][0]["next_rotation_at"].clone()), (Some(false), json!(null)));
    let (_, due) = app.get("/api/secrets/refs?rotation_due=true", Some(a)).await;
    assert_eq!(refs(&due), ["old/key"]);
    let (_, not_due) = app.get("/api/secrets/refs?rotation_due=false", Some(a)).await;
    assert_eq!(refs(&not_due), ["smtp", "fresh/key"]);
    let (_, app_scope) = app.get("/api/secrets/refs?scope=app", Some(a)).await;
    assert_eq!(refs(&app_scope), ["smtp"]);
    let (_, page) = app.get("/api/secrets/refs?limit=1&offset=1", Some(a)).await;
    assert_eq!((page["total"].as_i64(), refs(&page)), (Some(3), vec!["fresh/key".to_string()]));
    for bad in ["scope=global", "rotation_due=maybe", "limit=0"] {
        assert_error(app.get(&format!("/api/secrets/refs?{bad}"), Some(a)).await, 400, "ValidationError");
    }
    // Listing is not a lookup: nothing was accessed.
    assert!(!app.events_of(&t.a["tenant_id"]).await.iter().any(|e| e == "secrets.reference.accessed.v1"));

    // A change: scope and period; the schedule follows; the same change
    // again answers the same and records nothing.
    let old = "/api/secrets/refs/old%2Fkey";
    let (s, p) = app.call(reqwest::Method::PATCH, old, Some(a), Some(json!({ "rotation_period_days": 3650, "scope": "service" }))).await;
    assert_eq!(s, StatusCode::OK, "{p}");
    assert_eq!((p["data"]["scope"].as_str(), p["data"]["rotation_period_days"].as_i64()), (Some("service"), Some(3650)));
    assert_eq!((p["data"]["next_rotation_at"].as_str(), p["data"]["rotation_due"].as_bool()), (Some("2029-12-29T00:00:00.000000Z"), Some(false)));
    assert_eq!((p["data"]["version"].as_i64(), p["data"]["kms_key_id"].as_str()), (Some(1), Some("k1")));
    let (s, again) = app.call(reqwest::Method::PATCH, old, Some(a), Some(json!({ "rotation_period_days": 3650 }))).await;
    assert_eq!(
        (s, &again["data"]["next_rotation_at"], &again["data"]["updated_at"]),
        (StatusCode::OK, &p["data"]["next_rotation_at"], &p["data"]["updated_at"])
    );
    let (_, due) = app.get("/api/secrets/refs?rotation_due=true", Some(a)).await;
    assert_eq!(due["total"], 0);
    let (_, smtp) = app.call(reqwest::Method::PATCH, "/api/secrets/refs/smtp", Some(a), Some(json!({ "rotation_period_days": 7 }))).await;
    assert_eq!((smtp["data"]["scope"].as_str(), smtp["data"]["rotation_due"].as_bool()), (Some("app"), Some(false)));
    assert!(smtp["data"]["next_rotation_at"].is_string(), "{smtp}");
    let body = assert_error(app.call(reqwest::Method::PATCH, old, Some(a), Some(json!({}))).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["give at least one of scope, rotation_period_days"]));
    let body = assert_error(
        app.call(reqwest::Method::PATCH, old, Some(a), Some(json!({ "scope": "world", "rotation_period_days": 0 }))).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["scope must be one of: tenant, app, service, app_user", "rotation_period_days must be an integer from 1 to 3650"]));
    assert_error(app.call(reqwest::Method::PATCH, old, Some(&t.b_token), Some(json!({ "scope": "app" }))).await, 404, "NotFound");
    assert_error(app.call(reqwest::Method::PATCH, "/api/secrets/refs/none", Some(a), Some(json!({ "scope": "app" }))).await, 404, "NotFound");

    // Delete: once; the ref may be registered again.
    assert_error(app.call(reqwest::Method::DELETE, "/api/secrets/refs/smtp", Some(&t.b_token), None).await, 404, "NotFound");
    let (s, d) = app.call(reqwest::Method::DELETE, "/api/secrets/refs/smtp", Some(a), None).await;
    assert_eq!((s, d["data"].clone()), (StatusCode::OK, json!({ "ref": "smtp", "deleted": true })));
    assert_error(app.call(reqwest::Method::DELETE, "/api/secrets/refs/smtp", Some(a), None).await, 404, "NotFound");
    assert_error(app.get("/api/secrets/refs/smtp", Some(a)).await, 404, "NotFound");
    let (_, all) = app.get("/api/secrets/refs", Some(a)).await;
    assert_eq!(all["total"], 2);
    make(json!({ "ref": "smtp", "kms_key_id": "k4" })).await;

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |n: &str| events.iter().filter(|e| *e == n).count();
    assert_eq!((count("secrets.reference.updated.v1"), count("secrets.reference.deleted.v1"), count("secrets.reference.created.v1")), (2, 1, 4));
}
db_test!(the_registry_lists_what_is_due_and_references_change_and_go);
