//! URLs the hub calls out to, as tenants and the operator save them:
//! user information (`user:password@`) is refused wherever a URL is
//! stored (the credential has its own field, or the receiver checks a
//! signature), naming the field; outside development mode, a literal
//! address that is not global, or an IPv6 form carrying one, is refused.

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

/// The refusal of an address the policy does not admit, as `field` names it.
fn inward(field: &str, url: &str) -> Value {
    let host = url::Url::parse(url).unwrap().host_str().unwrap().to_string();
    json!([format!("{field} must not point at a private, loopback or link-local address ({host}); see HUB_WEBHOOK_ALLOWED_HOSTS")])
}

async fn ipv6_literals_carrying_an_inward_address_are_refused_outside_development(dev: TestApp) {
    let app = dev
        .variant(|c| {
            c.dev = false;
            // Outside development mode QUIC would need a certificate.
            c.quic_listen = "off".into();
        })
        .await;
    let t = app.signup("a@ssrf6.example.com", "ssrf6-a").await;
    let a = t["token"].as_str().unwrap();
    let refused = [
        // NAT64 of the metadata service, IPv4-compatible loopback, 6to4 of loopback and of 192.168.1.1.
        "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",
        "http://[::127.0.0.1]:9000/x",
        "http://[2002:7f00:1::1]/x",
        "http://[2002:c0a8:101::1]/x",
        // Teredo (public server and client here), the local-use NAT64 prefix, site-local, discard-only, ORCHIDv2.
        "http://[2001:0:808:808::fefe:fefe]/x",
        "http://[64:ff9b:1::808:808]/x",
        "http://[fec0::1]/x",
        "http://[100::1]/x",
        "http://[2001:20::1]/x",
    ];
    for url in refused {
        let b = assert_error(app.post("/api/webhooks/endpoints", Some(a), json!({ "url": url, "event_types": ["*"] })).await, 400, "ValidationError");
        assert_eq!(b["details"], inward("url", url), "{url}");
        let b = assert_error(app.post("/api/scheduling/connections", Some(a), json!({ "name": "Desk", "collection_url": url })).await, 400, "ValidationError");
        assert_eq!(b["details"], inward("collection_url", url), "{url}");
        let b = assert_error(
            app.post("/api/ai/routes", Some(a), json!({ "name": "default", "provider_base_url": url, "model": "m" })).await,
            400,
            "ValidationError",
        );
        assert_eq!(b["details"], inward("provider_base_url", url), "{url}");
    }
    let (_, listed) = app.get("/api/webhooks/endpoints", Some(a)).await;
    assert_eq!(listed["total"], 0, "nothing refused was stored: {listed}");

    // What such a form carries decides: NAT64 and 6to4 of a public address are accepted.
    for url in ["http://[64:ff9b::808:808]/x", "http://[2002:808:808::1]/x"] {
        let (s, ep) = app.post("/api/webhooks/endpoints", Some(a), json!({ "url": url, "event_types": ["*"] })).await;
        assert_eq!((s, ep["data"]["url"].as_str()), (StatusCode::CREATED, Some(url)), "{ep}");
    }
    // Development mode reaches anything.
    let d = dev.signup("a@ssrf6dev.example.com", "ssrf6dev-a").await;
    let (s, ep) = dev.post("/api/webhooks/endpoints", d["token"].as_str(), json!({ "url": refused[0], "event_types": ["*"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{ep}");
}
db_test!(ipv6_literals_carrying_an_inward_address_are_refused_outside_development);

/// A server on loopback that counts every request it gets.
async fn counting_server() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = hits.clone();
    let router = axum::Router::new().fallback(move || async move {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        axum::http::StatusCode::NO_CONTENT
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (base, hits)
}

async fn a_stored_address_the_policy_refuses_is_not_called(dev: TestApp) {
    let app = dev
        .variant(|c| {
            c.dev = false;
            c.quic_listen = "off".into();
        })
        .await;
    let (inside, hits) = counting_server().await;
    let t = app.signup("a@stored.example.com", "stored-a").await;
    let (a, tenant) = (t["token"].as_str().unwrap(), t["tenant_id"].clone());
    // Rows saved when their address was admitted (another policy, or
    // before a form was recognised), then pointed inward in the database.
    let (s, r) = app.post("/api/ai/routes", Some(a), json!({ "name": "default", "provider_base_url": "http://[64:ff9b::808:808]/v1", "model": "m" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let (s, c) = app.post("/api/scheduling/connections", Some(a), json!({ "name": "Desk", "collection_url": "http://[64:ff9b::808:808]/dav/" })).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let db = app.state().db.writer();
    sqlx::query("UPDATE ai_gateway_route SET provider_base_url = $1").bind(format!("{inside}/v1")).execute(db).await.unwrap();
    sqlx::query("UPDATE scheduling_connection SET collection_url = $1").bind(format!("{inside}/dav/")).execute(db).await.unwrap();

    let b = assert_error(app.post("/api/ai/completions", Some(a), json!({ "route": "default", "prompt": "hello" })).await, 502, "BadGateway");
    assert_eq!(b["details"], inward("provider_base_url", &inside));
    let (s, ap) = app
        .post("/api/scheduling/appointments", Some(a), json!({ "title": "Visit", "starts_at": "2030-01-01T10:00:00Z", "ends_at": "2030-01-01T11:00:00Z" }))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{ap}");
    let push = format!("/api/scheduling/appointments/{}/push", ap["data"]["appointment_id"].as_str().unwrap());
    let b =
        assert_error(app.post(&push, Some(a), json!({ "tenant_id": tenant, "connection_id": c["data"]["connection_id"] })).await, 503, "ServiceUnavailable");
    assert_eq!(b["details"], json!(["the calendar server did not accept the change; retry the push later"]));
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0, "nothing reached the loopback server");
}
db_test!(a_stored_address_the_policy_refuses_is_not_called);
