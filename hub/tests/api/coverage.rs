//! sdk-coverage: a primary, a backup and an acceptance window per kind of
//! work of a tenant; the lookup other groups call.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::{db_test, helpers::*};

async fn each_kind_of_work_has_one_rule_of_the_tenants_personas(app: TestApp) {
    let t = app.two_tenants("coverage").await;
    let a = t.a_token.as_str();
    let me = t.a["persona_id"].as_str().unwrap();
    let (s, p) = app.post("/api/personas", Some(a), json!({ "kind": "service" })).await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    let other = p["data"]["persona_id"].as_str().unwrap();

    let (s, r) = app
        .post(
            "/api/coverage/rules",
            Some(a),
            json!({ "subject_kind": "support.vip", "primary_persona_id": me, "backup_persona_id": other, "acceptance_window_minutes": 0 }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    assert_eq!(
        (&r["data"]["subject_kind"], &r["data"]["primary_persona_id"], &r["data"]["backup_persona_id"], &r["data"]["acceptance_window_minutes"]),
        (&json!("support.vip"), &json!(me), &json!(other), &json!(0)),
        "zero: both are notified at once"
    );
    let (s, d) =
        app.post("/api/coverage/rules", Some(a), json!({ "subject_kind": "field.install", "primary_persona_id": other, "backup_persona_id": me })).await;
    assert_eq!((s, &d["data"]["acceptance_window_minutes"]), (StatusCode::CREATED, &json!(30)), "the default window");
    // Posting a kind again replaces its rule: 200, the same rule_id.
    let (s, again) = app
        .post(
            "/api/coverage/rules",
            Some(a),
            json!({ "subject_kind": "support.vip", "primary_persona_id": other, "backup_persona_id": me, "acceptance_window_minutes": 15 }),
        )
        .await;
    assert_eq!((s, &again["data"]["rule_id"], &again["data"]["primary_persona_id"]), (StatusCode::OK, &r["data"]["rule_id"], &json!(other)));

    let (s, list) = app.get("/api/coverage/rules", Some(a)).await;
    assert_eq!((s, list["total"].as_i64()), (StatusCode::OK, Some(2)));
    let kinds: Vec<&str> = list["data"].as_array().unwrap().iter().map(|r| r["subject_kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["field.install", "support.vip"], "by subject_kind");
    assert_eq!(list["data"][1]["acceptance_window_minutes"], 15);
    let (_, mine) = app.get(&format!("/api/coverage/rules?persona_id={me}&limit=1"), Some(a)).await;
    assert_eq!((mine["total"].as_i64(), mine["data"].as_array().unwrap().len()), (Some(2), 1));
    let b = assert_error(app.get("/api/coverage/rules?persona_id=me&offset=x", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["offset must be an integer"]));
    let b = assert_error(app.get("/api/coverage/rules?persona_id=me", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["persona_id must be a UUID"]));
    let (_, none) = app.get("/api/coverage/rules", Some(&t.b_token)).await;
    assert_eq!(none["total"], 0, "another tenant sees none of them");

    // The lookup another group calls.
    let tenant = t.a["tenant_id"].as_str().unwrap();
    let rule = hub_crm::coverage::rule_for(&app.state().db.read, tenant, "support.vip").await.unwrap().expect("a rule");
    assert_eq!((rule.backup_persona_id.as_str(), rule.acceptance_window_minutes), (me, 15));
    assert!(hub_crm::coverage::rule_for(&app.state().db.read, tenant, "nothing").await.unwrap().is_none());
    let b_tenant = t.b["tenant_id"].as_str().unwrap();
    assert!(hub_crm::coverage::rule_for(&app.state().db.read, b_tenant, "support.vip").await.unwrap().is_none());

    let b = assert_error(
        app.post(
            "/api/coverage/rules",
            Some(a),
            json!({ "subject_kind": "VIP queue", "primary_persona_id": me, "backup_persona_id": me, "acceptance_window_minutes": -1 }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["acceptance_window_minutes must be an integer from 0 to 10080"]));
    let b = assert_error(
        app.post(
            "/api/coverage/rules",
            Some(a),
            json!({ "subject_kind": "VIP queue", "primary_persona_id": me, "backup_persona_id": me, "acceptance_window_minutes": 10080 }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!(["subject_kind must be 1 to 64 of a-z, 0-9, '.', '_', '-'", "backup_persona_id must be another persona than primary_persona_id"])
    );
    let b = assert_error(app.post("/api/coverage/rules", Some(a), json!({ "primary_persona_id": "x" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["subject_kind is required", "primary_persona_id must be a UUID", "backup_persona_id is required"]));
    let b = assert_error(
        app.post(
            "/api/coverage/rules",
            Some(a),
            json!({ "subject_kind": "x", "primary_persona_id": t.b["persona_id"], "backup_persona_id": "0190a000-0000-7000-8000-000000000000" }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["primary_persona_id is not a persona of this tenant", "backup_persona_id is not a persona of this tenant"]));

    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "assignment.coverage_rule.set.v1").count(), 3);
}
db_test!(each_kind_of_work_has_one_rule_of_the_tenants_personas);

async fn a_rule_is_read_by_its_kind_and_removed(app: TestApp) {
    let t = app.two_tenants("coverage-rm").await;
    let a = t.a_token.as_str();
    let me = t.a["persona_id"].as_str().unwrap();
    let (_, p) = app.post("/api/personas", Some(a), json!({ "kind": "service" })).await;
    let other = p["data"]["persona_id"].as_str().unwrap();
    for kind in ["field.install", "support.vip"] {
        let (s, r) = app.post("/api/coverage/rules", Some(a), json!({ "subject_kind": kind, "primary_persona_id": me, "backup_persona_id": other })).await;
        assert_eq!(s, StatusCode::CREATED, "{r}");
    }
    let (s, r) = app.get("/api/coverage/rules/support.vip", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(
        (&r["data"]["subject_kind"], &r["data"]["backup_persona_id"], &r["data"]["acceptance_window_minutes"]),
        (&json!("support.vip"), &json!(other), &json!(30))
    );
    let rule_id = r["data"]["rule_id"].clone();
    assert_error(app.get("/api/coverage/rules/support.none", Some(a)).await, 404, "NotFound");
    assert_error(app.get("/api/coverage/rules/Not%20A%20Kind", Some(a)).await, 404, "NotFound");
    // Another tenant reads and removes none of A's.
    assert_error(app.get("/api/coverage/rules/support.vip", Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.call(Method::DELETE, "/api/coverage/rules/support.vip", Some(&t.b_token), None).await, 404, "NotFound");

    let (s, d) = app.call(Method::DELETE, "/api/coverage/rules/support.vip", Some(a), None).await;
    assert_eq!(s, StatusCode::OK, "{d}");
    assert_eq!(d["data"], json!({ "rule_id": rule_id, "subject_kind": "support.vip", "deleted": true }));
    assert_error(app.get("/api/coverage/rules/support.vip", Some(a)).await, 404, "NotFound");
    assert_error(app.call(Method::DELETE, "/api/coverage/rules/support.vip", Some(a), None).await, 404, "NotFound");
    assert_error(app.call(Method::DELETE, "/api/coverage/rules/BAD!", Some(a), None).await, 404, "NotFound");
    let (_, list) = app.get("/api/coverage/rules", Some(a)).await;
    assert_eq!((list["total"].clone(), list["data"][0]["subject_kind"].clone()), (json!(1), json!("field.install")));
    let removed = app.events_of(&t.a["tenant_id"]).await.into_iter().filter(|e| e == "assignment.coverage_rule.removed.v1").count();
    assert_eq!(removed, 1);
    // The kind can be covered again.
    let (s, _) = app.post("/api/coverage/rules", Some(a), json!({ "subject_kind": "support.vip", "primary_persona_id": other, "backup_persona_id": me })).await;
    assert_eq!(s, StatusCode::CREATED);
}
db_test!(a_rule_is_read_by_its_kind_and_removed);
