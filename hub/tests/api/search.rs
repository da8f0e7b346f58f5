//! sdk-search: full text over contacts, leads, content items and
//! incidents, indexed by their writes (a hit as soon as the write
//! answers), in the caller's tenant, over the kinds its scopes may read;
//! the DSL body and the query string run the same search.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

fn hits(body: &Value) -> Vec<(String, String)> {
    body["data"].as_array().unwrap().iter().map(|h| (h["kind"].as_str().unwrap().to_string(), h["title"].as_str().unwrap().to_string())).collect()
}

fn pair(kind: &str, title: &str) -> (String, String) {
    (kind.to_string(), title.to_string())
}

async fn writes_are_found_at_once_within_the_tenant_and_scopes(app: TestApp) {
    let t = app.two_tenants("search").await;
    let a = t.a_token.as_str();
    let (s, c) = app.post("/api/crm/contacts", Some(a), json!({ "name": "Ana López", "emails": ["ana@example.com"], "company": "Acme" })).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let (s, _) = app.post("/api/crm/leads", Some(a), json!({ "name": "Fleet renewal", "company": "Acme", "source": "fair" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, item) =
        app.post("/api/content/items", Some(a), json!({ "title": "Onboarding guide", "body": { "text": "Welcome to Acme", "steps": ["sign up"] } })).await;
    assert_eq!(s, StatusCode::CREATED, "{item}");
    let (s, inc) =
        app.post("/api/incidents", Some(a), json!({ "title": "Acme portal outage", "severity": "critical", "description": "the database is down" })).await;
    assert_eq!(s, StatusCode::CREATED, "{inc}");

    let (s, r) = app.get("/api/search?q=acme&sort=updated_at:asc", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["total"], 4);
    assert_eq!(
        hits(&r),
        [pair("contact", "Ana López"), pair("lead", "Fleet renewal"), pair("content_item", "Onboarding guide"), pair("incident", "Acme portal outage")]
    );
    assert_eq!(r["data"][0]["id"], c["data"]["contact_id"]);
    assert!(r["data"][0]["score"].as_f64().unwrap() > 0.0, "{r}");
    // The same search as a DSL body; every word must match; an address is its words.
    let (s, p) = app.post("/api/search", Some(a), json!({ "query": "acme", "sort": "updated_at:asc" })).await;
    assert_eq!((s, &p), (StatusCode::OK, &r));
    let (_, r) = app.post("/api/search", Some(a), json!({ "query": "ANA@example.com" })).await;
    assert_eq!((hits(&r), r["total"].as_i64()), (vec![pair("contact", "Ana López")], Some(1)));
    let (_, r) = app.post("/api/search", Some(a), json!({ "query": "acme outage" })).await;
    assert_eq!(hits(&r), [pair("incident", "Acme portal outage")]);
    // A title match ranks above a body match.
    let (_, r) = app.get("/api/search?q=acme", Some(a)).await;
    assert_eq!(r["data"][0]["kind"], "incident", "{r}");
    // Pages.
    let (_, r) = app.get("/api/search?q=acme&sort=title:asc&size=2&from=1", Some(a)).await;
    assert_eq!((hits(&r), r["total"].as_i64()), (vec![pair("contact", "Ana López"), pair("lead", "Fleet renewal")], Some(4)));

    // Updates are re-indexed in their transaction.
    let item_id = item["data"]["item_id"].as_str().unwrap();
    let (s, _) = app.post(&format!("/api/content/items/{item_id}/versions"), Some(a), json!({ "body": { "text": "Zebra crossing at Acme" } })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, r) = app.get("/api/search?q=zebra", Some(a)).await;
    assert_eq!(hits(&r), [pair("content_item", "Onboarding guide")]);
    let (_, r) = app.get("/api/search?q=welcome", Some(a)).await;
    assert_eq!(r["total"], 0, "the latest version is what is indexed");
    let (s, _) = app
        .post(
            &format!("/api/incidents/{}/status", inc["data"]["incident_id"].as_str().unwrap()),
            Some(a),
            json!({ "status": "resolved", "note": "failover done" }),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let (_, r) = app.get("/api/search?q=failover%20resolved", Some(a)).await;
    assert_eq!(hits(&r), [pair("incident", "Acme portal outage")]);
    let (s, _) = app
        .post("/api/ingest/batches", Some(a), json!({ "entity": "crm.contact", "mode": "upsert", "idempotency_key": "s1", "records": [{ "name": "Ana Lopez-Diaz", "emails": ["ana@example.com"], "company": "Acme" }] }))
        .await;
    assert_eq!(s, StatusCode::OK);
    let (_, r) = app.get("/api/search?q=diaz", Some(a)).await;
    assert_eq!(hits(&r), [pair("contact", "Ana Lopez-Diaz")]);

    // Another tenant finds nothing of A's.
    let (_, r) = app.get("/api/search?q=acme", Some(&t.b_token)).await;
    assert_eq!((r["total"].as_i64(), r["data"].clone()), (Some(0), json!([])));
    let (_, r) = app.get("/api/search?q=acme", Some(&t.b_key)).await;
    assert_eq!(r["total"], 0);

    // A key searches the kinds its scopes read; POST is a write scope.
    let (_, key) = app.key(a, "search-crm", json!(["search.search.read", "crm.contact.read"])).await;
    let k = key["api_key"].as_str().unwrap();
    let (s, r) = app.get("/api/search?q=acme", Some(k)).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!((hits(&r), r["total"].as_i64()), (vec![pair("contact", "Ana Lopez-Diaz")], Some(1)));
    assert_error(app.post("/api/search", Some(k), json!({ "query": "acme" })).await, 403, "Forbidden");
    let (_, key) = app.key(a, "search-inc", json!(["search.*", "incident.*", "content.item.read"])).await;
    let (_, r) = app.post("/api/search", Some(key["api_key"].as_str().unwrap()), json!({ "query": "acme", "sort": "title:desc" })).await;
    assert_eq!(hits(&r), [pair("content_item", "Onboarding guide"), pair("incident", "Acme portal outage")]);
    let (_, key) = app.key(a, "search-none", json!(["search.search.read"])).await;
    let (_, r) = app.get("/api/search?q=acme", Some(key["api_key"].as_str().unwrap())).await;
    assert_eq!((r["total"].as_i64(), r["data"].clone()), (Some(0), json!([])));
}
db_test!(writes_are_found_at_once_within_the_tenant_and_scopes);

async fn both_forms_check_their_fields_alike(app: TestApp) {
    let t = app.two_tenants("searchv").await;
    let a = t.a_token.as_str();
    let b = assert_error(app.get("/api/search?size=0&from=-1&sort=name", Some(a)).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!([
            "q is required",
            "size must be an integer from 1 to 100",
            "from must be an integer from 0 to 10000",
            "sort must be one of: _score, updated_at:desc, updated_at:asc, title:asc, title:desc"
        ])
    );
    let b = assert_error(app.post("/api/search", Some(a), json!({ "query": "-- !!", "size": 101, "from": "x", "sort": "name" })).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!([
            "size must be an integer from 1 to 100",
            "from must be an integer from 0 to 10000",
            "sort must be one of: _score, updated_at:desc, updated_at:asc, title:asc, title:desc"
        ])
    );
    let b = assert_error(app.post("/api/search", Some(a), json!({ "query": "-- !!" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["query must contain a word (letters or digits)"]));
    let b = assert_error(app.post("/api/search", Some(a), json!({ "query": " " })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["query is required"]));
    let b = assert_error(app.get("/api/search?q=a&size=ten", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["size must be an integer from 1 to 100"]));
    // Query syntax is words only: operators and quotes are not FTS syntax.
    let (s, r) = app.get("/api/search?q=%22a%22%20OR%20NEAR(b)%20*%20%26%20!c", Some(a)).await;
    assert_eq!((s, r["total"].as_i64()), (StatusCode::OK, Some(0)));
}
db_test!(both_forms_check_their_fields_alike);
