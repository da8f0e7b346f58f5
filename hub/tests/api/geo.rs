//! sdk-geo: addresses canonicalised and stored once per tenant and
//! canonical form, read back by id as `{ address }`.

use reqwest::{Method, StatusCode};
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

async fn addresses_are_listed_by_country_and_postal_code_then_erased(app: TestApp) {
    let t = app.two_tenants("geo-list").await;
    let a = t.a_token.as_str();
    let mut ids = Vec::new();
    for body in [
        json!({ "lines": ["1 Canal Street"], "postal_code": "1011 AB", "locality": "Amsterdam", "country_code": "NL" }),
        json!({ "lines": ["2 Canal Street"], "postal_code": "1011 ab", "locality": "Amsterdam", "country_code": "nl" }),
        json!({ "lines": ["3 Rue Haute"], "postal_code": "1000", "locality": "Bruxelles", "country_code": "BE" }),
    ] {
        let (s, b) = app.post("/api/geo/addresses", Some(a), body).await;
        assert_eq!(s, StatusCode::CREATED, "{b}");
        ids.push(b["data"]["address"]["address_id"].as_str().unwrap().to_string());
    }
    app.post("/api/geo/addresses", Some(&t.b_token), json!({ "lines": ["9 Canal Street"], "country_code": "NL" })).await;
    let listed = async |q: &str| {
        let (s, b) = app.get(&format!("/api/geo/addresses{q}"), Some(a)).await;
        assert_eq!(s, StatusCode::OK, "{b}");
        let got: Vec<String> = b["data"].as_array().unwrap().iter().map(|x| x["address_id"].as_str().unwrap().to_string()).collect();
        (b["total"].as_i64().unwrap(), got)
    };
    assert_eq!(listed("").await, (3, vec![ids[2].clone(), ids[1].clone(), ids[0].clone()]), "newest first");
    assert_eq!(listed("?country_code=nl").await, (2, vec![ids[1].clone(), ids[0].clone()]));
    assert_eq!(listed("?country_code=NL&postal_code=1011%20%20ab").await, (2, vec![ids[1].clone(), ids[0].clone()]), "normalised as a post is");
    assert_eq!(listed("?postal_code=1000").await, (1, vec![ids[2].clone()]));
    assert_eq!(listed("?limit=1&offset=1").await, (3, vec![ids[1].clone()]));
    assert_eq!(listed("?country_code=DE").await, (0, vec![]));
    let (_, page) = app.get("/api/geo/addresses?postal_code=1000", Some(a)).await;
    assert_eq!(page["data"][0]["canonical"], "3 Rue Haute, 1000 Bruxelles, BE");
    let (_, theirs) = app.get("/api/geo/addresses", Some(&t.b_token)).await;
    assert_eq!(theirs["total"], 1);
    let body = assert_error(app.get("/api/geo/addresses?country_code=N1", Some(a)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["country_code must be an ISO 3166-1 alpha-2 code"]));
    assert_error(app.get("/api/geo/addresses?country_code=NLD", Some(a)).await, 400, "ValidationError");

    // Erased: gone from reads and lists; the event names it by id only.
    let path = format!("/api/geo/addresses/{}", ids[0]);
    assert_error(app.call(Method::DELETE, &path, Some(&t.b_token), None).await, 404, "NotFound");
    let (s, gone) = app.call(Method::DELETE, &path, Some(a), None).await;
    assert_eq!((s, gone["data"].clone()), (StatusCode::OK, json!({ "address_id": ids[0], "deleted": true })));
    assert_error(app.get(&path, Some(a)).await, 404, "NotFound");
    assert_error(app.call(Method::DELETE, &path, Some(a), None).await, 404, "NotFound");
    assert_error(app.call(Method::DELETE, "/api/geo/addresses/not-an-id", Some(a), None).await, 404, "NotFound");
    assert_eq!(listed("?country_code=NL").await, (1, vec![ids[1].clone()]));
    // Posted again, it is a new address.
    let (s, again) = app
        .post("/api/geo/addresses", Some(a), json!({ "lines": ["1 Canal Street"], "postal_code": "1011 AB", "locality": "Amsterdam", "country_code": "NL" }))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{again}");
    assert_ne!(again["data"]["address"]["address_id"], json!(ids[0]));
    // An address an encounter refers to is kept.
    let (s, enc) = app.post("/api/engagement/encounters", Some(a), json!({ "address_id": ids[2] })).await;
    assert_eq!(s, StatusCode::CREATED, "{enc}");
    let body = assert_error(app.call(Method::DELETE, &format!("/api/geo/addresses/{}", ids[2]), Some(a), None).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["an encounter refers to this address; it is kept while the encounter is"]));
    let events = app.events_of(&t.a["tenant_id"]).await.into_iter().filter(|e| e == "geo.address.deleted.v1").count();
    assert_eq!(events, 1);
}
db_test!(addresses_are_listed_by_country_and_postal_code_then_erased);
