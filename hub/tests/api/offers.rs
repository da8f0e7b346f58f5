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

async fn offers_are_found_changed_activated_and_retired(app: TestApp) {
    let t = app.two_tenants("offer-life").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].clone());
    let make = |name: &str, slug: &str, extra: Value| {
        let mut body = json!({ "tenant_id": tenant, "name": name, "slug": slug });
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    let (s, o) = app.post("/api/offers", Some(a), make("Gold 100% plan", "gold_plan", json!({ "price_minor": 5000, "currency": "EUR" }))).await;
    assert_eq!(s, StatusCode::CREATED, "{o}");
    let gold = o["data"]["offer_id"].as_str().unwrap().to_string();
    let (s, o) = app.post("/api/offers", Some(a), make("Silver", "silver", json!({ "status": "draft" }))).await;
    assert_eq!(s, StatusCode::CREATED, "{o}");
    let silver = o["data"]["offer_id"].as_str().unwrap().to_string();
    let (_, o) = app.post("/api/offers", Some(a), make("Goldfinch", "bird", json!({}))).await;
    let bird = o["data"]["offer_id"].as_str().unwrap().to_string();

    // The list's slug and text filters.
    let ids = |l: &Value| l["data"].as_array().unwrap().iter().map(|o| o["offer_id"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let (s, l) = app.get("/api/offers?slug=silver", Some(a)).await;
    assert_eq!((s, ids(&l), l["total"].as_i64()), (StatusCode::OK, vec![silver.clone()], Some(1)));
    let (_, l) = app.get("/api/offers?q=GOLD", Some(a)).await;
    assert_eq!((ids(&l), l["total"].as_i64()), (vec![bird.clone(), gold.clone()], Some(2)), "name or slug, any case");
    let (_, l) = app.get("/api/offers?q=100%25", Some(a)).await;
    assert_eq!(ids(&l), vec![gold.clone()], "a % is a character, not a wildcard");
    let (_, l) = app.get("/api/offers?q=d_p", Some(a)).await;
    assert_eq!(ids(&l), vec![gold.clone()], "an _ is a character: gold_plan, not Goldfinch");
    let (_, l) = app.get("/api/offers?q=gold&status=active&limit=1", Some(a)).await;
    assert_eq!((ids(&l), l["total"].as_i64()), (vec![bird.clone()], Some(2)));
    let (_, l) = app.get("/api/offers?slug=gold", Some(a)).await;
    assert_eq!(l["total"], 0, "a slug matches whole");
    let b = assert_error(app.get(&format!("/api/offers?q={}&slug={}", "x".repeat(201), "y".repeat(129)), Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["slug must be at most 128 characters", "q must be at most 200 characters"]));
    let (_, l) = app.get("/api/offers?q=gold", Some(&t.b_token)).await;
    assert_eq!(l["total"], 0, "B sees none of A's");

    // Change: what is absent stays; a price goes with a currency.
    let url = format!("/api/offers/{gold}");
    let (s, o) = app.call(reqwest::Method::PATCH, &url, Some(a), Some(json!({ "price_minor": 4500, "description": "now cheaper" }))).await;
    assert_eq!(s, StatusCode::OK, "{o}");
    assert_eq!(
        (o["data"]["name"].as_str(), o["data"]["price_minor"].as_i64(), o["data"]["currency"].as_str(), o["data"]["description"].as_str()),
        (Some("Gold 100% plan"), Some(4500), Some("EUR"), Some("now cheaper"))
    );
    let (s, o) = app.call(reqwest::Method::PATCH, &url, Some(a), Some(json!({ "name": "Gold", "currency": "USD" }))).await;
    assert_eq!(
        (s, o["data"]["name"].as_str(), o["data"]["currency"].as_str(), o["data"]["price_minor"].as_i64()),
        (StatusCode::OK, Some("Gold"), Some("USD"), Some(4500))
    );
    let silver_url = format!("/api/offers/{silver}");
    let b = assert_error(app.call(reqwest::Method::PATCH, &silver_url, Some(a), Some(json!({ "price_minor": 100 }))).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["currency is required with price_minor"]));
    let b = assert_error(app.call(reqwest::Method::PATCH, &silver_url, Some(a), Some(json!({ "currency": "XYZ" }))).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["currency must be an ISO 4217 code (EUR, USD, ...)"]));
    let (s, o) = app.call(reqwest::Method::PATCH, &silver_url, Some(a), Some(json!({ "price_minor": 0, "currency": "JPY" }))).await;
    assert_eq!((s, o["data"]["price_minor"].as_i64(), o["data"]["status"].as_str()), (StatusCode::OK, Some(0), Some("draft")));
    let b = assert_error(app.call(reqwest::Method::PATCH, &url, Some(a), Some(json!({}))).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of name, description, price_minor, currency"]));
    let b = assert_error(app.call(reqwest::Method::PATCH, &url, Some(a), Some(json!({ "price_minor": -5, "slug": "x" }))).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["price_minor must be an integer from 0 to 1000000000000000"]));
    assert_error(app.call(reqwest::Method::PATCH, &url, Some(&t.b_token), Some(json!({ "name": "mine" }))).await, 404, "NotFound");
    assert_error(app.call(reqwest::Method::PATCH, "/api/offers/nope", Some(a), Some(json!({ "name": "x" }))).await, 404, "NotFound");

    // A draft is activated, once; an active one cannot be.
    let (s, o) = app.post(&format!("/api/offers/{silver}/activate"), Some(a), json!({})).await;
    assert_eq!((s, o["data"]["status"].as_str()), (StatusCode::OK, Some("active")), "{o}");
    let b = assert_error(app.post(&format!("/api/offers/{silver}/activate"), Some(a), json!({})).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the offer is active: only a draft offer can be activated"]));
    // Retired, for good.
    let (s, o) = app.post(&format!("/api/offers/{gold}/retire"), Some(a), json!({})).await;
    assert_eq!((s, o["data"]["status"].as_str()), (StatusCode::OK, Some("retired")), "{o}");
    let b = assert_error(app.post(&format!("/api/offers/{gold}/retire"), Some(a), json!({})).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the offer is retired: only a draft or active offer can be retired"]));
    let b = assert_error(app.post(&format!("/api/offers/{gold}/activate"), Some(a), json!({})).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the offer is retired: only a draft offer can be activated"]));
    let b = assert_error(app.call(reqwest::Method::PATCH, &url, Some(a), Some(json!({ "name": "Back" }))).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the offer is retired: a retired offer is not changed"]));
    assert_error(app.post(&format!("/api/offers/{bird}/retire"), Some(&t.b_token), json!({})).await, 404, "NotFound");
    assert_error(app.post(&format!("/api/offers/{bird}/activate"), Some(&t.b_token), json!({})).await, 404, "NotFound");
    assert_error(app.post("/api/offers/42/retire", Some(a), json!({})).await, 404, "NotFound");
    let (_, l) = app.get("/api/offers?status=retired", Some(a)).await;
    assert_eq!((ids(&l), l["total"].as_i64()), (vec![gold.clone()], Some(1)));
    let (_, r) = app.get(&url, Some(a)).await;
    assert_eq!((r["data"]["status"].as_str(), r["data"]["name"].as_str()), (Some("retired"), Some("Gold")));

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |n: &str| events.iter().filter(|e| *e == n).count();
    assert_eq!([count("offer.offer.updated.v1"), count("offer.offer.activated.v1"), count("offer.offer.retired.v1")], [3, 1, 1]);
}
db_test!(offers_are_found_changed_activated_and_retired);
