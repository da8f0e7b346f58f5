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
