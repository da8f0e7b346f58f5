//! The operator's webhook view: every tenant's endpoints or one tenant's,
//! newest first, at most 200, the documented fields only.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::{db_test, helpers::*};

const OPS: &str = "test-ops-token";

async fn the_operator_lists_endpoints_across_tenants_newest_first_capped_at_200(app: TestApp) {
    let t = app.two_tenants("opwh").await;
    let hook = |token: &str, n: usize| {
        let token = token.to_string();
        let app = &app;
        async move {
            let (s, e) =
                app.post("/api/webhooks/endpoints", Some(&token), json!({ "url": format!("http://127.0.0.1:9/h{n}"), "event_types": ["crm.*"] })).await;
            assert_eq!(s, StatusCode::CREATED, "{e}");
            e["data"]["endpoint_id"].as_str().unwrap().to_string()
        }
    };
    let a1 = hook(&t.a_token, 1).await;
    let b1 = hook(&t.b_token, 2).await;
    let a2 = hook(&t.a_token, 3).await;

    let (s, all) = app.operator(OPS, Method::GET, "/admin/webhooks", None).await;
    assert_eq!(s, StatusCode::OK, "{all}");
    let ids: Vec<&str> = all["data"].as_array().unwrap().iter().map(|e| e["endpoint_id"].as_str().unwrap()).collect();
    assert_eq!(ids, [a2.as_str(), b1.as_str(), a1.as_str()]);
    let mut keys: Vec<&str> = all["data"][0].as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["created_at", "endpoint_id", "failure_streak", "last_failure_at", "last_success_at", "status", "tenant_id", "url"]);
    assert_eq!((all["data"][0]["status"].as_str(), all["data"][0]["failure_streak"].as_i64()), (Some("active"), Some(0)));

    let (s, only_a) = app.operator(OPS, Method::GET, &format!("/admin/webhooks?tenant_id={}", t.a["tenant_id"].as_str().unwrap()), None).await;
    assert_eq!(s, StatusCode::OK);
    let ids: Vec<&str> = only_a["data"].as_array().unwrap().iter().map(|e| e["endpoint_id"].as_str().unwrap()).collect();
    assert_eq!(ids, [a2.as_str(), a1.as_str()]);
    let (s, none) = app.operator(OPS, Method::GET, "/admin/webhooks?tenant_id=0190a000-0000-7000-8000-000000000000", None).await;
    assert_eq!((s, none["data"].clone()), (StatusCode::OK, json!([])), "an unknown tenant is an empty list");
    let b = assert_error(app.operator(OPS, Method::GET, "/admin/webhooks?tenant_id=nope", None).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["tenant_id must be a UUID"]));

    // The cap: 205 more endpoints of tenant B, 200 listed.
    let tenant_b = t.b["tenant_id"].as_str().unwrap();
    for n in 0..205 {
        sqlx::query(
            "INSERT INTO webhook_endpoint (endpoint_id, tenant_id, url, event_types, status, secret_sealed, failure_streak, created_by, created_at, updated_at) \
             VALUES ($1, $2, $3, '[\"*\"]', 'active', $4, 0, 'test', $5, $5)",
        )
        .bind(uuid::Uuid::now_v7().to_string())
        .bind(tenant_b)
        .bind(format!("http://127.0.0.1:9/bulk{n}"))
        .bind(vec![0u8; 16])
        .bind(hub_kernel::db::now())
        .execute(app.state().db.writer())
        .await
        .unwrap();
    }
    let (_, all) = app.operator(OPS, Method::GET, "/admin/webhooks", None).await;
    assert_eq!(all["data"].as_array().unwrap().len(), 200);
    assert_eq!(all["data"][0]["url"], "http://127.0.0.1:9/bulk204", "newest first");
    let (_, only_b) = app.operator(OPS, Method::GET, &format!("/admin/webhooks?tenant_id={tenant_b}"), None).await;
    assert_eq!(only_b["data"].as_array().unwrap().len(), 200);
}
db_test!(the_operator_lists_endpoints_across_tenants_newest_first_capped_at_200);
