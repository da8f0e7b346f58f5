//! The operator's BYOK bindings: binding re-wraps the tenant's keys under
//! the customer-managed key, rotation re-wraps them again (a repeat is a
//! clean 409), and revocation (`active` → `revoking` → `revoked` within
//! the SLA) makes the tenant's vault refuse to open anything.

use base64::{Engine, engine::general_purpose::STANDARD as B64};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn seal(app: &TestApp, token: &str, text: &str) -> Value {
    let (s, env) = app.post("/api/vault/encrypt", Some(token), json!({ "ref": "byok/1", "plaintext_b64": B64.encode(text) })).await;
    assert_eq!(s, StatusCode::OK, "{env}");
    env["data"].clone()
}

async fn opened(app: &TestApp, token: &str, envelope: &Value) -> (StatusCode, Value) {
    app.post("/api/vault/decrypt", Some(token), envelope.clone()).await
}

/// (wrapped_by) of the tenant's vault key.
async fn wrapper(app: &TestApp, tenant: &str) -> Option<String> {
    sqlx::query_scalar("SELECT d.wrapped_by FROM vault_tenant_key v JOIN crypto_data_key d ON d.key_id = v.data_key_id WHERE v.tenant_id = $1")
        .bind(tenant)
        .fetch_one(&app.state().db.read)
        .await
        .unwrap()
}

async fn a_bound_tenants_keys_rotate_and_stop_opening_once_revoked(app: TestApp) {
    let t = app.two_tenants("op-byok").await;
    let (a, b) = (t.a_token.as_str(), t.b_token.as_str());
    let tenant = t.a["tenant_id"].as_str().unwrap();
    let before = seal(&app, a, "sealed before the binding").await;
    let b_env = seal(&app, b, "tenant B's").await;
    assert_eq!(wrapper(&app, tenant).await, None, "under the master key");

    let bind = |body: Value| app.op(Method::POST, "/admin/byok/bindings", Some(body));
    let body = json!({ "tenant_id": tenant, "provider": "aws-kms", "customer_kms_key_arn": "arn:aws:kms:eu-west-1:111122223333:key/k1",
        "tenant_key_id": "tk-1", "operator_id": "op-ada", "sla_revoke_propagation_seconds": 30, "siem_forwarder_endpoint": "https://siem.example/in" });
    let (s, bound) = bind(body.clone()).await;
    assert_eq!(s, StatusCode::OK, "{bound}");
    let binding = bound["data"].clone();
    let id = binding["binding_id"].as_str().unwrap().to_string();
    assert_eq!(
        (
            binding["grant_status"].as_str(),
            binding["tenant_key_id"].as_str(),
            binding["sla_revoke_propagation_seconds"].as_i64(),
            binding["revoked_at"].clone()
        ),
        (Some("active"), Some("tk-1"), Some(30), Value::Null)
    );
    assert_eq!((binding["provider"].as_str(), binding["siem_forwarder_endpoint"].as_str()), (Some("aws-kms"), Some("https://siem.example/in")));
    assert_eq!(wrapper(&app, tenant).await.as_deref(), Some("tk-1"), "the vault key is re-wrapped under the customer's key");
    let (s, p) = opened(&app, a, &before).await;
    assert_eq!((s, p["data"]["plaintext_b64"].as_str()), (StatusCode::OK, Some(B64.encode("sealed before the binding").as_str())));
    assert_error(bind(body.clone()).await, 409, "Conflict");
    let mut other = body.clone();
    other["tenant_id"] = t.b["tenant_id"].clone();
    let e = assert_error(bind(other).await, 409, "Conflict");
    assert_eq!(e["details"], json!(["tenant_key_id tk-1 is already in use"]));

    let (s, got) = app.op(Method::GET, format!("/admin/byok/bindings/tenant/{tenant}"), None).await;
    assert_eq!((s, got["data"].clone()), (StatusCode::OK, binding.clone()));
    for missing in [t.b["tenant_id"].as_str().unwrap().to_string(), "nope".to_string()] {
        let e = assert_error(app.op(Method::GET, format!("/admin/byok/bindings/tenant/{missing}"), None).await, 404, "NotFound");
        assert_eq!(e["details"], json!(["no binding for tenant"]));
    }

    // Rotation re-wraps; what the keys sealed still opens.
    let rotate = |body: Value| app.op(Method::POST, format!("/admin/byok/bindings/{id}/rotate"), Some(body));
    let step = json!({ "previous_tenant_key_id": "tk-1", "new_tenant_key_id": "tk-2", "operator_id": "op-ada" });
    let (s, r) = rotate(step.clone()).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(
        (r["data"]["binding_id"].as_str(), r["data"]["previous_tenant_key_id"].as_str(), r["data"]["new_tenant_key_id"].as_str()),
        (Some(id.as_str()), Some("tk-1"), Some("tk-2"))
    );
    assert_eq!((r["data"]["leaf_reencryption_needed"].as_bool(), r["data"]["rewrapped_keys"].as_i64()), (Some(false), Some(1)));
    assert!(r["data"]["started_at"].as_str() <= r["data"]["completed_at"].as_str());
    assert_eq!(wrapper(&app, tenant).await.as_deref(), Some("tk-2"));
    assert_eq!(opened(&app, a, &before).await.0, StatusCode::OK);
    let during = seal(&app, a, "sealed under tk-2").await;
    // A repeat is refused cleanly, not a 500.
    let e = assert_error(rotate(step).await, 409, "UndecryptableError");
    assert_eq!(e["details"], json!(["the tenant's keys are wrapped under tk-2, not tk-1"]));
    let e = assert_error(rotate(json!({ "previous_tenant_key_id": "tk-2", "new_tenant_key_id": "tk-1", "operator_id": "o" })).await, 409, "Conflict");
    assert_eq!(e["details"], json!(["new_tenant_key_id tk-1 is already in use"]));
    let e = assert_error(rotate(json!({ "previous_tenant_key_id": "tk-2", "new_tenant_key_id": "tk-2" })).await, 400, "ValidationError");
    assert_eq!(e["details"], json!(["operator_id is required"]));
    // The keys' difference once the body matches its schema.
    let e = assert_error(rotate(json!({ "previous_tenant_key_id": "tk-2", "new_tenant_key_id": " tk-2 ", "operator_id": "o" })).await, 400, "ValidationError");
    assert_eq!(e["details"], json!(["new_tenant_key_id must differ from previous_tenant_key_id"]));
    let e = assert_error(rotate(json!({})).await, 400, "ValidationError");
    assert_eq!(e["details"], json!(["previous_tenant_key_id is required", "new_tenant_key_id is required", "operator_id is required"]));

    // Revocation: refused from then on, within the SLA.
    let revoke = |binding: &str, body: Value| app.op(Method::POST, format!("/admin/byok/bindings/{binding}/revoke"), Some(body));
    let e = assert_error(revoke(&id, json!({ "reason": " " })).await, 400, "ValidationError");
    assert_eq!(e["details"], json!(["reason is required", "operator_id is required"]));
    let asked = chrono::Utc::now();
    let (s, r) = revoke(&id, json!({ "reason": "customer pulled the grant", "operator_id": "op-ada" })).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(
        (r["data"]["binding_id"].as_str(), r["data"]["tenant_id"].as_str(), r["data"]["grant_status"].as_str()),
        (Some(id.as_str()), Some(tenant), Some("revoked"))
    );
    let revoked_at = hub_kernel::db::parse_time(r["data"]["revoked_at"].as_str().unwrap()).unwrap();
    assert!((revoked_at - asked).num_seconds() < 30, "within sla_revoke_propagation_seconds");
    let refused = json!(["the tenant's customer-managed key is not granted to the hub: its BYOK binding is revoked"]);
    for envelope in [&before, &during] {
        assert_eq!(assert_error(opened(&app, a, envelope).await, 409, "UndecryptableError")["details"], refused);
    }
    let e = assert_error(app.post("/api/vault/encrypt", Some(a), json!({ "ref": "x", "plaintext_b64": B64.encode("x") })).await, 409, "UndecryptableError");
    assert_eq!(e["details"], refused);
    assert_eq!(opened(&app, b, &b_env).await.0, StatusCode::OK, "another tenant is untouched");
    assert_error(revoke(&id, json!({ "reason": "again", "operator_id": "o" })).await, 409, "Conflict");
    let e = assert_error(
        app.op(
            Method::POST,
            format!("/admin/byok/bindings/{id}/rotate"),
            Some(json!({ "previous_tenant_key_id": "tk-2", "new_tenant_key_id": "tk-3", "operator_id": "o" })),
        )
        .await,
        409,
        "UndecryptableError",
    );
    assert_eq!(e["details"], json!(["the binding's grant is revoked: its keys cannot be unwrapped"]));
    for unknown in [uuid::Uuid::now_v7().to_string(), "nope".to_string()] {
        let e = assert_error(revoke(&unknown, json!({ "reason": "r", "operator_id": "o" })).await, 404, "NotFound");
        assert_eq!(e["details"], json!(["binding not found"]));
        let e = assert_error(
            app.op(
                Method::POST,
                format!("/admin/byok/bindings/{unknown}/rotate"),
                Some(json!({ "previous_tenant_key_id": "a", "new_tenant_key_id": "b", "operator_id": "o" })),
            )
            .await,
            404,
            "NotFound",
        );
        assert_eq!(e["details"], json!(["binding not found"]));
        // 404 before the body is looked at.
        let e = assert_error(revoke(&unknown, json!({})).await, 404, "NotFound");
        assert_eq!(e["details"], json!(["binding not found"]));
        let e = assert_error(app.op(Method::POST, format!("/admin/byok/bindings/{unknown}/rotate"), Some(json!({}))).await, 404, "NotFound");
        assert_eq!(e["details"], json!(["binding not found"]));
    }
    let (_, got) = app.op(Method::GET, format!("/admin/byok/bindings/tenant/{tenant}"), None).await;
    assert_eq!((got["data"]["grant_status"].as_str(), got["data"]["tenant_key_id"].as_str()), (Some("revoked"), Some("tk-2")));

    let events = app.events_of(&t.a["tenant_id"]).await;
    let byok: Vec<&String> = events.iter().filter(|e| e.starts_with("security.byok")).collect();
    assert_eq!(byok, ["security.byok.bound.v1", "security.byok.rotated.v1", "security.byok.revoked.v1"]);
}
db_test!(a_bound_tenants_keys_rotate_and_stop_opening_once_revoked);

async fn a_tenant_bound_before_its_first_vault_use_gets_its_key_under_the_binding(app: TestApp) {
    let t = app.two_tenants("op-byok-new").await;
    let tenant = t.a["tenant_id"].as_str().unwrap();
    let bind = |body: Value| app.op(Method::POST, "/admin/byok/bindings", Some(body));
    let (s, bound) = bind(json!({ "tenant_id": tenant, "provider": "hsm-pkcs11", "customer_kms_key_arn": "pkcs11:token=t;object=k", "tenant_key_id": "fresh-1", "operator_id": "o" })).await;
    assert_eq!(
        (s, bound["data"]["sla_revoke_propagation_seconds"].as_i64(), bound["data"]["siem_forwarder_endpoint"].clone()),
        (StatusCode::OK, Some(60), Value::Null)
    );
    let env = seal(&app, &t.a_token, "new").await;
    assert_eq!(wrapper(&app, tenant).await.as_deref(), Some("fresh-1"));
    assert_eq!(opened(&app, &t.a_token, &env).await.0, StatusCode::OK);

    let e = assert_error(
        bind(json!({ "tenant_id": "x", "provider": "cloud-kms", "sla_revoke_propagation_seconds": 0, "siem_forwarder_endpoint": "http://plain" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        e["details"],
        json!([
            "tenant_id must be a UUID",
            "provider must be one of: aws-kms, gcp-kms, hsm-pkcs11",
            "customer_kms_key_arn is required",
            "tenant_key_id is required",
            "operator_id is required",
            "sla_revoke_propagation_seconds must be an integer from 1 to 86400"
        ])
    );
    // The endpoint's scheme once the body matches its schema.
    let e = assert_error(
        bind(
            json!({ "tenant_id": uuid::Uuid::now_v7().to_string(), "provider": "gcp-kms", "customer_kms_key_arn": "k", "tenant_key_id": "t", "operator_id": "o",
            "siem_forwarder_endpoint": "http://plain" }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(e["details"], json!(["siem_forwarder_endpoint must be an https:// URL"]));
    let unknown = uuid::Uuid::now_v7().to_string();
    let e = assert_error(
        bind(json!({ "tenant_id": unknown, "provider": "gcp-kms", "customer_kms_key_arn": "k", "tenant_key_id": "t", "operator_id": "o" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(e["details"], json!(["tenant_id must name an existing tenant"]));
}
db_test!(a_tenant_bound_before_its_first_vault_use_gets_its_key_under_the_binding);
