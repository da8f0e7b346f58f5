//! URLs the hub calls out to, as tenants and the operator save them:
//! user information (`user:password@`) is refused wherever a URL is
//! stored (the credential has its own field, or the receiver checks a
//! signature), naming the field.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

fn userinfo(field: &str) -> Value {
    json!([format!("{field} must not carry user information (user@ or user:password@ before the host)")])
}

async fn a_url_with_user_information_is_refused_naming_its_field(app: TestApp) {
    let t = app.signup("a@outbound.example.com", "outbound-a").await;
    let (a, tenant) = (t["token"].as_str().unwrap(), t["tenant_id"].clone());

    // Webhook endpoints, on create and on update.
    for url in ["https://user:PW@hooks.example.com/x", "https://user@hooks.example.com/x", "https://:PW@hooks.example.com/x"] {
        let b = assert_error(app.post("/api/webhooks/endpoints", Some(a), json!({ "url": url, "event_types": ["*"] })).await, 400, "ValidationError");
        assert_eq!(b["details"], userinfo("url"), "{url}");
    }
    let (s, ep) = app.post("/api/webhooks/endpoints", Some(a), json!({ "url": "https://hooks.example.com/x", "event_types": ["*"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{ep}");
    let endpoint = format!("/api/webhooks/endpoints/{}", ep["data"]["endpoint_id"].as_str().unwrap());
    let b =
        assert_error(app.call(Method::PATCH, &endpoint, Some(a), Some(json!({ "url": "https://user:PW@hooks.example.com/y" }))).await, 400, "ValidationError");
    assert_eq!(b["details"], userinfo("url"));
    let (s, kept) = app.get(&endpoint, Some(a)).await;
    assert_eq!((s, kept["data"]["url"].as_str()), (StatusCode::OK, Some("https://hooks.example.com/x")));
    // An `@` in the path is no user information.
    let (s, at) = app.call(Method::PATCH, &endpoint, Some(a), Some(json!({ "url": "https://hooks.example.com/to/a@b" }))).await;
    assert_eq!((s, at["data"]["url"].as_str()), (StatusCode::OK, Some("https://hooks.example.com/to/a@b")), "{at}");

    // CalDAV connections: the credential is username/password or token.
    let b = assert_error(
        app.post(
            "/api/scheduling/connections",
            Some(a),
            json!({ "name": "Desk", "collection_url": "https://cal-user:s3cret@cal.example.com/dav/cal/", "username": "cal-user", "password": "s3cret" }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], userinfo("collection_url"));
    let b = assert_error(
        app.post("/api/scheduling/connections", Some(a), json!({ "name": "Desk", "collection_url": "https://cal-user@cal.example.com/dav/cal/" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], userinfo("collection_url"));
    let (_, listed) = app.get("/api/scheduling/connections", Some(a)).await;
    assert_eq!(listed["total"], 0, "nothing refused was stored: {listed}");

    // AI routes: the provider's key is api_key.
    let b = assert_error(
        app.post("/api/ai/routes", Some(a), json!({ "name": "default", "provider_base_url": "https://sk-live:x@api.example.com/v1", "model": "m" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], userinfo("provider_base_url"));

    // The operator's SIEM forwarder of a key binding.
    let bind = json!({ "tenant_id": tenant, "provider": "aws-kms", "customer_kms_key_arn": "arn:aws:kms:eu-west-1:111122223333:key/k1",
        "tenant_key_id": "tk-outbound", "operator_id": "op-ada", "siem_forwarder_endpoint": "https://siem:PW@siem.example/in" });
    let b = assert_error(app.op(Method::POST, "/admin/byok/bindings", Some(bind)).await, 400, "ValidationError");
    assert_eq!(b["details"], userinfo("siem_forwarder_endpoint"));
    let (s, none) = app.op(Method::GET, format!("/admin/byok/bindings/tenant/{}", tenant.as_str().unwrap()), None).await;
    assert_eq!((s, none["details"].clone()), (StatusCode::NOT_FOUND, json!(["no binding for tenant"])));
}
db_test!(a_url_with_user_information_is_refused_naming_its_field);
