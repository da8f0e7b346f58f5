//! The operator's invoices: every tenant's, filtered by tenant and by a
//! range the period meets, newest first, at most 200; one invoice with
//! its line items by sku.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn invoice(app: &TestApp, token: &str, start: &str, end: &str) -> Value {
    let (s, r) = app.post("/api/billing/invoices", Some(token), json!({ "catalog": "opinv", "period_start": start, "period_end": end })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    r["data"].clone()
}

fn ids(v: &Value) -> Vec<String> {
    v["data"].as_array().unwrap().iter().map(|i| i["invoice_id"].as_str().unwrap().to_string()).collect()
}

async fn the_operator_lists_every_tenants_invoices_and_reads_one(app: TestApp) {
    let t = app.two_tenants("op-inv").await;
    let (a, b) = (t.a_token.as_str(), t.b_token.as_str());
    let asset = uuid::Uuid::now_v7().to_string();
    for (n, sku) in ["api.call", "sms", "api.call"].iter().enumerate() {
        let body = json!({ "asset_id": asset, "sku": sku, "quantity": 1, "occurred_at": "2026-03-10T12:00:00Z", "idempotency_key": format!("k{n}") });
        assert_eq!(app.post("/api/meter/usage", Some(a), body).await.0, StatusCode::CREATED);
    }
    crate::billing::standard_catalog(&app, "opinv").await;
    hub_billing::billing::set_catalog_status(&app.state().db, "opinv", "active", "op").await.unwrap();
    let jan = invoice(&app, a, "2026-01-01", "2026-01-31").await;
    let march = invoice(&app, a, "2026-03-01", "2026-03-31").await;
    let b_feb = invoice(&app, b, "2026-02-01", "2026-02-28").await;
    let id = |v: &Value| v["invoice_id"].as_str().unwrap().to_string();

    let list = |query: &str| app.op(Method::GET, format!("/admin/invoices{query}"), None);
    let (s, all) = list("").await;
    assert_eq!(s, StatusCode::OK, "{all}");
    assert_eq!(ids(&all), [id(&b_feb), id(&march), id(&jan)], "newest generated first, every tenant");
    let row = &all["data"][1];
    assert_eq!((row["tenant_id"].clone(), row["total"].clone(), row["status"].as_str()), (t.a["tenant_id"].clone(), march["total"].clone(), Some("issued")));
    assert!(row.get("line_items").is_none() && row["period_start"] == "2026-03-01" && row["generated_at"].is_string(), "{row}");

    let (_, mine) = list(&format!("?tenant_id={}", t.a["tenant_id"].as_str().unwrap())).await;
    assert_eq!(ids(&mine), [id(&march), id(&jan)]);
    // The range matches periods it meets: end on or after from, start on or before to.
    assert_eq!(ids(&list("?from=2026-01-31&to=2026-02-01").await.1), [id(&b_feb), id(&jan)]);
    assert_eq!(ids(&list("?from=2026-02-15").await.1), [id(&b_feb), id(&march)]);
    assert_eq!(ids(&list("?to=2026-01-01").await.1), [id(&jan)]);
    let (s, none) = list(&format!("?tenant_id={}", uuid::Uuid::now_v7())).await;
    assert_eq!((s, none["data"].clone()), (StatusCode::OK, json!([])), "an unknown tenant has none");
    let b = assert_error(list("?tenant_id=x&from=2026-13-01&to=yesterday").await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["tenant_id must be a UUID", "from must be a day, YYYY-MM-DD", "to must be a day, YYYY-MM-DD"]));
    let b = assert_error(list("?from=2026-02-01&to=2026-01-01").await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["from must not be after to"]));

    let (s, one) = app.op(Method::GET, format!("/admin/invoices/{}", id(&march)), None).await;
    assert_eq!(s, StatusCode::OK, "{one}");
    assert_eq!(one["data"]["invoice"]["invoice_id"], march["invoice_id"]);
    assert_eq!(one["data"]["invoice"]["unrated_skus"], json!([]));
    assert!(one["data"]["invoice"].get("line_items").is_none());
    assert_eq!(one["data"]["line_items"], march["line_items"]);
    let skus: Vec<&str> = one["data"]["line_items"].as_array().unwrap().iter().map(|l| l["sku"].as_str().unwrap()).collect();
    assert_eq!(skus, ["api.call", "sms", "support"], "by sku");
    for missing in [uuid::Uuid::now_v7().to_string(), "not-a-uuid".to_string()] {
        let b = assert_error(app.op(Method::GET, format!("/admin/invoices/{missing}"), None).await, 404, "NotFound");
        assert_eq!(b["details"], json!(["invoice not found"]));
    }
}
db_test!(the_operator_lists_every_tenants_invoices_and_reads_one);

async fn the_invoice_list_stops_at_200(app: TestApp) {
    let t = app.two_tenants("op-inv-cap").await;
    crate::billing::standard_catalog(&app, "opinv").await;
    hub_billing::billing::set_catalog_status(&app.state().db, "opinv", "active", "op").await.unwrap();
    // 201 invoices, one a day of a past year.
    let first = chrono::NaiveDate::from_ymd_opt(2024, 1, 1).unwrap();
    for d in 0..201 {
        let day = (first + chrono::Duration::days(d)).to_string();
        invoice(&app, &t.a_token, &day, &day).await;
    }
    let (s, all) = app.op(Method::GET, "/admin/invoices", None).await;
    assert_eq!(s, StatusCode::OK);
    let rows = all["data"].as_array().unwrap();
    assert_eq!(rows.len(), 200);
    assert_eq!(rows[0]["period_start"], "2024-07-19", "the newest first");
}
db_test!(the_invoice_list_stops_at_200);
