//! sdk-policy: Cedar bundles (validated, versioned, immutable), their
//! evaluation, and the gate's ABAC step over the tenant's active bundle.

use reqwest::StatusCode;
use serde_json::json;

use crate::{db_test, helpers::*};

const READS_AND_NO_SHREDDING: &str = r#"
@id("reads")
permit (principal, action, resource) when { context.method == "GET" };

@id("personas")
permit (principal, action == Action::"persona.persona.write", resource == Route::"/api/personas");

@id("no-shredding")
forbid (principal, action, resource == Route::"/api/personas/{persona_id}/shred");
"#;

async fn bundles_are_cedar_checked_on_create_and_evaluated_with_the_deciding_policies(app: TestApp) {
    let t = app.two_tenants("policy").await;
    let a = t.a_token.as_str();
    let b = assert_error(
        app.post(
            "/api/policies/bundles",
            Some(a),
            json!({ "name": "base", "version": 1, "iql_source": "permit (principal, action, resource) when { context.x == };" }),
        )
        .await,
        400,
        "ValidationError",
    );
    let details = b["details"].as_array().unwrap();
    assert!(!details.is_empty() && details.iter().all(|d| d.as_str().unwrap().starts_with("iql_source: ")), "{b}");
    let b = assert_error(app.post("/api/policies/bundles", Some(a), json!({ "version": 0, "obligations": 3 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["name is required", "iql_source is required", "obligations must be a JSON object"]));
    let b = assert_error(app.post("/api/policies/bundles", Some(a), json!({ "activate": "yes" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["name is required", "version is required", "iql_source is required", "activate must be true or false"]));
    // An integer or a string: the server checks which.
    for version in [json!(0), json!(" "), json!(true), json!("x".repeat(65))] {
        let b = assert_error(
            app.post("/api/policies/bundles", Some(a), json!({ "name": "t", "version": version, "iql_source": "permit (principal, action, resource);" })).await,
            400,
            "ValidationError",
        );
        assert_eq!(b["details"], json!(["version must be a positive integer or a string of 1 to 64 characters"]), "{version}");
    }
    let b = assert_error(
        app.post("/api/policies/bundles", Some(a), json!({ "name": "t", "version": "1", "iql_source": "permit (principal == ?principal, action, resource);" }))
            .await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["iql_source: policy templates (with ?principal or ?resource slots) are not supported"]));

    let (s, v1) = app
        .post(
            "/api/policies/bundles",
            Some(a),
            json!({ "name": "base", "version": "2026.11.1", "iql_source": READS_AND_NO_SHREDDING, "obligations": { "log": true } }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{v1}");
    assert_eq!((v1["data"]["status"].as_str(), v1["data"]["policy_ids"].clone()), (Some("inactive"), json!(["reads", "personas", "no-shredding"])));
    let again = json!({ "name": "base", "version": "2026.11.1", "iql_source": "permit (principal, action, resource);" });
    assert_error(app.post("/api/policies/bundles", Some(a), again).await, 409, "Conflict");
    let (_, v2) =
        app.post("/api/policies/bundles", Some(a), json!({ "name": "base", "version": 2, "iql_source": "permit (principal, action, resource);" })).await;
    assert_eq!(v2["data"]["policy_ids"], json!(["policy0"]));
    let (_, list) = app.get("/api/policies/bundles?name=base", Some(a)).await;
    assert_eq!((list["total"].as_i64(), list["data"][0]["version"].as_str()), (Some(2), Some("2")), "newest first");

    // Evaluation names the policies that decided.
    let v1_id = v1["data"]["bundle_id"].as_str().unwrap();
    let ask = |action: &str, resource: &str, method: &str| json!({ "bundle_id": v1_id, "principal": "Persona::\"p1\"", "action": format!("Action::\"{action}\""), "resource": format!("Route::\"{resource}\""), "context": { "method": method } });
    let (s, d) = app.post("/api/policies/evaluate", Some(a), ask("persona.persona.read", "/api/personas/{persona_id}", "GET")).await;
    assert_eq!(s, StatusCode::OK, "{d}");
    assert_eq!((d["data"]["decision"].as_str(), d["data"]["determining_policies"].clone()), (Some("allow"), json!(["reads"])));
    let (_, d) = app.post("/api/policies/evaluate", Some(a), ask("persona.persona.write", "/api/personas/{persona_id}/shred", "POST")).await;
    assert_eq!((d["data"]["decision"].as_str(), d["data"]["determining_policies"].clone()), (Some("deny"), json!(["no-shredding"])));
    let (_, d) = app.post("/api/policies/evaluate", Some(a), ask("crm.contact.write", "/api/crm/contacts", "POST")).await;
    assert_eq!((d["data"]["decision"].as_str(), d["data"]["determining_policies"].clone()), (Some("deny"), json!([])), "nothing permits it");
    // Without bundle_id the active one decides, and there is none yet.
    let b = assert_error(
        app.post("/api/policies/evaluate", Some(a), json!({ "principal": "P::\"1\"", "action": "A::\"x\"", "resource": "R::\"r\"" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["no policy bundle is active: name one with bundle_id"]));
    let b = assert_error(
        app.post("/api/policies/evaluate", Some(a), json!({ "principal": "persona p1", "context": [], "entities": {} })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["action is required", "resource is required", "context must be a JSON object", "entities must be an array"]));
    let b = assert_error(
        app.post(
            "/api/policies/evaluate",
            Some(a),
            json!({ "principal": "persona p1", "action": "Action::\"crm.contact.read\"", "resource": "Route::\"/api/crm/contacts\"", "entities": [1] }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["entities[0] must be a JSON object"]));
    let b = assert_error(
        app.post("/api/policies/evaluate", Some(a), json!({ "principal": "persona p1", "action": "Action::\"crm.contact.read\"", "resource": "nope" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["principal must be a Cedar entity such as Type::\"id\"", "resource must be a Cedar entity such as Type::\"id\""]));
    // Another tenant's bundle is none of its business.
    let mut foreign = ask("persona.persona.read", "/api/personas", "GET");
    foreign["bundle_id"] = json!(v1_id);
    let b = assert_error(app.post("/api/policies/evaluate", Some(&t.b_token), foreign).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["bundle_id is not a policy bundle of this tenant"]));
    assert_error(app.post(&format!("/api/policies/bundles/{v1_id}/activate"), Some(&t.b_token), json!({})).await, 404, "NotFound");

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |e: &str| events.iter().filter(|x| *x == e).count();
    assert_eq!([count("policy.bundle.created.v1"), count("policy.decision.recorded.v1"), count("policy.bundle.activated.v1")], [2, 3, 0]);
}
db_test!(bundles_are_cedar_checked_on_create_and_evaluated_with_the_deciding_policies);

async fn the_gate_applies_the_tenants_active_bundle_after_roles_and_scopes(app: TestApp) {
    let t = app.two_tenants("abac").await;
    let a = t.a_token.as_str();
    let (_, key) = app.key(a, "abac-key", json!(["*"])).await;
    let key = key["api_key"].as_str().unwrap().to_string();
    let persona = t.a["persona_id"].as_str().unwrap();
    let (s, v1) =
        app.post("/api/policies/bundles", Some(a), json!({ "name": "base", "version": 1, "iql_source": READS_AND_NO_SHREDDING, "activate": true })).await;
    assert_eq!((s, v1["data"]["status"].as_str()), (StatusCode::CREATED, Some("active")));

    // Reads pass; a write no policy permits is refused for people and keys alike.
    assert_eq!(app.get(&format!("/api/personas/{persona}"), Some(a)).await.0, StatusCode::OK);
    let (s, _) = app.post("/api/personas", Some(a), json!({ "kind": "service" })).await;
    assert_eq!(s, StatusCode::CREATED, "permitted by \"personas\"");
    let b = assert_error(app.post("/api/workflows/definitions", Some(a), json!({ "name": "w", "step_specs": [{ "name": "s" }] })).await, 403, "Forbidden");
    assert_eq!(b["details"], json!(["no policy of the tenant's bundle base version 1 permits workflow.definition.write on /api/workflows/definitions"]));
    assert!(b.get("required_scopes").is_none_or(|v| v.is_null()), "{b}");
    assert_error(app.post("/api/workflows/definitions", Some(&key), json!({ "name": "w", "step_specs": [{ "name": "s" }] })).await, 403, "Forbidden");
    let b = assert_error(app.post(&format!("/api/personas/{persona}/shred"), Some(a), json!({})).await, 403, "Forbidden");
    assert_eq!(
        b["details"],
        json!(["the tenant's bundle base version 1 forbids persona.persona.write on /api/personas/{persona_id}/shred (policies no-shredding)"])
    );
    // Another tenant is not bound by it.
    let (s, _) = app.post("/api/workflows/definitions", Some(&t.b_token), json!({ "name": "w", "step_specs": [{ "name": "s" }] })).await;
    assert_eq!(s, StatusCode::CREATED);

    // The policy routes stay open, so the tenant can change its bundle; the change holds at once.
    let (s, v2) =
        app.post("/api/policies/bundles", Some(a), json!({ "name": "open", "version": 1, "iql_source": "permit (principal, action, resource);" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, on) = app.post(&format!("/api/policies/bundles/{}/activate", v2["data"]["bundle_id"].as_str().unwrap()), Some(a), json!({})).await;
    assert_eq!((s, on["data"]["status"].as_str()), (StatusCode::OK, Some("active")));
    let (s, _) = app.post("/api/workflows/definitions", Some(a), json!({ "name": "w", "step_specs": [{ "name": "s" }] })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, list) = app.get("/api/policies/bundles", Some(a)).await;
    let statuses: Vec<&str> = list["data"].as_array().unwrap().iter().map(|b| b["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["active", "inactive"], "one active bundle");
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "policy.bundle.activated.v1").count(), 2);
}
db_test!(the_gate_applies_the_tenants_active_bundle_after_roles_and_scopes);

async fn a_bundle_is_read_and_the_active_one_deactivated(app: TestApp) {
    let t = app.two_tenants("abac-off").await;
    let a = t.a_token.as_str();
    let (s, v1) =
        app.post("/api/policies/bundles", Some(a), json!({ "name": "base", "version": 1, "iql_source": READS_AND_NO_SHREDDING, "activate": true })).await;
    assert_eq!(s, StatusCode::CREATED, "{v1}");
    let id = v1["data"]["bundle_id"].as_str().unwrap();
    let (s, one) = app.get(&format!("/api/policies/bundles/{id}"), Some(a)).await;
    assert_eq!((s, &one["data"]), (StatusCode::OK, &v1["data"]));
    let workflow = json!({ "name": "w", "step_specs": [{ "name": "s" }] });
    assert_error(app.post("/api/workflows/definitions", Some(a), workflow.clone()).await, 403, "Forbidden");

    // Deactivated: the gate evaluates no bundle; again: the same answer.
    let (s, off) = app.post(&format!("/api/policies/bundles/{id}/deactivate"), Some(a), json!({})).await;
    assert_eq!((s, off["data"]["status"].as_str()), (StatusCode::OK, Some("inactive")), "{off}");
    assert_eq!((&off["data"]["activated_at"], &off["data"]["iql_source"]), (&v1["data"]["activated_at"], &v1["data"]["iql_source"]));
    let (s, _) = app.post("/api/workflows/definitions", Some(a), workflow).await;
    assert_eq!(s, StatusCode::CREATED, "no bundle applies");
    let (s, again) = app.post(&format!("/api/policies/bundles/{id}/deactivate"), Some(a), json!({})).await;
    assert_eq!((s, &again["data"]), (StatusCode::OK, &off["data"]));
    let (_, read) = app.get(&format!("/api/policies/bundles/{id}"), Some(a)).await;
    assert_eq!(read["data"]["status"], "inactive");
    // It can be activated again.
    let (s, on) = app.post(&format!("/api/policies/bundles/{id}/activate"), Some(a), json!({})).await;
    assert_eq!((s, on["data"]["status"].as_str()), (StatusCode::OK, Some("active")));

    assert_error(app.get(&format!("/api/policies/bundles/{id}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.post(&format!("/api/policies/bundles/{id}/deactivate"), Some(&t.b_token), json!({})).await, 404, "NotFound");
    assert_error(app.get("/api/policies/bundles/not-a-bundle", Some(a)).await, 404, "NotFound");
    let (_, still) = app.get(&format!("/api/policies/bundles/{id}"), Some(a)).await;
    assert_eq!(still["data"]["status"], "active", "another tenant changed nothing");
    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |n: &str| events.iter().filter(|e| *e == n).count();
    assert_eq!((count("policy.bundle.deactivated.v1"), count("policy.bundle.activated.v1")), (1, 2));
}
db_test!(a_bundle_is_read_and_the_active_one_deactivated);
