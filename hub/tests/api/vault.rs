//! sdk-vault: envelopes that open only for their tenant and ref, every
//! missing field in one 400, and events that never carry the data.

use base64::{Engine, engine::general_purpose::STANDARD as B64};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn envelopes_open_only_for_their_tenant_and_ref(app: TestApp) {
    let t = app.two_tenants("vault").await;
    let a = t.a_token.as_str();
    let secret = b"the launch codes are 0000";
    let (s, env) = app.post("/api/vault/encrypt", Some(a), json!({ "ref": "codes/1", "plaintext_b64": B64.encode(secret) })).await;
    assert_eq!(s, StatusCode::OK, "{env}");
    let envelope = env["data"].clone();
    assert_eq!(envelope["ref"], "codes/1");
    assert_eq!(B64.decode(envelope["iv_b64"].as_str().unwrap()).unwrap().len(), 12);
    assert_eq!(B64.decode(envelope["tag_b64"].as_str().unwrap()).unwrap().len(), 16);
    assert_eq!(B64.decode(envelope["ciphertext_b64"].as_str().unwrap()).unwrap().len(), secret.len());
    let (_, again) = app.post("/api/vault/encrypt", Some(a), json!({ "ref": "codes/1", "plaintext_b64": B64.encode(secret) })).await;
    assert_ne!(again["data"]["ciphertext_b64"], envelope["ciphertext_b64"], "a fresh key and nonce every time");

    let (s, plain) = app.post("/api/vault/decrypt", Some(a), envelope.clone()).await;
    assert_eq!(s, StatusCode::OK, "{plain}");
    assert_eq!(B64.decode(plain["data"]["plaintext_b64"].as_str().unwrap()).unwrap(), secret);

    // Another ref, altered bytes, another tenant: it does not open.
    let opens_not = json!(["the envelope does not open for this tenant and ref"]);
    let mut other_ref = envelope.clone();
    other_ref["ref"] = json!("codes/2");
    assert_eq!(assert_error(app.post("/api/vault/decrypt", Some(a), other_ref).await, 400, "ValidationError")["details"], opens_not);
    let mut altered = envelope.clone();
    let mut bytes = B64.decode(envelope["ciphertext_b64"].as_str().unwrap()).unwrap();
    bytes[0] ^= 1;
    altered["ciphertext_b64"] = json!(B64.encode(bytes));
    assert_eq!(assert_error(app.post("/api/vault/decrypt", Some(a), altered).await, 400, "ValidationError")["details"], opens_not);
    assert_eq!(assert_error(app.post("/api/vault/decrypt", Some(&t.b_token), envelope.clone()).await, 400, "ValidationError")["details"], opens_not);

    let b = assert_error(app.post("/api/vault/decrypt", Some(a), json!({ "ciphertext_b64": "" })).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!(["ref is required", "ciphertext_b64 is required", "wrapped_dek_b64 is required", "iv_b64 is required", "tag_b64 is required"])
    );
    let b = assert_error(
        app.post("/api/vault/decrypt", Some(a), json!({ "ref": "x", "ciphertext_b64": "%%", "wrapped_dek_b64": "AA==", "iv_b64": "AA==", "tag_b64": "AA==" }))
            .await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["ciphertext_b64 must be base64", "iv_b64 must decode to 12 bytes", "tag_b64 must decode to 16 bytes"]));
    assert_error(app.post("/api/vault/encrypt", Some(a), json!({ "ref": "x", "plaintext_b64": "not base64!" })).await, 400, "ValidationError");

    // The events name the ref and the size, never the data.
    let payloads: Vec<Value> = sqlx::query_scalar::<_, String>("SELECT payload FROM audit_entry WHERE tenant_id = $1 AND event_type LIKE 'vault.%'")
        .bind(t.a["tenant_id"].as_str().unwrap())
        .fetch_all(&app.state().db.read)
        .await
        .unwrap()
        .iter()
        .map(|p| serde_json::from_str(p).unwrap())
        .collect();
    assert_eq!(payloads.len(), 3, "two encryptions and one decryption");
    assert!(payloads.iter().all(|p| p == &json!({ "ref": "codes/1", "bytes": secret.len() })), "{payloads:?}");
}
db_test!(envelopes_open_only_for_their_tenant_and_ref);
