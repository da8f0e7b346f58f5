//! sdk-billing: invoices rate a tenant's usage over a closed period against
//! the named catalog's active version (every mode, integer minor units,
//! line items by sku); the same catalog and period answers the first one.

use hub_billing::billing::{NewRate, create_catalog, put_rate, set_catalog_status};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*, meter::usage};

fn rate(unit: &str, mode: &str, price: Option<i64>, margin: Option<Value>, tiers: Option<Value>) -> NewRate {
    NewRate {
        unit: unit.into(),
        mode: mode.parse().unwrap(),
        price,
        margin_pct: margin.and_then(|m| m.as_number().cloned()),
        tiers: tiers.map(|t| serde_json::from_value(t).unwrap()),
    }
}

/// The catalog `standard` (v1, USD) with a rate of every mode, active.
pub async fn standard_catalog(app: &TestApp, name: &str) {
    let db = &app.state().db;
    create_catalog(db, name, 1, None, "op-1").await.unwrap();
    for (sku, r) in [
        ("api.call", rate("call", "flat_per_call", Some(2), None, None)),
        ("llm.tokens", rate("token", "passthrough_plus_margin", Some(3), Some(json!(12.5)), None)),
        ("sms", rate("message", "tiered_per_call", None, None, Some(json!([{ "up_to": 2, "unit_price": 10 }, { "up_to": null, "unit_price": 5 }])))),
        ("storage.gb", rate("GB", "per_unit", Some(4), None, None)),
        ("support", rate("month", "bundled_subscription", Some(5000), None, None)),
        ("internal.ping", rate("call", "free_internal", None, None, None)),
    ] {
        put_rate(db, name, sku, &r, "op-1").await.unwrap();
    }
}

async fn an_invoice_rates_the_period_by_sku_in_minor_units_once(app: TestApp) {
    let t = app.two_tenants("billing").await;
    let a = t.a_token.as_str();
    let asset = uuid::Uuid::now_v7().to_string();
    let mut n = 0;
    for (sku, quantity, day) in [
        ("api.call", 1, "2026-10-01"),
        ("api.call", 1, "2026-10-15"),
        ("api.call", 1, "2026-10-31"),
        ("api.call", 1, "2026-11-01"),
        ("api.call", 1, "2026-09-30"),
        ("llm.tokens", 7, "2026-10-02"),
        ("sms", 1, "2026-10-03"),
        ("sms", 1, "2026-10-03"),
        ("sms", 1, "2026-10-04"),
        ("storage.gb", 10, "2026-10-05"),
        ("internal.ping", 1, "2026-10-06"),
        ("unpriced.thing", 1, "2026-10-07"),
    ] {
        n += 1;
        let body =
            json!({ "asset_id": asset, "sku": sku, "quantity": quantity, "occurred_at": format!("{day}T12:00:00Z"), "idempotency_key": format!("e{n}") });
        assert_eq!(usage(&app, a, body).await.0, StatusCode::CREATED);
    }
    standard_catalog(&app, "standard").await;
    let period = json!({ "catalog": "standard", "period_start": "2026-10-01", "period_end": "2026-10-31" });
    let b = assert_error(app.post("/api/billing/invoices", Some(a), period.clone()).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["catalog must name a pricing catalog with an active version"]), "a draft does not rate");
    let active = set_catalog_status(&app.state().db, "standard", "active", "op-1").await.unwrap();
    assert_eq!((active.status.as_str(), active.version), ("active", 1));

    let (s, inv) = app.post("/api/billing/invoices", Some(a), period.clone()).await;
    assert_eq!(s, StatusCode::CREATED, "{inv}");
    let d = &inv["data"];
    assert_eq!(
        (d["tenant_id"].clone(), d["catalog_id"].as_str(), d["catalog_version"].as_i64(), d["currency"].as_str(), d["status"].as_str()),
        (t.a["tenant_id"].clone(), Some("standard"), Some(1), Some("USD"), Some("issued"))
    );
    assert_eq!((d["period_start"].as_str(), d["period_end"].as_str()), (Some("2026-10-01"), Some("2026-10-31")));
    let line = |sku: &str, unit: &str, mode: &str, units: i64, calls: i64, price: Value, margin: Value, amount: i64| json!({ "sku": sku, "unit": unit, "mode": mode, "units": units, "calls": calls, "price": price, "margin_pct": margin, "amount": amount });
    assert_eq!(
        d["line_items"],
        json!([
            line("api.call", "call", "flat_per_call", 3, 3, json!(2), Value::Null, 6),
            line("internal.ping", "call", "free_internal", 1, 1, Value::Null, Value::Null, 0),
            // 7 × 3 × 1.125 = 23.625, rounded half up once, on the line.
            line("llm.tokens", "token", "passthrough_plus_margin", 7, 1, json!(3), json!(12.5), 24),
            // Two calls at 10, the third at 5.
            line("sms", "message", "tiered_per_call", 3, 3, Value::Null, Value::Null, 25),
            line("storage.gb", "GB", "per_unit", 10, 1, json!(4), Value::Null, 40),
            line("support", "month", "bundled_subscription", 0, 0, json!(5000), Value::Null, 5000),
        ])
    );
    assert_eq!((d["total"].as_i64(), &d["unrated_skus"]), (Some(5095), &json!(["unpriced.thing"])));

    // The same catalog and period answer the first invoice, even after more
    // usage and a new price.
    usage(&app, a, json!({ "asset_id": asset, "sku": "api.call", "quantity": 1, "occurred_at": "2026-10-20T00:00:00Z", "idempotency_key": "late" })).await;
    put_rate(&app.state().db, "standard", "api.call", &rate("call", "flat_per_call", Some(100), None, None), "op-1").await.unwrap();
    let (s, again) = app.post("/api/billing/invoices", Some(a), period.clone()).await;
    assert_eq!((s, &again), (StatusCode::OK, &inv));
    let id = d["invoice_id"].as_str().unwrap();
    let (s, got) = app.get(&format!("/api/billing/invoices/{id}"), Some(a)).await;
    assert_eq!((s, &got), (StatusCode::OK, &inv));
    assert_error(app.get(&format!("/api/billing/invoices/{id}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/billing/invoices/INV-1", Some(a)).await, 404, "NotFound");

    // Another tenant's invoice of the same period holds only its own usage.
    let (s, theirs) = app.post("/api/billing/invoices", Some(&t.b_token), period.clone()).await;
    assert_eq!(s, StatusCode::CREATED, "{theirs}");
    assert_eq!((theirs["data"]["total"].as_i64(), theirs["data"]["line_items"].as_array().unwrap().len()), (Some(5000), 1));
    assert_ne!(theirs["data"]["invoice_id"], d["invoice_id"]);

    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "billing.invoice.generated.v1").count(), 1);
}
db_test!(an_invoice_rates_the_period_by_sku_in_minor_units_once);

async fn invoices_need_a_closed_period_and_a_known_catalog(app: TestApp) {
    let t = app.two_tenants("billingcheck").await;
    let a = t.a_token.as_str();
    let today = chrono::Utc::now().date_naive().to_string();
    let post = |body: Value| app.post("/api/billing/invoices", Some(a), body);
    let b = assert_error(post(json!({ "period_start": "2026-10-32", "period_end": "soon" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["catalog is required", "period_start must be a day, YYYY-MM-DD", "period_end must be a day, YYYY-MM-DD"]));
    let b = assert_error(post(json!({ "catalog": "standard", "period_end": today })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["period_start is required"]));
    let b = assert_error(post(json!({ "catalog": "standard", "period_start": "2026-10-02", "period_end": "2026-10-01" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["period_start must not be after period_end"]));
    let b = assert_error(post(json!({ "catalog": "standard", "period_start": "2026-10-01", "period_end": today })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["period_end must be a day before today (UTC): the period must be closed"]));
    let b = assert_error(post(json!({ "catalog": "standard", "period_start": "2024-01-01", "period_end": "2025-06-01" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["a period is at most 366 days"]));
    let b = assert_error(post(json!({ "catalog": "nope", "period_start": "2026-10-01", "period_end": "2026-10-31" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["catalog must name a pricing catalog with an active version"]));
    assert_error(
        post(json!({ "catalog": "nope", "period_start": "2026-10-01", "period_end": "2026-10-31", "tenant_id": t.b["tenant_id"] })).await,
        403,
        "TenantMismatch",
    );

    // The operator's doors check what they store.
    let db = &app.state().db;
    standard_catalog(&app, "checked").await;
    let dup = create_catalog(db, "checked", 1, None, "op-1").await.unwrap_err();
    assert_eq!(dup.body()["error"], "Conflict");
    let bad = create_catalog(db, "no spaces", 0, Some("usd"), " ").await.unwrap_err();
    assert_eq!(
        bad.body()["details"],
        json!([
            "catalog_id must be 1 to 128 letters, digits or . _ -",
            "version must be a positive integer",
            "currency must be an ISO 4217 code (three capital letters)",
            "operator_id is required"
        ])
    );
    // What the schema cannot say, a library caller still hears about.
    let weird = NewRate {
        unit: " ".into(),
        mode: "flat_per_call".parse().unwrap(),
        price: Some(-1),
        margin_pct: Some(serde_json::Number::from_f64(12.345).unwrap()),
        tiers: Some(serde_json::from_value(json!([{ "up_to": 5, "unit_price": 1 }])).unwrap()),
    };
    let bad = put_rate(db, "checked", "x", &weird, "op-1").await.unwrap_err();
    assert_eq!(
        bad.body()["details"],
        json!([
            "unit is required",
            "price must be an integer from 0 to 1000000000000",
            "margin_pct must be a number from -100 to 1000 with at most two decimals",
            "tiers must be 1 to 20 objects { up_to, unit_price }: up_to increasing integers from 1, the last tier open-ended (up_to null), unit_price integers of 0 or more"
        ])
    );
    let bad = put_rate(db, "checked", "x", &rate("call", "tiered_per_call", None, None, None), "op-1").await.unwrap_err();
    assert_eq!(bad.body()["details"], json!(["tiers are required for mode tiered_per_call"]));
    let bad = put_rate(db, "checked", "x", &rate("t", "passthrough_plus_margin", None, None, None), "op-1").await.unwrap_err();
    assert_eq!(bad.body()["details"], json!(["price is required for mode passthrough_plus_margin", "margin_pct is required for mode passthrough_plus_margin"]));
    let unknown = put_rate(db, "absent", "x", &rate("call", "per_unit", Some(1), None, None), "op-1").await.unwrap_err();
    assert_eq!(unknown.body()["error"], "NotFound");
    assert_eq!(set_catalog_status(db, "absent", "active", "op-1").await.unwrap_err().body()["error"], "NotFound");
    let bad = set_catalog_status(db, "checked", "live", "op-1").await.unwrap_err();
    assert_eq!(bad.body()["details"], json!(["status must be one of: draft, active, retired"]));
}
db_test!(invoices_need_a_closed_period_and_a_known_catalog);

async fn a_tenant_lists_its_invoices_by_period_and_catalog(app: TestApp) {
    let t = app.two_tenants("billing-list").await;
    let (a, b) = (t.a_token.as_str(), t.b_token.as_str());
    let db = &app.state().db;
    standard_catalog(&app, "std").await;
    set_catalog_status(db, "std", "active", "op-1").await.unwrap();
    standard_catalog(&app, "alt").await;
    set_catalog_status(db, "alt", "active", "op-1").await.unwrap();
    let invoice = |catalog: &str, start: &str, end: &str| {
        app.post("/api/billing/invoices", Some(a), json!({ "catalog": catalog, "period_start": start, "period_end": end }))
    };
    let (s, jan) = invoice("std", "2026-01-01", "2026-01-31").await;
    assert_eq!(s, StatusCode::CREATED, "{jan}");
    let (_, feb) = invoice("std", "2026-02-01", "2026-02-28").await;
    let (_, alt) = invoice("alt", "2026-01-15", "2026-02-15").await;
    app.post("/api/billing/invoices", Some(b), json!({ "catalog": "std", "period_start": "2026-01-01", "period_end": "2026-01-31" })).await;
    let id = |v: &Value| v["data"]["invoice_id"].as_str().unwrap().to_string();
    let (jan, feb, alt) = (id(&jan), id(&feb), id(&alt));
    let ids = |l: &Value| l["data"].as_array().unwrap().iter().map(|i| i["invoice_id"].as_str().unwrap().to_string()).collect::<Vec<_>>();

    // Newest first, without line items (the invoice's read has them).
    let (s, l) = app.get("/api/billing/invoices", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    assert_eq!((l["total"].as_i64(), ids(&l)), (Some(3), vec![alt.clone(), feb.clone(), jan.clone()]));
    let first = &l["data"][2];
    assert_eq!((first["catalog_id"].as_str(), first["period_start"].as_str(), first["status"].as_str()), (Some("std"), Some("2026-01-01"), Some("issued")));
    assert!(first.get("line_items").is_none() && first["total"].is_i64(), "{first}");
    // A period meets the range when it ends on or after `from` and starts
    // on or before `to`.
    let (_, l) = app.get("/api/billing/invoices?from=2026-02-01", Some(a)).await;
    assert_eq!(ids(&l), vec![alt.clone(), feb.clone()]);
    let (_, l) = app.get("/api/billing/invoices?to=2026-01-14", Some(a)).await;
    assert_eq!(ids(&l), vec![jan.clone()]);
    let (_, l) = app.get("/api/billing/invoices?from=2026-01-20&to=2026-01-31&catalog=std", Some(a)).await;
    assert_eq!(ids(&l), vec![jan.clone()]);
    let (_, l) = app.get("/api/billing/invoices?catalog=alt", Some(a)).await;
    assert_eq!((l["total"].as_i64(), ids(&l)), (Some(1), vec![alt.clone()]));
    let (_, l) = app.get("/api/billing/invoices?limit=1&offset=1", Some(a)).await;
    assert_eq!((l["total"].as_i64(), ids(&l)), (Some(3), vec![feb.clone()]));
    let (_, l) = app.get("/api/billing/invoices", Some(b)).await;
    assert_eq!(l["total"], 1, "another tenant's are its own");
    let bad = assert_error(app.get("/api/billing/invoices?from=2026-1-1&to=2026-02-30&catalog=a%20b", Some(a)).await, 400, "ValidationError");
    assert_eq!(bad["details"], json!(["from must be a day, YYYY-MM-DD", "to must be a day, YYYY-MM-DD", "catalog must be 1 to 128 letters, digits or . _ -"]));
    let bad = assert_error(app.get("/api/billing/invoices?from=2026-03-01&to=2026-02-01", Some(a)).await, 400, "ValidationError");
    assert_eq!(bad["details"], json!(["from must be on or before to"]));
}
db_test!(a_tenant_lists_its_invoices_by_period_and_catalog);

async fn a_tenant_reads_the_active_version_of_a_catalog(app: TestApp) {
    let t = app.two_tenants("billing-cat").await;
    let a = t.a_token.as_str();
    let db = &app.state().db;
    standard_catalog(&app, "std").await;
    // A draft is no catalog an invoice can use yet.
    assert_error(app.get("/api/billing/catalogs/active?catalog_id=std", Some(a)).await, 404, "NotFound");
    set_catalog_status(db, "std", "active", "op-1").await.unwrap();
    let (s, c) = app.get("/api/billing/catalogs/active?catalog_id=std", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{c}");
    let d = &c["data"];
    assert_eq!((d["catalog_id"].as_str(), d["version"].as_i64(), d["currency"].as_str()), (Some("std"), Some(1), Some("USD")));
    let skus: Vec<&str> = d["rates"].as_array().unwrap().iter().map(|r| r["sku"].as_str().unwrap()).collect();
    assert_eq!(skus, ["api.call", "internal.ping", "llm.tokens", "sms", "storage.gb", "support"]);
    let tokens = &d["rates"][2];
    assert_eq!((tokens["mode"].as_str(), tokens["price"].as_i64(), tokens["margin_pct"].as_f64()), (Some("passthrough_plus_margin"), Some(3), Some(12.5)));
    // A newer draft version changes nothing until it is active; then it is
    // the one read.
    create_catalog(db, "std", 2, Some("EUR"), "op-1").await.unwrap();
    put_rate(db, "std", "api.call", &rate("call", "flat_per_call", Some(9), None, None), "op-1").await.unwrap();
    let (_, c) = app.get("/api/billing/catalogs/active?catalog_id=std", Some(a)).await;
    assert_eq!(c["data"]["version"], 1);
    set_catalog_status(db, "std", "active", "op-1").await.unwrap();
    let (_, c) = app.get("/api/billing/catalogs/active?catalog_id=std", Some(&t.b_token)).await;
    assert_eq!((c["data"]["version"].as_i64(), c["data"]["currency"].as_str()), (Some(2), Some("EUR")));
    assert_eq!((c["data"]["rates"].as_array().unwrap().len(), c["data"]["rates"][0]["price"].as_i64()), (1, Some(9)));
    assert_error(app.get("/api/billing/catalogs/active?catalog_id=none", Some(a)).await, 404, "NotFound");
    let bad = assert_error(app.get("/api/billing/catalogs/active", Some(a)).await, 400, "ValidationError");
    assert_eq!(bad["details"], json!(["catalog_id is required"]));
    let bad = assert_error(app.get("/api/billing/catalogs/active?catalog_id=a%20b", Some(a)).await, 400, "ValidationError");
    assert_eq!(bad["details"], json!(["catalog_id must be 1 to 128 letters, digits or . _ -"]));
}
db_test!(a_tenant_reads_the_active_version_of_a_catalog);
