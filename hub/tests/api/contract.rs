//! Contract fixes of the gateway: a body's `tenant_id` is checked against
//! the credential on every route (gateway rule 6), a non-UUID one is 400
//! (RULINGS 1), and ids the compatibility notes promise to check are.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::{db_test, helpers::*};

const ID: &str = "0190a000-0000-7000-8000-000000000000";

/// Routes whose request types carry no `tenant_id` field: a foreign one
/// used to be dropped silently.
fn body_routes() -> Vec<(Method, String)> {
    let r = |m: Method, p: &str| (m, p.replace("{id}", ID));
    vec![
        r(Method::POST, "/api/devices"),
        r(Method::POST, "/api/hdk/idp/claims"),
        r(Method::POST, "/api/hdk/permissions/snapshots"),
        r(Method::POST, "/api/hdk/measure/measurements"),
        r(Method::POST, "/api/hdk/watermark/applications"),
        r(Method::POST, "/api/hdk/sync/resolve"),
        r(Method::POST, "/api/hdk/diagnostic/outbox"),
        r(Method::POST, "/api/personas"),
        r(Method::POST, "/api/role-templates"),
        r(Method::POST, "/api/role-assignments"),
        r(Method::POST, "/api/assets/{id}/credentials"),
        r(Method::PUT, "/api/assets/{id}/twin"),
        r(Method::POST, "/api/commands/{id}/decision"),
        r(Method::POST, "/api/assets"),
        r(Method::POST, "/api/commands"),
    ]
}

async fn a_foreign_tenant_id_in_any_body_is_refused(app: TestApp) {
    let a = app.signup("ct-a@example.com", "ct-a").await;
    let b = app.signup("ct-b@example.com", "ct-b").await;
    let token = a["token"].as_str().unwrap();
    for (method, path) in body_routes() {
        let res = app.call(method.clone(), &path, Some(token), Some(json!({ "tenant_id": b["tenant_id"] }))).await;
        let body = assert_error(res, 403, "TenantMismatch");
        assert_eq!(body["details"], json!(["tenant_id does not match the credential's tenant"]), "{method} {path}");
        let res = app.call(method.clone(), &path, Some(token), Some(json!({ "tenant_id": "acme" }))).await;
        let body = assert_error(res, 400, "ValidationError");
        assert_eq!(body["details"], json!(["tenant_id must be a UUID"]), "{method} {path}");
        let res = app.call(method.clone(), &path, Some(token), Some(json!({ "tenant_id": 7 }))).await;
        assert_error(res, 400, "ValidationError");
    }
    // A key spelt with escapes is the same key: the body's tenant is found
    // by parsing, not by looking for its plain spelling.
    let b_tenant = b["tenant_id"].as_str().unwrap();
    for body in [format!(r#"{{"tenant\u005fid": "{b_tenant}", "kind": "agent"}}"#), format!(r#"{{"kind": "agent", "\u0074enant_id": "{b_tenant}"}}"#)] {
        let res = app
            .client
            .post(format!("{}/api/personas", app.base))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::FORBIDDEN);
        assert_eq!(res.json::<serde_json::Value>().await.unwrap()["error"], "TenantMismatch");
    }
    // The caller's own tenant_id passes on to the route's own validation.
    let (s, p) = app.post("/api/personas", Some(token), json!({ "tenant_id": a["tenant_id"], "kind": "agent" })).await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    // A parent tenant still admits members into its child tenant.
    let (s, child) = app.post("/api/tenants", Some(token), json!({ "app_id": "ct-child", "display_name": "Child" })).await;
    assert_eq!(s, StatusCode::CREATED, "{child}");
    let (_, reg) = app.post("/api/auth/register", None, json!({ "email": "ct-m@example.com", "password": "member password", "display_name": "M" })).await;
    let (s, m) = app.post("/api/memberships", Some(token), json!({ "person_id": reg["data"]["person_id"], "tenant_id": child["data"]["tenant_id"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{m}");
    let res = app.post("/api/memberships", Some(token), json!({ "person_id": reg["data"]["person_id"], "tenant_id": b["tenant_id"] })).await;
    assert_error(res, 403, "TenantMismatch");
    let res = app.post("/api/memberships", Some(token), json!({ "person_id": reg["data"]["person_id"], "tenant_id": "acme" })).await;
    assert_error(res, 400, "ValidationError");
}
db_test!(a_foreign_tenant_id_in_any_body_is_refused);

async fn an_asset_device_uuid_must_be_a_uuid(app: TestApp) {
    let a = app.signup("ct-dev@example.com", "ct-dev").await;
    let token = a["token"].as_str().unwrap();
    let body = assert_error(app.post("/api/assets", Some(token), json!({ "display_name": "R", "device_uuid": "phone-1" })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["device_uuid must be a UUID"]));
    let (s, asset) = app.post("/api/assets", Some(token), json!({ "display_name": "R", "device_uuid": "0190A000-0000-7000-8000-0000000000AB" })).await;
    assert_eq!(s, StatusCode::CREATED, "{asset}");
    assert_eq!(asset["data"]["device_uuid"], "0190a000-0000-7000-8000-0000000000ab", "stored in canonical form");
}
db_test!(an_asset_device_uuid_must_be_a_uuid);

async fn a_test_applications_keys_never_reach_live_data(app: TestApp) {
    let t = app.signup("sandbox@example.com", "sandbox").await;
    let owner = t["token"].as_str().unwrap();
    let (s, test_app) = app.post("/api/applications", Some(owner), json!({ "name": "ci", "slug": "ci", "environment": "test" })).await;
    assert_eq!(s, StatusCode::CREATED, "{test_app}");
    let app_id = test_app["data"]["application_id"].as_str().unwrap();
    let (s, key) = app.post(&format!("/api/applications/{app_id}/keys"), Some(owner), json!({ "name": "ci", "scopes": ["*"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{key}");
    let key = key["data"].clone();
    let secret = key["api_key"].as_str().unwrap();
    assert!(secret.starts_with("pk_test_"));
    let sandbox = key["tenant_id"].as_str().unwrap().to_string();
    assert_ne!(sandbox, t["tenant_id"].as_str().unwrap(), "test keys act in the tenant's sandbox");
    let (_, me) = app.get("/api/me", Some(secret)).await;
    assert_eq!(me["data"]["tenant_id"], json!(sandbox), "{me}");

    // Live data is out of the test key's reach, and the other way round.
    let (s, live) = app.post("/api/assets", Some(owner), json!({ "display_name": "Live robot" })).await;
    assert_eq!(s, StatusCode::CREATED, "{live}");
    let live_id = live["data"]["asset_id"].as_str().unwrap();
    assert_error(app.get(&format!("/api/assets/{live_id}"), Some(secret)).await, 404, "NotFound");
    let body = assert_error(app.post("/api/assets", Some(secret), json!({ "display_name": "R", "tenant_id": t["tenant_id"] })).await, 403, "TenantMismatch");
    assert!(body["details"].is_array());
    let (s, test_asset) = app.post("/api/assets", Some(secret), json!({ "display_name": "Test robot" })).await;
    assert_eq!(s, StatusCode::CREATED, "{test_asset}");
    assert_error(app.get(&format!("/api/assets/{}", test_asset["data"]["asset_id"].as_str().unwrap()), Some(owner)).await, 404, "NotFound");
    // An exchanged token of the test key is in the sandbox too.
    let (s, tok) = app.post("/api/auth/token", None, json!({ "grant_type": "client_credentials", "client_secret": secret })).await;
    assert_eq!(s, StatusCode::OK, "{tok}");
    assert_eq!(tok["tenant_id"], json!(sandbox));
    assert_error(app.get(&format!("/api/assets/{live_id}"), tok["access_token"].as_str()).await, 404, "NotFound");

    // The owner still manages the key: a role for its persona, rotation, revocation.
    let (_, roles) = app.get(&format!("/api/personas/{}/roles", t["persona_id"].as_str().unwrap()), Some(owner)).await;
    let owner_template = roles["data"]["roles"][0]["role_template_id"].clone();
    let (s, grant) =
        app.post("/api/role-assignments", Some(owner), json!({ "persona_id": key["synthetic_persona_id"], "role_template_id": owner_template })).await;
    assert_eq!(s, StatusCode::CREATED, "{grant}");
    let (s, persona) = app.post("/api/personas", Some(secret), json!({ "kind": "agent" })).await;
    assert_eq!(s, StatusCode::CREATED, "{persona}");
    assert_eq!(persona["data"]["tenant_id"], json!(sandbox));
    let (s, _) = app.post(&format!("/api/role-assignments/{}/revoke", grant["data"]["assignment_id"].as_str().unwrap()), Some(owner), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    let (s, rotated) = app.post(&format!("/api/api-keys/{}/rotate", key["key_id"].as_str().unwrap()), Some(owner), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{rotated}");
    let (s, _) = app.post(&format!("/api/api-keys/{}/revoke", key["key_id"].as_str().unwrap()), Some(owner), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    // A live application's key stays in the live tenant.
    let (_, second) = app.key(owner, "ci2", json!(["*"])).await;
    assert_eq!(second["tenant_id"], t["tenant_id"], "a live key stays in the live tenant");
}
db_test!(a_test_applications_keys_never_reach_live_data);

async fn query_strings_are_refused_with_the_envelope_and_lists_count_their_rows(app: TestApp) {
    let t = app.signup("ct-q@example.com", "ct-q").await;
    let token = t["token"].as_str().unwrap();
    let body = assert_error(app.get("/api/agent-runtime/agents?limit=1&limit=2", Some(token)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["query parameter limit is given more than once"]));
    let body = assert_error(app.get("/api/agent-runtime/runs?limit=ten&offset=-2", Some(token)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["limit must be an integer", "offset must be 0 or more"]));
    let body = assert_error(app.get("/api/auth/verification-status?email=a@example.com&email=b@example.com", None).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["query parameter email is given more than once"]));
    // A command list is a page with the total count.
    let (s, a) = app.post("/api/assets", Some(token), json!({ "display_name": "R" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let asset = a["data"]["asset_id"].as_str().unwrap();
    for _ in 0..3 {
        let (s, _) = app.post("/api/commands", Some(token), json!({ "type": "beep", "risk_class": "low", "target_asset_id": asset })).await;
        assert_eq!(s, StatusCode::CREATED);
    }
    let (s, page) = app.get(&format!("/api/assets/{asset}/commands?limit=2&offset=0"), Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{page}");
    assert_eq!((page["data"].as_array().unwrap().len(), page["total"].clone()), (2, json!(3)));
    // So is a device's list of measurements.
    for i in 0..3 {
        let (s, m) = app.post("/api/hdk/measure/measurements", Some(token), json!({ "capture_id": "cap-1", "kind": "k", "value": i, "unit": "u" })).await;
        assert_eq!(s, StatusCode::CREATED, "{m}");
    }
    let (s, page) = app.get("/api/hdk/measure/measurements?capture_id=cap-1&limit=2&offset=2", Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{page}");
    assert_eq!((page["data"].as_array().unwrap().len(), page["total"].clone()), (1, json!(3)));
    assert_eq!(page["data"][0]["value"], json!(2.0));
}
db_test!(query_strings_are_refused_with_the_envelope_and_lists_count_their_rows);

async fn method_and_size_refusals_use_the_envelope(app: TestApp) {
    let t = app.signup("ct-size@example.com", "ct-size").await;
    let token = t["token"].as_str().unwrap();
    // A path that exists with a method it does not take: 405, the Allow header kept.
    let res = app.client.delete(format!("{}/api/personas", app.base)).bearer_auth(token).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 405);
    assert!(res.headers().get("allow").is_some_and(|a| a.to_str().unwrap().contains("POST")), "{:?}", res.headers());
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!((body["success"].clone(), body["error"].clone()), (json!(false), json!("MethodNotAllowed")));
    // Over the body limit: 413 through the JSON extractor and through the raw drain route alike.
    let big = format!("{{\"kind\":\"agent\",\"pad\":\"{}\"}}", "x".repeat(hub_kernel::error::BODY_LIMIT + 10));
    for path in ["/api/personas", "/api/hdk/diagnostic/drain"] {
        let res = app
            .client
            .post(format!("{}{path}", app.base))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(big.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 413, "{path}");
        let body: serde_json::Value = res.json().await.unwrap();
        assert_eq!(body["error"], "PayloadTooLarge", "{path}: {body}");
        assert_eq!(body["details"], json!([format!("request bodies are limited to {} bytes", hub_kernel::error::BODY_LIMIT)]));
    }
}
db_test!(method_and_size_refusals_use_the_envelope);

/// A POST without a body (and so without a content type) is the empty
/// object: a route whose every field is optional takes it, a route with
/// required fields names each one, and the document says which bodies may
/// be left out.
async fn a_bodiless_post_is_the_empty_object(app: TestApp) {
    let t = app.signup("bodiless@example.com", "bodiless").await;
    let token = t["token"].as_str().unwrap();
    let (s, b) = app.call(Method::POST, "/api/assignments/sweep", Some(token), None).await;
    assert_eq!((s, &b["data"]["swept"]), (StatusCode::OK, &json!(0)), "{b}");
    let (s, b) = app.call(Method::POST, "/api/media/blobs", Some(token), None).await;
    assert_eq!((s, b["data"]["status"].as_str()), (StatusCode::CREATED, Some("pending")), "{b}");
    let (s, f) = app.post("/api/feature-flags", Some(token), json!({ "flag_key": "bodiless" })).await;
    assert_eq!(s, StatusCode::CREATED, "{f}");
    let (s, b) = app.call(Method::POST, "/api/feature-flags/bodiless/evaluate", Some(token), None).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (s, e) = app.post("/api/webhooks/endpoints", Some(token), json!({ "url": "http://127.0.0.1:9/hook", "event_types": ["*"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{e}");
    let rotate = format!("/api/webhooks/endpoints/{}/rotate-secret", e["data"]["endpoint_id"].as_str().unwrap());
    let (s, b) = app.call(Method::POST, &rotate, Some(token), None).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    // Required fields are named, not the content type.
    let b = assert_error(app.call(Method::POST, "/api/crm/contacts", Some(token), None).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["name is required"]));
    // Whitespace is no body either; text that is not JSON still is refused.
    let res = app
        .client
        .post(format!("{}/api/assignments/sweep", app.base))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body("  ")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let res = app
        .client
        .post(format!("{}/api/assignments/sweep", app.base))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);

    let (_, doc) = app.get("/openapi.json", None).await;
    assert_eq!(doc["paths"]["/api/assignments/sweep"]["post"]["requestBody"]["required"], json!(false));
    assert_eq!(doc["paths"]["/api/media/blobs"]["post"]["requestBody"]["required"], json!(false));
    assert_eq!(doc["paths"]["/api/crm/contacts"]["post"]["requestBody"]["required"], json!(true));
}
db_test!(a_bodiless_post_is_the_empty_object);

/// The statuses the public routes and the "active"/content lookups answer
/// are in the document, so a generated client expects them.
async fn the_document_lists_the_refusals_of_public_routes_and_lookups(app: TestApp) {
    let (_, doc) = app.get("/openapi.json", None).await;
    let listed = |path: &str, method: &str, status: &str| !doc["paths"][path][method]["responses"][status].is_null();
    for (path, method, statuses) in [
        ("/api/auth/login", "post", &["401", "403", "429", "503"][..]),
        ("/api/auth/signup-tenant", "post", &["409"]),
        ("/api/auth/register", "post", &["409"]),
        ("/api/auth/send-verification-email", "post", &["429", "503"]),
        ("/api/conversations/quiet-hours", "get", &["404"]),
        ("/api/lead-scoring/models/active", "get", &["404"]),
        ("/api/taxonomy/extraction-schemas/active", "get", &["404"]),
        ("/api/media/blobs/{blob_id}/content", "get", &["409"]),
    ] {
        for status in statuses {
            assert!(listed(path, method, status), "{method} {path} lists {status}");
        }
    }
    // The routes that need the object store list its 503, with Retry-After.
    for (path, method) in [
        ("/api/media/blobs/{blob_id}/content", "put"),
        ("/api/media/blobs/{blob_id}/content", "get"),
        ("/api/media/blobs/{blob_id}/commit", "post"),
        ("/api/traces/{trace_id}/exports", "post"),
        ("/api/traces/exports/{export_id}", "get"),
        ("/api/analytics/builds/{build_id}/export", "post"),
    ] {
        let unavailable = &doc["paths"][path][method]["responses"]["503"];
        assert_eq!(unavailable["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/ErrorBody", "{method} {path}: {unavailable}");
        assert!(unavailable["headers"]["Retry-After"]["schema"].is_object(), "{method} {path}: {unavailable}");
    }
    // A refusal the document lists is the one the route answers.
    let b =
        assert_error(app.post("/api/auth/login", None, json!({ "email": "nobody@example.com", "password": "not the password" })).await, 401, "Unauthorized");
    assert_eq!(b["details"], json!(["invalid email or password"]));
}
db_test!(the_document_lists_the_refusals_of_public_routes_and_lookups);

/// Fields the server takes as optional are optional in the document too,
/// so a generated client does not force a caller to invent them.
async fn optional_fields_are_not_required_by_the_document(app: TestApp) {
    let (_, doc) = app.get("/openapi.json", None).await;
    for (schema, field) in [
        ("NewCrmContact", "attributes"),
        ("NewCrmLead", "attributes"),
        ("NewSyncItem", "payload"),
        ("NewAssignmentRecord", "metadata"),
        ("AssignmentRouteRequest", "candidate_persona_ids"),
        ("AssignmentRouteRequest", "persona_specialties"),
        ("AssignByTaskRequest", "required_skills"),
        ("AssignmentSimulationRequest", "candidate_persona_ids"),
        ("AssignmentSimulationRequest", "persona_specialties"),
        ("NewConsentRecord", "evidence"),
        ("NewEvidenceCapture", "metadata"),
    ] {
        let s = &doc["components"]["schemas"][schema];
        assert!(s["properties"].get(field).is_some(), "{schema}.{field} is in the document");
        let required = s["required"].as_array().cloned().unwrap_or_default();
        assert!(!required.contains(&json!(field)), "{schema}.{field} is optional: {required:?}");
    }
    // What the server does need stays required.
    let task = doc["components"]["schemas"]["AssignByTaskRequest"]["required"].as_array().cloned().unwrap_or_default();
    assert!(task.contains(&json!("candidate_persona_ids")), "{task:?}");
    // And a contact without attributes is stored.
    let t = app.signup("optional@example.com", "optional").await;
    let (s, c) = app.post("/api/crm/contacts", t["token"].as_str(), json!({ "name": "No Attributes" })).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
}
db_test!(optional_fields_are_not_required_by_the_document);
