//! sdk-data-credits: quotes with `affordable`, holds reserving credits (one
//! conditional UPDATE: parallel holds never overdraw), settlement consuming
//! at most the hold, release; the operator's grants and prices
//! (`/admin/data-credits/*`) and the tenant's read of the prices.

use hub_billing::data_credits::{grant_credits, set_price};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn credits_are_quoted_held_and_settled_within_the_balance(app: TestApp) {
    let t = app.two_tenants("credits").await;
    let a = t.a_token.as_str();
    let db = &app.state().db;
    set_price(db, "enrich.person", 3, "op-1").await.unwrap();
    let (s, b) = app.get("/api/data-credits/balance", Some(a)).await;
    assert_eq!((s, &b["data"]), (StatusCode::OK, &json!({ "balance": 0, "reserved": 0, "available": 0, "updated_at": null })));
    let (s, q) = app.post("/api/data-credits/quotes", Some(a), json!({ "capability": "enrich.person" })).await;
    assert_eq!(s, StatusCode::OK, "{q}");
    assert_eq!(
        q["data"],
        json!({ "capability": "enrich.person", "quantity": 1, "unit_price": 3, "credits": 3, "balance": 0, "reserved": 0, "available": 0, "affordable": false })
    );
    assert_eq!(grant_credits(db, t.a["tenant_id"].as_str().unwrap(), 10, "op-1", "welcome pack").await.unwrap().balance, 10);
    let (_, q) = app.post("/api/data-credits/quotes", Some(a), json!({ "capability": "enrich.person", "quantity": 2 })).await;
    assert_eq!((q["data"]["credits"].as_i64(), q["data"]["available"].as_i64(), q["data"]["affordable"].as_bool()), (Some(6), Some(10), Some(true)));

    let (s, h) = app.post("/api/data-credits/holds", Some(a), json!({ "capability": "enrich.person", "quantity": 2 })).await;
    assert_eq!(s, StatusCode::CREATED, "{h}");
    assert_eq!((h["data"]["credits"].as_i64(), h["data"]["status"].as_str(), &h["data"]["consumed"]), (Some(6), Some("held"), &json!(null)));
    let hold = h["data"]["hold_id"].as_str().unwrap().to_string();
    let (_, b) = app.get("/api/data-credits/balance", Some(a)).await;
    assert_eq!((b["data"]["balance"].as_i64(), b["data"]["reserved"].as_i64(), b["data"]["available"].as_i64()), (Some(10), Some(6), Some(4)));
    let (_, q) = app.post("/api/data-credits/quotes", Some(a), json!({ "capability": "enrich.person", "quantity": 2 })).await;
    assert_eq!(q["data"]["affordable"], false, "reserved credits are not available");
    let b = assert_error(app.post("/api/data-credits/holds", Some(a), json!({ "capability": "enrich.person", "quantity": 2 })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["insufficient credits: 6 needed, 4 available"]));

    let path = format!("/api/data-credits/holds/{hold}/settle");
    let settle = |body: serde_json::Value| app.post(&path, Some(a), body);
    let b = assert_error(settle(json!({ "credits": 7 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["credits must be at most the hold's 6"]));
    let b = assert_error(settle(json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["credits is required"]));
    let b = assert_error(settle(json!({ "credits": -1 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["credits must be an integer from 0 to 1000000000000"]));
    assert_error(app.post(&format!("/api/data-credits/holds/{hold}/settle"), Some(&t.b_token), json!({})).await, 404, "NotFound");
    assert_error(app.post(&format!("/api/data-credits/holds/{hold}/settle"), Some(&t.b_token), json!({ "credits": 1 })).await, 404, "NotFound");
    assert_error(app.post(&format!("/api/data-credits/holds/{hold}/release"), Some(&t.b_token), json!({})).await, 404, "NotFound");
    let (s, done) = settle(json!({ "credits": 4 })).await;
    assert_eq!((s, done["data"]["status"].as_str(), done["data"]["consumed"].as_i64()), (StatusCode::OK, Some("settled"), Some(4)), "{done}");
    let (_, b) = app.get("/api/data-credits/balance", Some(a)).await;
    assert_eq!((b["data"]["balance"].as_i64(), b["data"]["reserved"].as_i64(), b["data"]["available"].as_i64()), (Some(6), Some(0), Some(6)));
    assert_error(settle(json!({ "credits": 1 })).await, 409, "Conflict");
    assert_error(app.post(&format!("/api/data-credits/holds/{hold}/release"), Some(a), json!({})).await, 409, "Conflict");

    let (_, h) = app.post("/api/data-credits/holds", Some(a), json!({ "capability": "enrich.person" })).await;
    let other = h["data"]["hold_id"].as_str().unwrap();
    let (s, r) = app.post(&format!("/api/data-credits/holds/{other}/release"), Some(a), json!({})).await;
    assert_eq!((s, r["data"]["status"].as_str(), r["data"]["consumed"].clone()), (StatusCode::OK, Some("released"), json!(null)));
    let (_, b) = app.get("/api/data-credits/balance", Some(a)).await;
    assert_eq!((b["data"]["balance"].as_i64(), b["data"]["available"].as_i64()), (Some(6), Some(6)));
    assert_error(app.post("/api/data-credits/holds/nope/release", Some(a), json!({})).await, 404, "NotFound");

    let b = assert_error(app.post("/api/data-credits/quotes", Some(a), json!({ "capability": "unknown.thing" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["capability has no credit price"]));
    let b = assert_error(app.post("/api/data-credits/quotes", Some(a), json!({ "capability": "a b", "quantity": 0 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["quantity must be an integer from 1 to 1000000"]));
    let b = assert_error(app.post("/api/data-credits/holds", Some(a), json!({ "quantity": 1.5 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["capability is required", "quantity must be an integer from 1 to 1000000"]));
    let b = assert_error(app.post("/api/data-credits/quotes", Some(a), json!({ "capability": "a b", "quantity": 1 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["capability must be 1 to 128 letters, digits or . _ : / -"]));
    let (_, theirs) = app.get("/api/data-credits/balance", Some(&t.b_token)).await;
    assert_eq!(theirs["data"]["balance"], 0, "another tenant's credits are its own");
    let bad = grant_credits(db, t.a["tenant_id"].as_str().unwrap(), 0, "op-1", " ").await.unwrap_err();
    assert_eq!(bad.body()["details"], json!(["credits must be an integer from 1 to 1000000000000", "operator_id and reason are required"]));

    let bad = set_price(db, "no spaces", -1, "op-1").await.unwrap_err();
    assert_eq!(
        bad.body()["details"],
        json!(["capability must be 1 to 128 letters, digits or . _ : / -", "credits must be an integer from 0 to 1000000000000"])
    );

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |e: &str| events.iter().filter(|x| *x == e).count();
    assert_eq!((count("data-credits.credit.reserved.v1"), count("data-credits.credit.consumed.v1"), count("data-credits.credit.released.v1")), (2, 1, 1));
}
db_test!(credits_are_quoted_held_and_settled_within_the_balance);

async fn parallel_holds_never_overdraw(app: TestApp) {
    let t = app.two_tenants("creditrace").await;
    set_price(&app.state().db, "scan.page", 1, "op-1").await.unwrap();
    grant_credits(&app.state().db, t.a["tenant_id"].as_str().unwrap(), 10, "op-1", "race").await.unwrap();
    let calls = (0..20).map(|_| {
        let (app, token) = (&app, t.a_token.clone());
        async move { app.post("/api/data-credits/holds", Some(&token), json!({ "capability": "scan.page" })).await.0 }
    });
    let statuses = futures_util::future::join_all(calls).await;
    assert_eq!(statuses.iter().filter(|s| **s == StatusCode::CREATED).count(), 10, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == StatusCode::CONFLICT).count(), 10, "{statuses:?}");
    let (_, b) = app.get("/api/data-credits/balance", Some(&t.a_token)).await;
    assert_eq!((b["data"]["balance"].as_i64(), b["data"]["reserved"].as_i64(), b["data"]["available"].as_i64()), (Some(10), Some(10), Some(0)));
}
db_test!(parallel_holds_never_overdraw);

/// The actor of a tenant's (or the platform's) entries of `event_type`.
async fn actors(app: &TestApp, chain: &str, event_type: &str) -> Vec<String> {
    sqlx::query_scalar("SELECT actor_id FROM audit_entry WHERE tenant_id = $1 AND event_type = $2 ORDER BY pool_index, seq")
        .bind(chain)
        .bind(event_type)
        .fetch_all(&app.state().db.read)
        .await
        .unwrap()
}

async fn the_operator_grants_credits_and_the_tenant_spends_them(app: TestApp) {
    let t = app.two_tenants("grants").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].as_str().unwrap());
    let grant = |body: Value| app.op(Method::POST, "/admin/data-credits/grants", Some(body));
    let (s, g) = grant(json!({ "tenant_id": tenant, "credits": 10, "reason": "welcome pack", "operator_id": "op-ada" })).await;
    assert_eq!(s, StatusCode::CREATED, "{g}");
    let d = &g["data"];
    assert_eq!(
        (d["tenant_id"].as_str(), d["credits"].as_i64(), d["reason"].as_str(), d["operator_id"].as_str(), d["balance"].as_i64()),
        (Some(tenant), Some(10), Some("welcome pack"), Some("op-ada"), Some(10))
    );
    assert!(uuid::Uuid::parse_str(d["grant_id"].as_str().unwrap()).is_ok(), "{d}");
    assert!(d["created_at"].as_str().is_some_and(|c| c.ends_with('Z')), "{d}");
    let mut keys: Vec<&str> = d.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["balance", "created_at", "credits", "grant_id", "operator_id", "reason", "tenant_id"]);
    // Grants add up (one upsert: `balance + excluded.balance`).
    let (s, g) = grant(json!({ "tenant_id": tenant, "credits": 5, "reason": "top-up", "operator_id": "op-ada" })).await;
    assert_eq!((s, g["data"]["balance"].as_i64()), (StatusCode::CREATED, Some(15)), "{g}");
    let (_, b) = app.get("/api/data-credits/balance", Some(a)).await;
    assert_eq!((b["data"]["balance"].as_i64(), b["data"]["available"].as_i64()), (Some(15), Some(15)), "{b}");
    let (_, theirs) = app.get("/api/data-credits/balance", Some(&t.b_token)).await;
    assert_eq!(theirs["data"]["balance"], 0, "a grant is its tenant's alone");

    // Granted through the route, the credits buy holds.
    let (s, p) = app.op(Method::PUT, "/admin/data-credits/prices/scan.page", Some(json!({ "credits": 4, "operator_id": "op-ada" }))).await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    let (s, h) = app.post("/api/data-credits/holds", Some(a), json!({ "capability": "scan.page", "quantity": 3 })).await;
    assert_eq!((s, h["data"]["credits"].as_i64()), (StatusCode::CREATED, Some(12)), "{h}");
    assert_error(app.post("/api/data-credits/holds", Some(a), json!({ "capability": "scan.page" })).await, 409, "Conflict");

    // Every problem in one answer; nothing is granted.
    let b = assert_error(grant(json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["tenant_id is required", "credits is required", "reason is required", "operator_id is required"]));
    let long = "o".repeat(201);
    let b = assert_error(grant(json!({ "tenant_id": "nope", "credits": 0, "reason": "  ", "operator_id": long })).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!([
            "tenant_id must be a UUID",
            "credits must be an integer from 1 to 1000000000000",
            "reason is required",
            "operator_id must be at most 200 characters"
        ])
    );
    let b = assert_error(grant(json!({ "tenant_id": tenant, "credits": "10", "reason": "r", "operator_id": "o" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["credits must be an integer from 1 to 1000000000000"]));
    let b = assert_error(grant(json!({ "tenant_id": tenant, "credits": 1.5, "reason": "r", "operator_id": "o" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["credits must be an integer from 1 to 1000000000000"]));
    // A tenant_id that names no tenant: 400, as the other operator routes
    // that take a tenant in their body (byok bindings, hard-cap overrides).
    let unknown = uuid::Uuid::now_v7().to_string();
    let b = assert_error(grant(json!({ "tenant_id": unknown, "credits": 1, "reason": "r", "operator_id": "o" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["tenant_id must name an existing tenant"]));
    let no_rows: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM data_credits_grant WHERE tenant_id = $1").bind(&unknown).fetch_one(&app.state().db.read).await.unwrap();
    assert_eq!(no_rows, 0);

    // The operator's credential only.
    let body = json!({ "tenant_id": tenant, "credits": 1000, "reason": "self-service", "operator_id": "me" });
    let b = assert_error(app.post("/admin/data-credits/grants", Some(a), body.clone()).await, 401, "Unauthorized");
    assert_eq!(b["details"], json!(["admin token required"]));
    assert_error(app.post("/admin/data-credits/grants", None, body.clone()).await, 401, "Unauthorized");
    assert_error(app.operator("not-the-ops-token", Method::POST, "/admin/data-credits/grants", Some(body)).await, 401, "Unauthorized");
    let (_, b) = app.get("/api/data-credits/balance", Some(a)).await;
    assert_eq!(b["data"]["balance"], 15, "no refused grant added anything: {b}");

    // The ledger keeps every grant; each is an event in the tenant's chain,
    // the operator credential its actor.
    let ledger: Vec<(i64, String, String)> =
        sqlx::query_as("SELECT credits, reason, operator_id FROM data_credits_grant WHERE tenant_id = $1 ORDER BY created_at, grant_id")
            .bind(tenant)
            .fetch_all(&app.state().db.read)
            .await
            .unwrap();
    assert_eq!(ledger, [(10, "welcome pack".to_string(), "op-ada".to_string()), (5, "top-up".to_string(), "op-ada".to_string())]);
    assert_eq!(actors(&app, tenant, "data-credits.credit.granted.v1").await, ["break-glass", "break-glass"]);
    assert!(app.events_of(&t.b["tenant_id"]).await.iter().all(|e| e != "data-credits.credit.granted.v1"), "not in another tenant's chain");
    let payload: String =
        sqlx::query_scalar("SELECT payload FROM audit_entry WHERE tenant_id = $1 AND event_type = 'data-credits.credit.granted.v1' ORDER BY seq LIMIT 1")
            .bind(tenant)
            .fetch_one(&app.state().db.read)
            .await
            .unwrap();
    let payload: Value = serde_json::from_str(&payload).unwrap();
    assert_eq!((payload["credits"].as_i64(), payload["balance"].as_i64(), payload["operator_id"].as_str()), (Some(10), Some(10), Some("op-ada")), "{payload}");

    // The library door records the same event, its operator as actor.
    assert_eq!(grant_credits(&app.state().db, tenant, 1, "op-lib", "test").await.unwrap().balance, 16);
    assert_eq!(actors(&app, tenant, "data-credits.credit.granted.v1").await, ["break-glass", "break-glass", "op-lib"]);
}
db_test!(the_operator_grants_credits_and_the_tenant_spends_them);

async fn the_operator_prices_capabilities_and_tenants_read_the_prices(app: TestApp) {
    let t = app.two_tenants("prices").await;
    let a = t.a_token.as_str();
    let put = |capability: &str, body: Value| app.op(Method::PUT, format!("/admin/data-credits/prices/{capability}"), Some(body));
    let (s, p) = put("enrich.person", json!({ "credits": 3, "operator_id": "op-ada" })).await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    assert_eq!(
        (p["data"]["capability"].as_str(), p["data"]["credits"].as_i64(), p["data"]["updated_by"].as_str()),
        (Some("enrich.person"), Some(3), Some("op-ada"))
    );
    // A second set replaces the price: 200.
    let (s, p) = put("enrich.person", json!({ "credits": 4, "operator_id": "op-bob" })).await;
    assert_eq!((s, p["data"]["credits"].as_i64(), p["data"]["updated_by"].as_str()), (StatusCode::OK, Some(4), Some("op-bob")), "{p}");
    // A `/` of a capability is percent-encoded in the path.
    let (s, p) = put("scan:page%2Fv2", json!({ "credits": 0, "operator_id": "op-ada" })).await;
    assert_eq!(
        (s, p["data"]["capability"].as_str(), p["data"]["credits"].as_i64()),
        (StatusCode::CREATED, Some("scan:page/v2"), Some(0)),
        "a free capability: {p}"
    );
    let (s, p) = put("a.first", json!({ "credits": 1, "operator_id": "op-ada" })).await;
    assert_eq!(s, StatusCode::CREATED, "{p}");

    // Tenants read the platform's prices, by capability, paginated.
    let (s, l) = app.get("/api/data-credits/prices", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    assert_eq!(l["total"], 3);
    let listed: Vec<(&str, i64)> = l["data"].as_array().unwrap().iter().map(|p| (p["capability"].as_str().unwrap(), p["credits"].as_i64().unwrap())).collect();
    assert_eq!(listed, [("a.first", 1), ("enrich.person", 4), ("scan:page/v2", 0)]);
    let mut keys: Vec<&str> = l["data"][0].as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["capability", "credits", "updated_at"], "who priced it is the operator's business");
    let (_, l) = app.get("/api/data-credits/prices?limit=1&offset=1", Some(&t.b_token)).await;
    assert_eq!((l["total"].as_i64(), l["data"].as_array().unwrap().len(), l["data"][0]["capability"].as_str()), (Some(3), 1, Some("enrich.person")));
    assert_error(app.get("/api/data-credits/prices?limit=x", Some(a)).await, 400, "ValidationError");
    assert_error(app.get("/api/data-credits/prices", None).await, 401, "Unauthorized");
    let (s, q) = app.post("/api/data-credits/quotes", Some(a), json!({ "capability": "enrich.person", "quantity": 2 })).await;
    assert_eq!((s, q["data"]["unit_price"].as_i64(), q["data"]["credits"].as_i64()), (StatusCode::OK, Some(4), Some(8)), "the new price: {q}");

    // Every problem in one answer; nothing is priced.
    let b = assert_error(put("a%20b", json!({ "credits": -1 })).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!(["capability must be 1 to 128 letters, digits or . _ : / -", "credits must be an integer from 0 to 1000000000000", "operator_id is required"])
    );
    let b = assert_error(put("x", json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["credits is required", "operator_id is required"]));
    let b = assert_error(put("x", json!({ "credits": 1000000000001_i64, "operator_id": "o".repeat(201) })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["credits must be an integer from 0 to 1000000000000", "operator_id must be at most 200 characters"]));
    let too_long = "c".repeat(129);
    let b = assert_error(put(&too_long, json!({ "credits": 1, "operator_id": "o" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["capability must be 1 to 128 letters, digits or . _ : / -"]));

    // The operator's credential only.
    let body = json!({ "credits": 0, "operator_id": "me" });
    let b = assert_error(app.call(Method::PUT, "/admin/data-credits/prices/enrich.person", Some(a), Some(body.clone())).await, 401, "Unauthorized");
    assert_eq!(b["details"], json!(["admin token required"]));
    assert_error(app.call(Method::PUT, "/admin/data-credits/prices/enrich.person", None, Some(body)).await, 401, "Unauthorized");
    let (_, l) = app.get("/api/data-credits/prices", Some(a)).await;
    assert_eq!((l["total"].as_i64(), l["data"][1]["credits"].as_i64()), (Some(3), Some(4)), "no refused set changed anything: {l}");

    // Each set is an event in the platform chain, none in a tenant's.
    let sets: Vec<(String, String)> = app.platform_events().await.into_iter().filter(|(e, _)| e == "data-credits.price.set.v1").collect();
    assert_eq!(sets.len(), 4, "{sets:?}");
    assert!(sets.iter().all(|(_, actor)| actor == "break-glass"), "{sets:?}");
    assert!(app.events_of(&t.a["tenant_id"]).await.iter().all(|e| e != "data-credits.price.set.v1"));
    let (_, written) = set_price(&app.state().db, "enrich.person", 5, "op-lib").await.unwrap();
    assert_eq!(written, hub_kernel::db::change::Written::Found);
    assert_eq!(app.platform_events().await.last().map(|(e, a)| (e.as_str(), a.as_str())), Some(("data-credits.price.set.v1", "op-lib")));
}
db_test!(the_operator_prices_capabilities_and_tenants_read_the_prices);

async fn holds_are_listed_and_read_and_the_ledger_sums_to_the_balance(app: TestApp) {
    let t = app.two_tenants("credit-lists").await;
    let (a, b) = (t.a_token.as_str(), t.b_token.as_str());
    let db = &app.state().db;
    let tenant = t.a["tenant_id"].as_str().unwrap();
    set_price(db, "geo.lookup", 2, "op-1").await.unwrap();
    set_price(db, "kyc.check", 5, "op-1").await.unwrap();
    let g1 = grant_credits(db, tenant, 50, "op-1", "welcome").await.unwrap();
    grant_credits(db, t.b["tenant_id"].as_str().unwrap(), 50, "op-1", "welcome").await.unwrap();
    let hold = |capability: &str| app.post("/api/data-credits/holds", Some(a), json!({ "capability": capability }));
    let id = |v: &Value| v["data"]["hold_id"].as_str().unwrap().to_string();
    let (_, h1) = hold("geo.lookup").await;
    let (_, h2) = hold("kyc.check").await;
    let (_, h3) = hold("geo.lookup").await;
    let (h1, h2, h3) = (id(&h1), id(&h2), id(&h3));
    app.post("/api/data-credits/holds", Some(b), json!({ "capability": "geo.lookup" })).await;
    let (_, settled) = app.post(&format!("/api/data-credits/holds/{h1}/settle"), Some(a), json!({ "credits": 1 })).await;
    let (_, released) = app.post(&format!("/api/data-credits/holds/{h2}/release"), Some(a), json!({})).await;

    // Holds: newest first, by status and capability; one read.
    let (s, l) = app.get("/api/data-credits/holds", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    let ids: Vec<&str> = l["data"].as_array().unwrap().iter().map(|h| h["hold_id"].as_str().unwrap()).collect();
    assert_eq!((l["total"].as_i64(), ids), (Some(3), vec![h3.as_str(), h2.as_str(), h1.as_str()]));
    let (_, l) = app.get("/api/data-credits/holds?status=held", Some(a)).await;
    assert_eq!((l["total"].as_i64(), l["data"][0]["hold_id"].as_str()), (Some(1), Some(h3.as_str())), "the open ones");
    let (_, l) = app.get("/api/data-credits/holds?capability=geo.lookup&status=settled", Some(a)).await;
    assert_eq!((l["total"].as_i64(), &l["data"][0]), (Some(1), &settled["data"]));
    let (_, l) = app.get("/api/data-credits/holds?limit=1&offset=1", Some(a)).await;
    assert_eq!((l["total"].as_i64(), &l["data"][0]), (Some(3), &released["data"]));
    let bad = assert_error(app.get("/api/data-credits/holds?status=open", Some(a)).await, 400, "ValidationError");
    assert_eq!(bad["details"].as_array().unwrap().len(), 1, "{bad}");
    let bad = assert_error(app.get("/api/data-credits/holds?capability=a%20b", Some(a)).await, 400, "ValidationError");
    assert_eq!(bad["details"], json!(["capability must be 1 to 128 letters, digits or . _ : / -"]));
    let (s, one) = app.get(&format!("/api/data-credits/holds/{h1}"), Some(a)).await;
    assert_eq!((s, &one["data"]), (StatusCode::OK, &settled["data"]));
    assert_error(app.get(&format!("/api/data-credits/holds/{h1}"), Some(b)).await, 404, "NotFound");
    assert_error(app.get("/api/data-credits/holds/nope", Some(a)).await, 404, "NotFound");

    // The ledger: grants and consumption (a release moves no credit).
    let g2 = grant_credits(db, tenant, 7, "op-2", "top-up").await.unwrap();
    let (s, l) = app.get("/api/data-credits/ledger", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    assert_eq!(l["total"], 3, "{l}");
    let entries = l["data"].as_array().unwrap();
    assert_eq!(
        (entries[0]["entry_id"].as_str(), entries[0]["kind"].as_str(), entries[0]["credits"].as_i64(), entries[0]["reason"].as_str()),
        (Some(g2.grant_id.to_string().as_str()), Some("grant"), Some(7), Some("top-up"))
    );
    assert_eq!(
        (entries[1]["entry_id"].as_str(), entries[1]["kind"].as_str(), entries[1]["credits"].as_i64(), entries[1]["capability"].as_str()),
        (Some(h1.as_str()), Some("consumption"), Some(-1), Some("geo.lookup"))
    );
    assert_eq!((entries[2]["entry_id"].as_str(), entries[2]["operator_id"].as_str()), (Some(g1.grant_id.to_string().as_str()), Some("op-1")));
    let sum: i64 = entries.iter().map(|e| e["credits"].as_i64().unwrap()).sum();
    let (_, balance) = app.get("/api/data-credits/balance", Some(a)).await;
    assert_eq!(balance["data"]["balance"].as_i64(), Some(sum), "the ledger sums to the balance");
    let (_, l) = app.get("/api/data-credits/ledger?kind=consumption", Some(a)).await;
    assert_eq!(l["total"], 1);
    let (_, l) = app.get("/api/data-credits/ledger?kind=grant&limit=1", Some(a)).await;
    assert_eq!((l["total"].as_i64(), l["data"].as_array().unwrap().len()), (Some(2), 1));
    assert_error(app.get("/api/data-credits/ledger?kind=refund", Some(a)).await, 400, "ValidationError");
    let (_, l) = app.get("/api/data-credits/ledger", Some(b)).await;
    assert_eq!(l["total"], 1, "another tenant's ledger is its own");
}
db_test!(holds_are_listed_and_read_and_the_ledger_sums_to_the_balance);
