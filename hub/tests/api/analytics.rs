//! sdk-analytics: dataset builds computed from the tenant's own usage and
//! invoices, kept with a SHA-256 of their rows, and exported byte for byte
//! to the object store.

use object_store::{ObjectStore, path::Path as ObjectPath};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn usage(app: &TestApp, token: &str, asset: &str, sku: &str, quantity: i64, at: &str, key: &str) {
    let body = json!({ "asset_id": asset, "sku": sku, "quantity": quantity, "occurred_at": at, "idempotency_key": key });
    let (s, u) = app.post("/api/meter/usage", Some(token), body).await;
    assert_eq!(s, StatusCode::CREATED, "{u}");
}

fn jsonl(rows: &Value) -> String {
    rows.as_array().unwrap().iter().map(|r| format!("{r}\n")).collect()
}

async fn a_usage_build_holds_the_recorded_usage_and_exports_its_very_bytes(app: TestApp) {
    let t = app.two_tenants("analytics").await;
    let a = t.a_token.as_str();
    let asset = uuid::Uuid::now_v7().to_string();
    usage(&app, a, &asset, "api.call", 3, "2026-01-10T08:00:00Z", "u1").await;
    usage(&app, a, &asset, "api.call", 4, "2026-01-10T09:00:00Z", "u2").await;
    usage(&app, a, &asset, "storage.gb", 5, "2026-01-10T10:00:00Z", "u3").await;
    usage(&app, a, &asset, "api.call", 2, "2026-01-11T10:00:00Z", "u4").await;
    usage(&app, a, &asset, "api.call", 9, "2026-02-01T00:00:00Z", "u5").await;
    usage(&app, &t.b_token, &asset, "api.call", 100, "2026-01-10T08:00:00Z", "u1").await;

    let (s, b) = app.post("/api/analytics/builds", Some(a), json!({ "kind": "usage_daily", "period_start": "2026-01-01", "period_end": "2026-01-31" })).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let build = &b["data"];
    let row = |day: &str, sku: &str, units: i64, events: i64| json!({ "day": day, "asset_id": asset, "sensor_id": null, "sku": sku, "units": units, "events": events });
    let rows = json!([row("2026-01-10", "api.call", 7, 2), row("2026-01-10", "storage.gb", 5, 1), row("2026-01-11", "api.call", 2, 1)]);
    assert_eq!((&build["kind"], &build["period_start"], &build["period_end"]), (&json!("usage_daily"), &json!("2026-01-01"), &json!("2026-01-31")));
    assert_eq!((&build["rows"], build["row_count"].as_i64()), (&rows, Some(3)));
    let digest = hub_kernel::crypto::sha256_hex(jsonl(&rows).as_bytes());
    assert_eq!(build["sha256"].as_str(), Some(digest.as_str()));
    let id = build["build_id"].as_str().unwrap();

    // Usage recorded after the build does not change it.
    usage(&app, a, &asset, "api.call", 1, "2026-01-12T10:00:00Z", "u6").await;
    let (s, got) = app.get(&format!("/api/analytics/builds/{id}"), Some(a)).await;
    assert_eq!((s, &got["data"]), (StatusCode::OK, build));

    let (s, e) = app.call(Method::POST, &format!("/api/analytics/builds/{id}/export"), Some(a), None).await;
    assert_eq!(s, StatusCode::CREATED, "{e}");
    let key = format!("analytics/{}/{id}.jsonl", t.a["tenant_id"].as_str().unwrap());
    let e = &e["data"];
    assert_eq!((e["build_id"].as_str(), e["target"].as_str(), e["destination_key"].as_str()), (Some(id), Some("object_store"), Some(key.as_str())));
    let file = app.state().media.get(&ObjectPath::from(key.as_str())).await.unwrap().bytes().await.unwrap();
    assert_eq!(hub_kernel::crypto::sha256_hex(&file), digest);
    assert_eq!((e["sha256"].as_str(), e["bytes"].as_u64()), (Some(digest.as_str()), Some(file.len() as u64)));
    let lines: Vec<Value> = std::str::from_utf8(&file).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(json!(lines), rows);
    let (s, again) = app.post(&format!("/api/analytics/builds/{id}/export"), Some(a), json!({ "target": "object_store" })).await;
    assert_eq!((s, again["data"]["sha256"].as_str()), (StatusCode::CREATED, Some(digest.as_str())));
    assert_ne!(again["data"]["export_id"], e["export_id"]);

    let b = assert_error(app.post(&format!("/api/analytics/builds/{id}/export"), Some(a), json!({ "target": "s3" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["target must be one of: object_store"]));
    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |e: &str| events.iter().filter(|x| *x == e).count();
    let counts = (count("analytics.build.materialised.v1"), count("analytics.export.requested.v1"), count("analytics.export.completed.v1"));
    assert_eq!(counts, (1, 2, 2));
}
db_test!(a_usage_build_holds_the_recorded_usage_and_exports_its_very_bytes);

async fn an_invoices_build_lists_the_invoices_within_its_period(app: TestApp) {
    let t = app.two_tenants("analytics-inv").await;
    let a = t.a_token.as_str();
    let asset = uuid::Uuid::now_v7().to_string();
    usage(&app, a, &asset, "api.call", 1, "2026-01-10T08:00:00Z", "u1").await;
    crate::billing::standard_catalog(&app, "an-cat").await;
    hub_billing::billing::set_catalog_status(&app.state().db, "an-cat", "active", "op").await.unwrap();
    let (s, inv) = app.post("/api/billing/invoices", Some(a), json!({ "catalog": "an-cat", "period_start": "2026-01-01", "period_end": "2026-01-31" })).await;
    assert_eq!(s, StatusCode::CREATED, "{inv}");
    let (_, outside) =
        app.post("/api/billing/invoices", Some(a), json!({ "catalog": "an-cat", "period_start": "2025-12-01", "period_end": "2026-01-05" })).await;
    assert_eq!(outside["success"], true, "{outside}");
    let (s, b) = app.post("/api/analytics/builds", Some(a), json!({ "kind": "invoices", "period_start": "2026-01-01", "period_end": "2026-03-31" })).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let i = &inv["data"];
    let expected = json!([{ "invoice_id": i["invoice_id"], "catalog_id": "an-cat", "catalog_version": 1, "currency": i["currency"], "period_start": "2026-01-01",
        "period_end": "2026-01-31", "total": i["total"], "unrated_skus": i["unrated_skus"], "generated_at": i["generated_at"] }]);
    assert_eq!((&b["data"]["rows"], b["data"]["row_count"].as_i64()), (&expected, Some(1)));
    let (s, theirs) =
        app.post("/api/analytics/builds", Some(&t.b_token), json!({ "kind": "invoices", "period_start": "2026-01-01", "period_end": "2026-03-31" })).await;
    assert_eq!(
        (s, &theirs["data"]["rows"], theirs["data"]["sha256"].as_str()),
        (StatusCode::CREATED, &json!([]), Some(hub_kernel::crypto::sha256_hex(b"").as_str()))
    );
}
db_test!(an_invoices_build_lists_the_invoices_within_its_period);

async fn another_tenants_build_is_not_found_and_every_problem_is_reported(app: TestApp) {
    let t = app.two_tenants("analytics-404").await;
    let a = t.a_token.as_str();
    let (s, b) = app.post("/api/analytics/builds", Some(a), json!({ "kind": "usage_daily", "period_start": "2026-01-01", "period_end": "2026-01-01" })).await;
    assert_eq!((s, b["data"]["row_count"].as_i64()), (StatusCode::CREATED, Some(0)), "{b}");
    let id = b["data"]["build_id"].as_str().unwrap();
    assert_error(app.get(&format!("/api/analytics/builds/{id}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.call(Method::POST, &format!("/api/analytics/builds/{id}/export"), Some(&t.b_token), None).await, 404, "NotFound");
    assert_error(app.post(&format!("/api/analytics/builds/{id}/export"), Some(&t.b_token), json!({ "target": "nowhere" })).await, 404, "NotFound");
    let unknown = uuid::Uuid::now_v7();
    assert_error(app.call(Method::POST, &format!("/api/analytics/builds/{unknown}/export"), Some(a), None).await, 404, "NotFound");
    assert_error(app.get("/api/analytics/builds/not-a-uuid", Some(a)).await, 404, "NotFound");

    let b = assert_error(app.post("/api/analytics/builds", Some(a), json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["kind is required", "period_start is required", "period_end is required"]));
    let bad = json!({ "kind": "everything", "period_start": "2026-13-01", "period_end": "2026-01-01" });
    let b = assert_error(app.post("/api/analytics/builds", Some(a), bad).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["kind must be one of: usage_daily, invoices", "period_start must be a day, YYYY-MM-DD"]));
    let reversed = json!({ "kind": "invoices", "period_start": "2026-02-01", "period_end": "2026-01-01" });
    let b = assert_error(app.post("/api/analytics/builds", Some(a), reversed).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["period_end must be from period_start to 365 days after it"]));
    let b = assert_error(app.post(&format!("/api/analytics/builds/{id}/export"), Some(a), json!([1])).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["request body must be a JSON object"]));
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| e.starts_with("analytics.")).count(), 1, "{events:?}");
    assert!(app.events_of(&t.b["tenant_id"]).await.iter().all(|e| !e.starts_with("analytics.")));
}
db_test!(another_tenants_build_is_not_found_and_every_problem_is_reported);

async fn builds_are_listed_their_exports_read_and_a_build_deleted(app: TestApp) {
    let t = app.two_tenants("analytics-life").await;
    let (a, b) = (t.a_token.as_str(), t.b_token.as_str());
    let asset = uuid::Uuid::now_v7().to_string();
    usage(&app, a, &asset, "api.call", 3, "2026-01-10T08:00:00Z", "u1").await;
    let build = |kind: &str| app.post("/api/analytics/builds", Some(a), json!({ "kind": kind, "period_start": "2026-01-01", "period_end": "2026-01-31" }));
    let (_, first) = build("usage_daily").await;
    let (_, second) = build("invoices").await;
    let (_, third) = build("usage_daily").await;
    let id = |v: &Value| v["data"]["build_id"].as_str().unwrap().to_string();
    let (first, second, third) = (id(&first), id(&second), id(&third));
    app.post("/api/analytics/builds", Some(b), json!({ "kind": "usage_daily", "period_start": "2026-01-01", "period_end": "2026-01-31" })).await;

    // The list: newest first, without rows; `kind` filters.
    let (s, l) = app.get("/api/analytics/builds", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    let ids: Vec<&str> = l["data"].as_array().unwrap().iter().map(|b| b["build_id"].as_str().unwrap()).collect();
    assert_eq!((l["total"].as_i64(), ids), (Some(3), vec![third.as_str(), second.as_str(), first.as_str()]));
    assert!(l["data"][0].get("rows").is_none() && l["data"][0]["row_count"] == 1, "{l}");
    let (_, l) = app.get("/api/analytics/builds?kind=usage_daily&limit=1", Some(a)).await;
    assert_eq!((l["total"].as_i64(), l["data"][0]["build_id"].as_str()), (Some(2), Some(third.as_str())));
    let (_, l) = app.get("/api/analytics/builds?kind=invoices", Some(a)).await;
    assert_eq!(l["total"], 1);
    let bad = assert_error(app.get("/api/analytics/builds?kind=everything", Some(a)).await, 400, "ValidationError");
    assert_eq!(bad["details"].as_array().unwrap().len(), 1, "{bad}");

    // The exports of a build, newest first.
    let (_, none) = app.get(&format!("/api/analytics/builds/{first}/exports"), Some(a)).await;
    assert_eq!(none, json!({ "success": true, "data": [], "total": 0 }));
    let (_, e1) = app.call(Method::POST, &format!("/api/analytics/builds/{first}/export"), Some(a), None).await;
    let (_, e2) = app.call(Method::POST, &format!("/api/analytics/builds/{first}/export"), Some(a), None).await;
    let (s, l) = app.get(&format!("/api/analytics/builds/{first}/exports"), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    assert_eq!(l, json!({ "success": true, "data": [e2["data"], e1["data"]], "total": 2 }));
    assert_error(app.get(&format!("/api/analytics/builds/{first}/exports"), Some(b)).await, 404, "NotFound");
    assert_error(app.get("/api/analytics/builds/not-a-uuid/exports", Some(a)).await, 404, "NotFound");

    // Deleting erases the build, its exports' records and the file.
    let key = e1["data"]["destination_key"].as_str().unwrap().to_string();
    assert!(app.state().media.head(&ObjectPath::from(key.as_str())).await.is_ok());
    assert_error(app.call(Method::DELETE, &format!("/api/analytics/builds/{first}"), Some(b), None).await, 404, "NotFound");
    let (s, d) = app.call(Method::DELETE, &format!("/api/analytics/builds/{first}"), Some(a), None).await;
    assert_eq!(s, StatusCode::OK, "{d}");
    assert_eq!(d["data"], json!({ "build_id": first, "deleted": true, "export_erased": true }));
    assert!(app.state().media.head(&ObjectPath::from(key.as_str())).await.is_err(), "the file is erased");
    assert_error(app.get(&format!("/api/analytics/builds/{first}"), Some(a)).await, 404, "NotFound");
    assert_error(app.get(&format!("/api/analytics/builds/{first}/exports"), Some(a)).await, 404, "NotFound");
    assert_error(app.call(Method::DELETE, &format!("/api/analytics/builds/{first}"), Some(a), None).await, 404, "NotFound");
    let (s, d) = app.call(Method::DELETE, &format!("/api/analytics/builds/{second}"), Some(a), None).await;
    assert_eq!((s, d["data"]["export_erased"].as_bool()), (StatusCode::OK, Some(false)), "a build never exported");
    let (_, l) = app.get("/api/analytics/builds", Some(a)).await;
    assert_eq!(l["total"], 1);

    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "analytics.build.deleted.v1").count(), 2, "{events:?}");
    assert!(app.events_of(&t.b["tenant_id"]).await.iter().all(|e| e != "analytics.build.deleted.v1"));
}
db_test!(builds_are_listed_their_exports_read_and_a_build_deleted);
