//! sdk-data-credits: quotes with `affordable`, holds reserving credits (one
//! conditional UPDATE: parallel holds never overdraw), settlement consuming
//! at most the hold, release.

use hub_billing::data_credits::{grant_credits, set_price};
use reqwest::StatusCode;
use serde_json::json;

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
    assert_eq!(grant_credits(db, t.a["tenant_id"].as_str().unwrap(), 10, "op-1", "welcome pack").await.unwrap(), 10);
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
    assert_eq!(b["details"], json!(["capability must be 1 to 128 letters, digits or . _ : / -", "quantity must be an integer from 1 to 1000000"]));
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
