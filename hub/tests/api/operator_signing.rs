//! The operator's emergency rotation of the token signing key: every call
//! rotates, the documented defaults, no 400 branch, the retired key
//! verifying for the overlap window (the human token lifetime); and the
//! `hub rotate-signing-key` subcommand for a hub that is down.

use base64::Engine;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

/// The `kid` of a JWT's header.
fn kid(token: &str) -> String {
    let header = token.split('.').next().unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(header).unwrap();
    serde_json::from_slice::<Value>(&bytes).unwrap()["kid"].as_str().unwrap().to_string()
}

async fn rotation_payloads(app: &TestApp) -> Vec<Value> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT actor_id, payload FROM audit_entry WHERE tenant_id = '00000000-0000-0000-0000-000000000000' AND event_type = 'security.signing_key.rotated.v1' ORDER BY seq",
    )
    .fetch_all(&app.state().db.read)
    .await
    .unwrap();
    rows.into_iter().map(|(actor, payload)| json!({ "actor": actor, "payload": serde_json::from_str::<Value>(&payload).unwrap() })).collect()
}

async fn every_call_rotates_and_the_retired_key_verifies_for_the_overlap_window(app: TestApp) {
    let before = app.signup("rot@example.com", "rot").await;
    let old = before["token"].as_str().unwrap().to_string();
    let first_kid = kid(&old);

    let rotate = |body: Option<Value>| app.op(Method::POST, "/admin/security/rotate-signing-key", body);
    let (s, r) = rotate(None).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let one = r["data"].clone();
    assert_eq!(one["fingerprint_previous"].as_str(), Some(first_kid.as_str()));
    assert_ne!(one["fingerprint_current"], one["fingerprint_previous"]);
    assert_eq!((one["grace_window_ms"].as_i64(), one["emergency"].as_bool()), (Some(3_600_000), Some(true)), "the human token lifetime");
    let rotated_at = hub_kernel::db::parse_time(one["rotated_at"].as_str().unwrap()).unwrap();

    // The token minted before verifies; new tokens carry the new key.
    assert_eq!(app.get("/api/me", Some(&old)).await.0, StatusCode::OK);
    let after = app.signup("rot2@example.com", "rot2").await;
    assert_eq!(kid(after["token"].as_str().unwrap()), one["fingerprint_current"].as_str().unwrap());
    let (_, jwks) = app.get("/.well-known/jwks.json", None).await;
    let kids: Vec<&str> = jwks["keys"].as_array().unwrap().iter().map(|k| k["kid"].as_str().unwrap()).collect();
    assert!(kids.contains(&first_kid.as_str()) && kids.contains(&one["fingerprint_current"].as_str().unwrap()), "{kids:?}");
    let until: String =
        sqlx::query_scalar("SELECT verify_until FROM crypto_signing_key WHERE kid = $1").bind(&first_kid).fetch_one(&app.state().db.read).await.unwrap();
    assert_eq!((hub_kernel::db::parse_time(&until).unwrap() - rotated_at).num_seconds(), 3600, "the overlap window");

    // Every call rotates again; whatever the body, no 400.
    let (s, r) = rotate(Some(json!({ "reason": "  ", "actor_id": 7 }))).await;
    assert_eq!((s, r["data"]["fingerprint_previous"].clone()), (StatusCode::OK, one["fingerprint_current"].clone()));
    let two = r["data"].clone();
    let (s, r) = rotate(Some(json!({ "reason": "leaked in a log", "actor_id": "ada" }))).await;
    assert_eq!((s, r["data"]["fingerprint_previous"].clone()), (StatusCode::OK, two["fingerprint_current"].clone()));
    let res = app
        .client
        .post(format!("{}/admin/security/rotate-signing-key", app.base))
        .header("x-admin-ops-token", crate::operator::BREAK_GLASS)
        .header("content-type", "application/json")
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(app.get("/api/me", Some(&old)).await.0, StatusCode::OK, "still inside its window after four rotations");

    let recorded = rotation_payloads(&app).await;
    assert_eq!(recorded.len(), 4);
    assert!(recorded.iter().all(|r| r["actor"] == "break-glass"));
    assert_eq!(
        (recorded[0]["payload"]["reason"].as_str(), recorded[0]["payload"]["actor_id"].as_str()),
        (Some("manual emergency rotation"), Some("ops-emergency"))
    );
    assert_eq!(
        (recorded[1]["payload"]["reason"].as_str(), recorded[1]["payload"]["actor_id"].as_str()),
        (Some("manual emergency rotation"), Some("ops-emergency"))
    );
    assert_eq!((recorded[2]["payload"]["reason"].as_str(), recorded[2]["payload"]["actor_id"].as_str()), (Some("leaked in a log"), Some("ada")));
    assert_eq!(recorded[0]["payload"]["fingerprint_current"], one["fingerprint_current"]);
}
db_test!(every_call_rotates_and_the_retired_key_verifies_for_the_overlap_window);

async fn another_replica_verifies_tokens_of_the_rotated_key(app: TestApp) {
    let b = app.replica().await;
    let (s, r) = app.op(Method::POST, "/admin/security/rotate-signing-key", None).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let fresh = app.signup("fresh@example.com", "fresh").await;
    let token = fresh["token"].as_str().unwrap();
    assert_eq!(kid(token), r["data"]["fingerprint_current"].as_str().unwrap());
    assert_eq!(b.get("/api/me", Some(token)).await.0, StatusCode::OK, "hub B knows the new key");
}
db_test!(another_replica_verifies_tokens_of_the_rotated_key);

#[test]
fn the_cli_rotates_the_key_of_a_hub_that_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hub"))
            .args(["rotate-signing-key", "--data-dir"])
            .arg(dir.path())
            .args(extra)
            .env("HUB_DEV", "1")
            .env_remove("DATABASE_URL")
            .env_remove("HUB_MASTER_KEY")
            .env_remove("HUB_TOKEN_TTL_SECONDS")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let first = run(&[]);
    assert_eq!((first["grace_window_ms"].as_i64(), first["emergency"].as_bool()), (Some(3_600_000), Some(true)), "{first}");
    let second = run(&["--reason", "hub down, key leaked", "--actor-id", "ada", "--token-ttl-seconds", "600"]);
    assert_eq!(second["fingerprint_previous"], first["fingerprint_current"], "every call rotates");
    assert_eq!(second["grace_window_ms"].as_i64(), Some(600_000));

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let db = hub_kernel::db::Db::connect(&format!("sqlite://{}?mode=rwc", dir.path().join("hub.db").display())).await.unwrap();
        let keys: Vec<(String, String)> = sqlx::query_as("SELECT kid, status FROM crypto_signing_key ORDER BY created_at").fetch_all(&db.read).await.unwrap();
        let statuses: Vec<&str> = keys.iter().map(|(_, s)| s.as_str()).collect();
        assert_eq!(statuses.last(), Some(&"current"));
        assert!(keys.iter().any(|(k, s)| *k == first["fingerprint_current"] && s == "previous"), "{keys:?}");
        let events: Vec<(String, String)> = sqlx::query_as(
            "SELECT actor_id, payload FROM audit_entry WHERE tenant_id = '00000000-0000-0000-0000-000000000000' AND event_type = 'security.signing_key.rotated.v1' ORDER BY seq",
        )
        .fetch_all(&db.read)
        .await
        .unwrap();
        assert_eq!(events.len(), 2);
        assert!(events.iter().all(|(actor, _)| actor == "hub-cli"));
        let last: Value = serde_json::from_str(&events[1].1).unwrap();
        assert_eq!((last["reason"].as_str(), last["actor_id"].as_str()), (Some("hub down, key leaked"), Some("ada")));
    });
}
