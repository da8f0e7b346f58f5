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

async fn a_version_is_read_rolled_back_to_and_deactivated(app: TestApp) {
    let t = app.two_tenants("imports-life").await;
    let a = t.a_token.as_str();
    let tenant = t.a["tenant_id"].as_str().unwrap();
    let mut versions = Vec::new();
    for source in ["E-mail", "Email address"] {
        let (s, r) =
            app.post("/api/import/templates", Some(a), json!({ "slug": "leads", "kind": "csv", "entity": "contact", "mapping": { "email": source } })).await;
        assert_eq!(s, StatusCode::CREATED, "{r}");
        versions.push(r["data"].clone());
    }
    let (v1, v2) = (versions[0]["template_id"].as_str().unwrap(), versions[1]["template_id"].as_str().unwrap());
    let (s, one) = app.get(&format!("/api/import/templates/{v1}"), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{one}");
    assert_eq!(
        (&one["data"]["version"], &one["data"]["active"], &one["data"]["mapping"], &one["data"]["kind"]),
        (&json!(1), &json!(false), &json!({ "email": "E-mail" }), &json!("csv"))
    );
    assert_error(app.get(&format!("/api/import/templates/{v1}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/import/templates/0190a000-0000-7000-8000-000000000000", Some(a)).await, 404, "NotFound");
    assert_error(app.get("/api/import/templates/leads", Some(a)).await, 404, "NotFound");

    // Roll back to version 1: version 2 is no longer active.
    let (s, back) = app.post(&format!("/api/import/templates/{v1}/activate"), Some(a), json!({})).await;
    assert_eq!((s, &back["data"]["template_id"], &back["data"]["active"]), (StatusCode::OK, &json!(v1), &json!(true)), "{back}");
    let (_, v2_now) = app.get(&format!("/api/import/templates/{v2}"), Some(a)).await;
    assert_eq!(v2_now["data"]["active"], false);
    let active = format!("/api/import/templates?tenant_id={tenant}&slug=leads&active=true");
    let (_, list) = app.get(&active, Some(a)).await;
    assert_eq!((list["total"].as_i64(), list["data"][0]["template_id"].as_str()), (Some(1), Some(v1)));
    let (s, again) = app.post(&format!("/api/import/templates/{v1}/activate"), Some(a), json!({})).await;
    assert_eq!((s, &again["data"]), (StatusCode::OK, &back["data"]), "activating the active version changes nothing");

    // Deactivated: the slug has no active version; again changes nothing.
    let (s, off) = app.post(&format!("/api/import/templates/{v1}/deactivate"), Some(a), json!({})).await;
    assert_eq!((s, &off["data"]["active"], &off["data"]["version"]), (StatusCode::OK, &json!(false), &json!(1)), "{off}");
    let (_, list) = app.get(&active, Some(a)).await;
    assert_eq!(list["total"], 0);
    let (s, again) = app.post(&format!("/api/import/templates/{v1}/deactivate"), Some(a), json!({})).await;
    assert_eq!((s, &again["data"]), (StatusCode::OK, &off["data"]));
    let (s, on) = app.post(&format!("/api/import/templates/{v2}/activate"), Some(a), json!({})).await;
    assert_eq!((s, &on["data"]["active"]), (StatusCode::OK, &json!(true)));
    let (_, list) = app.get(&active, Some(a)).await;
    assert_eq!((list["total"].as_i64(), list["data"][0]["template_id"].as_str()), (Some(1), Some(v2)));

    for verb in ["activate", "deactivate"] {
        assert_error(app.post(&format!("/api/import/templates/{v2}/{verb}"), Some(&t.b_token), json!({})).await, 404, "NotFound");
        assert_error(app.post(&format!("/api/import/templates/0190a000-0000-7000-8000-000000000000/{verb}"), Some(a), json!({})).await, 404, "NotFound");
        assert_error(app.post(&format!("/api/import/templates/v1/{verb}"), Some(a), json!({})).await, 404, "NotFound");
    }
    let (_, b_view) = app.get(&format!("/api/import/templates/{v2}"), Some(a)).await;
    assert_eq!(b_view["data"]["active"], true, "B's attempts changed nothing");

    let events = app.events_of(&t.a["tenant_id"]).await;
    let ours: Vec<&str> = events.iter().map(String::as_str).filter(|e| e.starts_with("import.template")).collect();
    assert_eq!(
        ours,
        [
            "import.template.published.v1",
            "import.template.published.v1",
            "import.template.activated.v1",
            "import.template.deactivated.v1",
            "import.template.activated.v1"
        ]
    );
}
db_test!(a_version_is_read_rolled_back_to_and_deactivated);
