//! The operator's pricing: catalogs (409 on a taken version), rates
//! (idempotent upsert), status (404 'catalog not found', activation in the
//! platform chain), and hard-cap overrides that metering honours.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*, meter::usage, operator::BREAK_GLASS};

impl TestApp {
    /// An operator request with the break-glass secret.
    pub async fn op(&self, method: Method, path: impl AsRef<str>, body: Option<Value>) -> (StatusCode, Value) {
        self.operator(BREAK_GLASS, method, path.as_ref(), body).await
    }
}

async fn the_operator_creates_catalogs_sets_rates_and_status(app: TestApp) {
    let new = |body: Value| app.op(Method::POST, "/admin/meter/pricing-catalogs", Some(body));
    let (s, c) = new(json!({ "catalog_id": "pro", "version": 1, "operator_id": "op-ada" })).await;
    assert_eq!(s, StatusCode::OK, "{c}");
    assert_eq!(
        (c["data"]["catalog_id"].as_str(), c["data"]["version"].as_i64(), c["data"]["status"].as_str(), c["data"]["created_by"].as_str()),
        (Some("pro"), Some(1), Some("draft"), Some("op-ada"))
    );
    assert_eq!(c["data"]["currency"], "USD");
    assert_eq!(new(json!({ "catalog_id": "pro", "version": 2, "currency": "EUR", "operator_id": "op-ada" })).await.0, StatusCode::OK);
    assert_eq!(new(json!({ "catalog_id": "basic", "version": 1, "operator_id": "op-ada" })).await.0, StatusCode::OK);
    // RULINGS 1: a taken (catalog_id, version) is 409, not 500.
    assert_error(new(json!({ "catalog_id": "pro", "version": 1, "operator_id": "op-ada" })).await, 409, "Conflict");
    let b = assert_error(new(json!({ "catalog_id": " ", "version": 0 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["catalog_id is required", "version must be an integer from 1 to 2147483647", "operator_id is required"]));
    let b = assert_error(new(json!({ "catalog_id": "x" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["version is required", "operator_id is required"]));
    let b = assert_error(new(json!({ "catalog_id": "a b", "version": 1, "currency": "usd", "operator_id": "o" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["catalog_id must be 1 to 128 letters, digits or . _ -", "currency must be an ISO 4217 code (three capital letters)"]));

    // Every version of every status, by catalog then version.
    let (s, l) = app.op(Method::GET, "/admin/meter/pricing-catalogs", None).await;
    assert_eq!(s, StatusCode::OK);
    let listed: Vec<(String, i64)> =
        l["data"].as_array().unwrap().iter().map(|c| (c["catalog_id"].as_str().unwrap().to_string(), c["version"].as_i64().unwrap())).collect();
    assert_eq!(listed, [("basic".to_string(), 1), ("pro".to_string(), 1), ("pro".to_string(), 2)]);

    // A catalog without rates is still 200; its latest version is shown.
    let (s, v) = app.op(Method::GET, "/admin/meter/pricing-catalogs/pro", None).await;
    assert_eq!((s, v["data"]["catalog"]["version"].as_i64(), v["data"]["rates"].clone()), (StatusCode::OK, Some(2), json!([])));
    let b = assert_error(app.op(Method::GET, "/admin/meter/pricing-catalogs/nope", None).await, 404, "NotFound");
    assert_eq!(b["details"], json!(["catalog not found"]));

    // Rates: an idempotent upsert into the latest version.
    let put = |sku: &str, body: Value| app.op(Method::PUT, format!("/admin/meter/pricing-catalogs/pro/rates/{sku}"), Some(body));
    let tiers = json!([{ "up_to": 100, "unit_price": 3 }, { "up_to": null, "unit_price": 1 }]);
    let body = json!({ "unit": "call", "mode": "tiered_per_call", "tiers": tiers, "operator_id": "op-ada" });
    let (s, r) = put("api.call", body.clone()).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!((r["data"]["version"].as_i64(), r["data"]["tiers"].clone(), r["data"]["price"].clone()), (Some(2), tiers.clone(), Value::Null));
    let (s, again) = put("api.call", body).await;
    assert_eq!((s, again["data"]["tiers"].clone()), (StatusCode::OK, tiers));
    let (s, r) = put("llm", json!({ "unit": "token", "mode": "passthrough_plus_margin", "price": 3, "margin_pct": 12.5, "operator_id": "op-ada" })).await;
    assert_eq!((s, r["data"]["margin_pct"].as_f64(), r["data"]["updated_by"].as_str()), (StatusCode::OK, Some(12.5), Some("op-ada")));
    let (_, v) = app.op(Method::GET, "/admin/meter/pricing-catalogs/pro", None).await;
    let skus: Vec<&str> = v["data"]["rates"].as_array().unwrap().iter().map(|r| r["sku"].as_str().unwrap()).collect();
    assert_eq!(skus, ["api.call", "llm"], "by sku, one row a sku");
    let b = assert_error(put("x", json!({ "mode": "weekly", "price": "3" })).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!([
            "unit is required",
            "mode must be one of: flat_per_call, tiered_per_call, passthrough_plus_margin, per_unit, bundled_subscription, free_internal",
            "price must be an integer from 0 to 1000000000000",
            "operator_id is required"
        ])
    );
    let b = assert_error(put("x", json!({ "unit": "call", "mode": "weekly", "operator_id": "o" })).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!(["mode must be one of: flat_per_call, tiered_per_call, passthrough_plus_margin, per_unit, bundled_subscription, free_internal"])
    );
    let b = assert_error(put("flat", json!({ "unit": "call", "mode": "flat_per_call", "operator_id": "o" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["price is required for mode flat_per_call"]));
    let r = app.op(Method::PUT, "/admin/meter/pricing-catalogs/nope/rates/x", Some(json!({ "unit": "u", "mode": "free_internal", "operator_id": "o" }))).await;
    assert_eq!(assert_error(r, 404, "NotFound")["details"], json!(["catalog not found"]));
    // 404 before the body is looked at.
    let r = app.op(Method::PUT, "/admin/meter/pricing-catalogs/nope/rates/x", Some(json!({}))).await;
    assert_eq!(assert_error(r, 404, "NotFound")["details"], json!(["catalog not found"]));

    // Status: any of the three from any state; bare success.
    let status = |catalog: &str, body: Value| app.op(Method::PATCH, format!("/admin/meter/pricing-catalogs/{catalog}/status"), Some(body));
    let (s, done) = status("pro", json!({ "status": "active", "operator_id": "op-ada" })).await;
    assert_eq!((s, done), (StatusCode::OK, json!({ "success": true })));
    for next in ["retired", "active", "active", "draft"] {
        assert_eq!(status("pro", json!({ "status": next, "operator_id": "op-ada" })).await.0, StatusCode::OK, "{next}");
    }
    let (_, v) = app.op(Method::GET, "/admin/meter/pricing-catalogs/pro", None).await;
    assert_eq!(v["data"]["catalog"]["status"], "draft");
    // RULINGS 1: an unknown catalog is 404, not 200.
    let b = assert_error(status("nope", json!({ "status": "active", "operator_id": "o" })).await, 404, "NotFound");
    assert_eq!(b["details"], json!(["catalog not found"]));
    let b = assert_error(status("nope", json!({ "status": "gone" })).await, 404, "NotFound");
    assert_eq!(b["details"], json!(["catalog not found"]));
    let b = assert_error(status("pro", json!({ "status": "gone" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["status must be one of: draft, active, retired", "operator_id is required"]));
    let b = assert_error(status("pro", json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["status is required", "operator_id is required"]));

    let activated = app.platform_events().await.into_iter().filter(|(e, _)| e == "billing.catalog.activated.v1").collect::<Vec<_>>();
    assert_eq!(activated.len(), 3, "each activation: {activated:?}");
    assert!(activated.iter().all(|(_, who)| who == "break-glass"));
}
db_test!(the_operator_creates_catalogs_sets_rates_and_status);

async fn a_hardcap_override_lifts_the_429_until_it_ends(app: TestApp) {
    let t = app.two_tenants("op-cap").await;
    let a = t.a_token.as_str();
    let tenant = t.a["tenant_id"].as_str().unwrap();
    let asset = uuid::Uuid::now_v7().to_string();
    let event = |quantity: i64, key: &str| json!({ "asset_id": asset, "sku": "sms", "quantity": quantity, "idempotency_key": key });
    hub_billing::meter::set_hardcap(&app.state().db, tenant, "sms", 5, "op-1").await.unwrap();
    assert_eq!(usage(&app, a, event(5, "c1")).await.0, StatusCode::CREATED);
    assert_error(usage(&app, a, event(1, "c2")).await, 429, "HardCapReached");

    let until = hub_kernel::db::format_time(chrono::Utc::now() + chrono::Duration::hours(2));
    let body = json!({ "tenant_id": tenant, "sku": "sms", "until": until, "operator_id": "op-ada", "reason": "launch day" });
    let res = app
        .client
        .post(format!("{}/admin/meter/hardcap/override", app.base))
        .header("x-admin-ops-token", BREAK_GLASS)
        .header("x-trace-id", "trace-42")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let o: Value = res.json().await.unwrap();
    assert_eq!(
        (o["data"]["tenant_id"].as_str(), o["data"]["sku"].as_str(), o["data"]["until"].as_str(), o["data"]["operator_id"].as_str()),
        (Some(tenant), Some("sms"), Some(until.as_str()), Some("op-ada"))
    );
    assert_eq!((o["data"]["reason"].as_str(), o["data"]["trace_id"].as_str()), (Some("launch day"), Some("trace-42")));
    // Metering honours it: the refused usage is admitted now.
    let (s, e) = usage(&app, a, event(1, "c2")).await;
    assert_eq!(s, StatusCode::CREATED, "{e}");
    assert_eq!(usage(&app, a, event(50, "c3")).await.0, StatusCode::CREATED);
    // Without a trace header none is kept.
    let (s, o) = app.op(Method::POST, "/admin/meter/hardcap/override", Some(body.clone())).await;
    assert_eq!((s, o["data"]["trace_id"].clone()), (StatusCode::OK, Value::Null));
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "billing.hardcap.overridden.v1").count(), 2, "in the tenant's chain: {events:?}");
    let actor: String = sqlx::query_scalar("SELECT actor_id FROM audit_entry WHERE tenant_id = $1 AND event_type = 'billing.hardcap.overridden.v1' LIMIT 1")
        .bind(tenant)
        .fetch_one(&app.state().db.read)
        .await
        .unwrap();
    assert_eq!(actor, "break-glass", "the operator credential acts");

    let over = |body: Value| app.op(Method::POST, "/admin/meter/hardcap/override", Some(body));
    let b = assert_error(over(json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["tenant_id is required", "sku is required", "until is required", "operator_id is required", "reason is required"]));
    let b = assert_error(
        over(json!({ "tenant_id": "nope", "sku": "a b", "until": "2020-01-01T00:00:00Z", "operator_id": "o", "reason": "r" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["tenant_id must be a UUID"]));
    let b = assert_error(
        over(json!({ "tenant_id": tenant, "sku": "sms", "until": "2020-01-01T00:00:00Z", "operator_id": "o", "reason": "r" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["until must be in the future"]));
    let b =
        assert_error(over(json!({ "tenant_id": tenant, "sku": "sms", "until": "tomorrow", "operator_id": "o", "reason": "r" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["until must be an RFC 3339 timestamp"]));
    let unknown = uuid::Uuid::now_v7().to_string();
    let b = assert_error(over(json!({ "tenant_id": unknown, "sku": "sms", "until": until, "operator_id": "o", "reason": "r" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["tenant_id must name an existing tenant"]));
    let b = assert_error(over(json!({ "tenant_id": tenant, "sku": "a b", "until": until, "operator_id": "o", "reason": "r" })).await, 400, "ValidationError");
    assert!(b["details"][0].as_str().unwrap().starts_with("sku must be"), "{b}");

    // Once it has ended, the cap holds again.
    sqlx::query("UPDATE meter_hardcap_override SET until = $1 WHERE tenant_id = $2")
        .bind("2020-01-01T00:00:00.000000Z")
        .bind(tenant)
        .execute(app.state().db.writer())
        .await
        .unwrap();
    assert_error(usage(&app, a, event(1, "c4")).await, 429, "HardCapReached");
}
db_test!(a_hardcap_override_lifts_the_429_until_it_ends);

async fn the_operator_sets_lists_and_removes_hard_caps(app: TestApp) {
    let t = app.two_tenants("op-caps").await;
    let a = t.a_token.as_str();
    let (tenant, other) = (t.a["tenant_id"].as_str().unwrap(), t.b["tenant_id"].as_str().unwrap());
    let asset = uuid::Uuid::now_v7().to_string();
    let event = |quantity: i64, key: &str| json!({ "asset_id": asset, "sku": "sms", "quantity": quantity, "idempotency_key": key });
    let put = |tenant: &str, sku: &str, body: Value| app.op(Method::PUT, format!("/admin/meter/hardcaps/{tenant}/{sku}"), Some(body));

    // 201 the first set, 200 a replacement; the cap applies at once.
    let (s, c) = put(tenant, "sms", json!({ "monthly_units": 5, "operator_id": "op-ada" })).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    assert_eq!(
        (c["data"]["tenant_id"].as_str(), c["data"]["sku"].as_str(), c["data"]["monthly_units"].as_i64(), c["data"]["set_by"].as_str()),
        (Some(tenant), Some("sms"), Some(5), Some("op-ada"))
    );
    assert_eq!(usage(&app, a, event(5, "h1")).await.0, StatusCode::CREATED);
    assert_error(usage(&app, a, event(1, "h2")).await, 429, "HardCapReached");
    let (s, c) = put(tenant, "sms", json!({ "monthly_units": 8, "operator_id": "op-bo" })).await;
    assert_eq!((s, c["data"]["monthly_units"].as_i64(), c["data"]["set_by"].as_str()), (StatusCode::OK, Some(8), Some("op-bo")), "{c}");
    assert_eq!(usage(&app, a, event(1, "h2")).await.0, StatusCode::CREATED, "the raised cap admits more");
    // A `/` in a sku is percent-encoded.
    assert_eq!(put(tenant, "gpu%2Fs", json!({ "monthly_units": 0, "operator_id": "op-ada" })).await.0, StatusCode::CREATED);
    assert_eq!(put(other, "sms", json!({ "monthly_units": 1, "operator_id": "op-ada" })).await.0, StatusCode::CREATED);

    // The list: every tenant's, one tenant's, one sku's; by tenant then sku.
    let (s, l) = app.op(Method::GET, "/admin/meter/hardcaps", None).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    assert_eq!(l["total"], 3);
    let (_, l) = app.op(Method::GET, format!("/admin/meter/hardcaps?tenant_id={tenant}"), None).await;
    let skus: Vec<&str> = l["data"].as_array().unwrap().iter().map(|c| c["sku"].as_str().unwrap()).collect();
    assert_eq!((l["total"].as_i64(), skus), (Some(2), vec!["gpu/s", "sms"]));
    let (_, l) = app.op(Method::GET, "/admin/meter/hardcaps?sku=sms&limit=1", None).await;
    assert_eq!((l["total"].as_i64(), l["data"].as_array().unwrap().len()), (Some(2), 1));
    let b = assert_error(app.op(Method::GET, "/admin/meter/hardcaps?tenant_id=nope&sku=a%20b", None).await, 400, "ValidationError");
    assert!(b["details"].as_array().unwrap().iter().any(|d| d.as_str().unwrap().starts_with("tenant_id")), "{b}");
    // The tenant reads its caps with what is left.
    let (_, mine) = app.get("/api/meter/hardcaps", Some(a)).await;
    assert_eq!((mine["total"].as_i64(), mine["data"][1]["remaining"].as_i64()), (Some(2), Some(2)), "{mine}");

    // Every problem in one 400; an unknown tenant is 404.
    let b = assert_error(put(tenant, "a%20b", json!({ "monthly_units": -1 })).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!(["sku must be 1 to 128 letters, digits or . _ : / -", "monthly_units must be an integer from 0 to 1000000000000", "operator_id is required"])
    );
    let unknown = uuid::Uuid::now_v7().to_string();
    assert_error(put(&unknown, "sms", json!({ "monthly_units": 1, "operator_id": "o" })).await, 404, "NotFound");
    assert_error(put("nope", "sms", json!({ "monthly_units": 1, "operator_id": "o" })).await, 404, "NotFound");

    // Removing: 200 once, then 404; the tenant's usage is no longer capped.
    let (s, r) = app.op(Method::DELETE, format!("/admin/meter/hardcaps/{tenant}/sms"), None).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["data"], json!({ "tenant_id": tenant, "sku": "sms", "monthly_units": 8, "removed": true }));
    assert_error(app.op(Method::DELETE, format!("/admin/meter/hardcaps/{tenant}/sms"), None).await, 404, "NotFound");
    assert_error(app.op(Method::DELETE, format!("/admin/meter/hardcaps/{unknown}/sms"), None).await, 404, "NotFound");
    assert_eq!(usage(&app, a, event(100, "h3")).await.0, StatusCode::CREATED);
    let (_, l) = app.op(Method::GET, format!("/admin/meter/hardcaps?tenant_id={tenant}"), None).await;
    assert_eq!(l["total"], 1);

    // Each set and removal is in the tenant's chain, the operator acting.
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "billing.hardcap.set.v1").count(), 3, "{events:?}");
    assert_eq!(events.iter().filter(|e| *e == "billing.hardcap.removed.v1").count(), 1, "{events:?}");
    let actors: Vec<String> = sqlx::query_scalar("SELECT actor_id FROM audit_entry WHERE tenant_id = $1 AND event_type LIKE 'billing.hardcap.%'")
        .bind(tenant)
        .fetch_all(&app.state().db.read)
        .await
        .unwrap();
    assert!(actors.iter().all(|a| a == "break-glass"), "{actors:?}");
    assert_eq!(app.events_of(&t.b["tenant_id"]).await.iter().filter(|e| *e == "billing.hardcap.set.v1").count(), 1);
}
db_test!(the_operator_sets_lists_and_removes_hard_caps);
