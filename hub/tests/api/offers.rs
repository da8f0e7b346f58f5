//! sdk-offer-catalog: offers one slug each per tenant, priced in integer
//! minor units of an ISO 4217 currency, listed newest first.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn offers_are_created_once_per_slug_and_listed_newest_first(app: TestApp) {
    let t = app.two_tenants("offers").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].clone());
    let (s, o) = app
        .post(
            "/api/offers",
            Some(a),
            json!({ "tenant_id": tenant, "name": "Annual plan", "slug": "annual", "description": "twelve months", "price_minor": 9900, "currency": "EUR" }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{o}");
    let first = o["data"]["offer_id"].as_str().unwrap().to_string();
    assert_eq!(
        (o["data"]["slug"].as_str(), o["data"]["price_minor"].as_i64(), o["data"]["currency"].as_str(), o["data"]["status"].as_str()),
        (Some("annual"), Some(9900), Some("EUR"), Some("active"))
    );
    // Free and in draft: no price, no currency.
    let (s, o) = app.post("/api/offers", Some(a), json!({ "tenant_id": tenant, "name": "Trial", "slug": "trial", "status": "draft" })).await;
    assert_eq!(s, StatusCode::CREATED, "{o}");
    let second = o["data"]["offer_id"].as_str().unwrap().to_string();
    assert_eq!((o["data"]["price_minor"].clone(), o["data"]["currency"].clone()), (Value::Null, Value::Null));

    let b = assert_error(app.post("/api/offers", Some(a), json!({ "tenant_id": tenant, "name": "Again", "slug": "annual" })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the tenant has an offer with the slug annual"]));
    // Another tenant has slugs of its own.
    let (s, _) = app.post("/api/offers", Some(&t.b_token), json!({ "tenant_id": t.b["tenant_id"], "name": "B annual", "slug": "annual" })).await;
    assert_eq!(s, StatusCode::CREATED);

    let b = assert_error(
        app.post("/api/offers", Some(a), json!({ "slug": "x".repeat(129), "price_minor": -1, "status": "retired" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "tenant_id is required",
            "name is required",
            "slug must be at most 128 characters",
            "price_minor must be an integer from 0 to 1000000000000000",
            "status must be one of: draft, active"
        ])
    );
    let b = assert_error(
        app.post("/api/offers", Some(a), json!({ "tenant_id": tenant, "name": "x", "slug": 7, "price_minor": 1.5 })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["slug must be a string", "price_minor must be an integer from 0 to 1000000000000000"]));
    // Matching its schema, the body still has a slug of the allowed characters, and a currency with a price.
    let b = assert_error(
        app.post("/api/offers", Some(a), json!({ "tenant_id": tenant, "name": "x", "slug": "Not A Slug", "price_minor": 100 })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["slug must be 1 to 128 of a-z, 0-9, '.', '_' or '-'", "currency is required with price_minor"]));
    let b = assert_error(
        app.post("/api/offers", Some(a), json!({ "tenant_id": tenant, "name": "x", "slug": "x", "currency": "EURO" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["currency must be an ISO 4217 code (EUR, USD, ...)"]));
    let b = assert_error(
        app.post("/api/offers", Some(a), json!({ "tenant_id": tenant, "name": "x", "slug": "x", "currency": "USD" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["price_minor is required with currency"]));
    assert_error(app.post("/api/offers", Some(a), json!({ "tenant_id": t.b["tenant_id"], "name": "x", "slug": "x" })).await, 403, "TenantMismatch");

    let (s, l) = app.get("/api/offers", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    let ids: Vec<&str> = l["data"].as_array().unwrap().iter().map(|o| o["offer_id"].as_str().unwrap()).collect();
    assert_eq!((ids, l["total"].as_i64()), (vec![second.as_str(), first.as_str()], Some(2)));
    let (_, l) = app.get(&format!("/api/offers?tenant_id={}&status=active&limit=1", tenant.as_str().unwrap()), Some(a)).await;
    assert_eq!((l["data"][0]["offer_id"].as_str(), l["total"].as_i64()), (Some(first.as_str()), Some(1)));
    let (_, l) = app.get("/api/offers?limit=1&offset=1", Some(a)).await;
    assert_eq!((l["data"][0]["offer_id"].as_str(), l["total"].as_i64()), (Some(first.as_str()), Some(2)));
    let b = assert_error(app.get("/api/offers?limit=many&offset=-2&status=gone", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["limit must be an integer", "offset must be 0 or more"]));
    let b = assert_error(app.get("/api/offers?status=gone", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["status must be one of: draft, active, retired"]));
    assert_error(app.get(&format!("/api/offers?tenant_id={}", t.b["tenant_id"].as_str().unwrap()), Some(a)).await, 403, "TenantMismatch");

    let (s, r) = app.get(&format!("/api/offers/{first}"), Some(a)).await;
    assert_eq!((s, r["data"]["name"].as_str(), r["data"]["description"].as_str()), (StatusCode::OK, Some("Annual plan"), Some("twelve months")));
    assert_error(app.get(&format!("/api/offers/{first}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/offers/not-an-id", Some(a)).await, 404, "NotFound");

    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "offer.offer.created.v1").count(), 2);
}
db_test!(offers_are_created_once_per_slug_and_listed_newest_first);
