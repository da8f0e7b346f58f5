//! sdk-import: mapping templates versioned per slug, one active version
//! a slug, listed by slug with the newest version first (tenant_id
//! required and the caller's, filters, limit clamped).

use reqwest::StatusCode;
use serde_json::json;

use crate::{db_test, helpers::*};

async fn templates_are_versioned_per_slug_and_filtered(app: TestApp) {
    let t = app.two_tenants("imports").await;
    let a = t.a_token.as_str();
    let tenant = t.a["tenant_id"].as_str().unwrap();
    let publish = |slug: &str, kind: &str, active: bool| json!({ "slug": slug, "kind": kind, "entity": "contact", "mapping": { "email": "E-mail", "name": "Full name" }, "active": active });
    for (slug, kind, active) in [("leads", "csv", true), ("leads", "csv", true), ("leads", "csv", false), ("accounts", "json", true)] {
        let (s, r) = app.post("/api/import/templates", Some(a), publish(slug, kind, active)).await;
        assert_eq!(s, StatusCode::CREATED, "{r}");
    }
    let (s, list) = app.get(&format!("/api/import/templates?tenant_id={tenant}"), Some(a)).await;
    assert_eq!(s, StatusCode::OK);
    let rows: Vec<(String, i64, bool)> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["slug"].as_str().unwrap().to_string(), t["version"].as_i64().unwrap(), t["active"].as_bool().unwrap()))
        .collect();
    let row = |s: &str, v: i64, a: bool| (s.to_string(), v, a);
    assert_eq!(rows, [row("accounts", 1, true), row("leads", 3, false), row("leads", 2, true), row("leads", 1, false)]);
    assert_eq!(list["data"][0]["mapping"], json!({ "email": "E-mail", "name": "Full name" }));
    let (_, active) = app.get(&format!("/api/import/templates?tenant_id={tenant}&slug=leads&active=true"), Some(a)).await;
    assert_eq!((active["total"].as_i64(), active["data"][0]["version"].as_i64()), (Some(1), Some(2)));
    let (_, json_kind) = app.get(&format!("/api/import/templates?tenant_id={tenant}&kind=json"), Some(a)).await;
    assert_eq!(json_kind["total"], 1);
    let (_, one) = app.get(&format!("/api/import/templates?tenant_id={tenant}&limit=0"), Some(a)).await;
    assert_eq!((one["data"].as_array().unwrap().len(), one["total"].as_i64()), (1, Some(4)), "limit clamped to at least 1");
    let (_, many) = app.get(&format!("/api/import/templates?tenant_id={tenant}&limit=100000"), Some(a)).await;
    assert_eq!(many["data"].as_array().unwrap().len(), 4, "limit clamped to at most 500");

    assert_error(app.get("/api/import/templates", Some(a)).await, 400, "ValidationError");
    assert_error(app.get(&format!("/api/import/templates?tenant_id={tenant}&limit=many"), Some(a)).await, 400, "ValidationError");
    assert_error(app.get(&format!("/api/import/templates?tenant_id={tenant}&active=yes&kind=pdf"), Some(a)).await, 400, "ValidationError");
    assert_error(app.get(&format!("/api/import/templates?tenant_id={}", t.b["tenant_id"].as_str().unwrap()), Some(a)).await, 403, "TenantMismatch");
    let (_, b_list) = app.get(&format!("/api/import/templates?tenant_id={}", t.b["tenant_id"].as_str().unwrap()), Some(&t.b_token)).await;
    assert_eq!(b_list["total"], 0);
    let b = assert_error(
        app.post("/api/import/templates", Some(a), json!({ "slug": "Leads!", "kind": "pdf", "mapping": { "email": "" } })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["kind must be one of: csv, json, xlsx, xml", "entity is required"]));
    let b = assert_error(
        app.post("/api/import/templates", Some(a), json!({ "slug": "s".repeat(129), "kind": "csv", "entity": "contact", "mapping": { "email": 1 } })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["slug must be at most 128 characters", "mapping.email must be a string"]));
    // Matching its schema, the body still has a slug of the allowed characters and a source for every field.
    let b = assert_error(
        app.post("/api/import/templates", Some(a), json!({ "slug": "Leads!", "kind": "csv", "entity": "contact", "mapping": { "email": "" } })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "slug must be 1 to 128 of a-z, 0-9, '.', '_' or '-'",
            "mapping.email must map a field name (at most 128 characters) to a source column of 1 to 256 characters",
        ])
    );
    let b = assert_error(
        app.post("/api/import/templates", Some(a), json!({ "slug": "leads", "kind": "csv", "entity": "contact", "mapping": {} })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["mapping must be an object of 1 to 500 fields"]));
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "import.template.published.v1").count(), 4);
}
db_test!(templates_are_versioned_per_slug_and_filtered);
