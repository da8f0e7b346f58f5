//! sdk-geo: addresses canonicalised and stored once per tenant and
//! canonical form, read back by id as `{ address }`.

use reqwest::StatusCode;
use serde_json::json;

use crate::{db_test, helpers::*};

async fn addresses_are_canonicalised_stored_once_and_read_back(app: TestApp) {
    let t = app.two_tenants("geo").await;
    let a = t.a_token.as_str();
    let messy = json!({ "lines": ["  10   Downing   Street ", ""], "locality": "London", "postal_code": "sw1a 2aa", "country_code": "gb" });
    let (s, first) = app.post("/api/geo/addresses", Some(a), messy).await;
    assert_eq!(s, StatusCode::CREATED, "{first}");
    let address = &first["data"]["address"];
    assert_eq!(address["canonical"], "10 Downing Street, SW1A 2AA London, GB");
    assert_eq!((address["lines"].clone(), address["country_code"].clone()), (json!(["10 Downing Street"]), json!("GB")));
    assert_eq!(first["data"]["created"], true);

    // The same address however spelt is the stored one.
    let tidy = json!({ "lines": ["10 downing street"], "locality": "london", "postal_code": "SW1A 2AA", "country_code": "GB" });
    let (s, again) = app.post("/api/geo/addresses", Some(a), tidy).await;
    assert_eq!(s, StatusCode::OK, "{again}");
    assert_eq!((again["data"]["address"]["address_id"].clone(), again["data"]["created"].clone()), (address["address_id"].clone(), json!(false)));

    let id = address["address_id"].as_str().unwrap();
    let (s, read) = app.get(&format!("/api/geo/addresses/{id}"), Some(a)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(read["data"]["address"], *address);
    assert!(read["data"].get("created").is_none());
    // Another tenant's credentials do not reach it, and its own copy is its own.
    assert_error(app.get(&format!("/api/geo/addresses/{id}"), Some(&t.b_token)).await, 404, "NotFound");
    let (s, theirs) = app.post("/api/geo/addresses", Some(&t.b_token), json!({ "lines": ["10 Downing Street"], "country_code": "GB" })).await;
    assert_eq!(s, StatusCode::CREATED);
    assert_ne!(theirs["data"]["address"]["address_id"], address["address_id"]);

    let body = assert_error(app.post("/api/geo/addresses", Some(a), json!({ "lines": [" "], "country_code": "GBR" })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["lines must hold 1 to 4 non-empty street lines", "country_code must be an ISO 3166-1 alpha-2 code"]));
    let body = assert_error(app.post("/api/geo/addresses", Some(a), json!({ "lines": ["a", "b", "c", "d", "e"], "region": 5 })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["lines must hold 1 to 4 items", "region must be a string", "country_code is required"]));
    assert_error(app.get("/api/geo/addresses/not-an-id", Some(a)).await, 404, "NotFound");
    let events = app.events_of(&t.a["tenant_id"]).await.into_iter().filter(|e| e == "geo.address.canonicalised.v1").count();
    assert_eq!(events, 1, "one event per stored address");
}
db_test!(addresses_are_canonicalised_stored_once_and_read_back);
