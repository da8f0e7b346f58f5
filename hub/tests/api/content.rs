//! sdk-content: items with numbered versions; archiving is soft and
//! idempotent, and an archived item takes no new version.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn items_gain_versions_until_archived_and_stay_readable(app: TestApp) {
    let t = app.two_tenants("content").await;
    let a = t.a_token.as_str();
    let (s, item) = app.post("/api/content/items", Some(a), json!({ "title": "Welcome", "kind": "email", "body": { "subject": "Hi" }, "note": "draft" })).await;
    assert_eq!(s, StatusCode::CREATED, "{item}");
    let item = &item["data"];
    assert_eq!((&item["status"], &item["latest_version"], &item["kind"], &item["archived_at"]), (&json!("active"), &json!(1), &json!("email"), &Value::Null));
    assert_eq!(
        (&item["versions"][0]["version"], &item["versions"][0]["body"], &item["versions"][0]["note"]),
        (&json!(1), &json!({ "subject": "Hi" }), &json!("draft"))
    );
    let id = item["item_id"].as_str().unwrap();

    let (s, v) = app.post(&format!("/api/content/items/{id}/versions"), Some(a), json!({ "body": "plain text" })).await;
    assert_eq!((s, &v["data"]["version"], &v["data"]["body"]), (StatusCode::CREATED, &json!(2), &json!("plain text")), "{v}");
    let (s, bare) = app.post("/api/content/items", Some(a), json!({ "title": "Empty" })).await;
    assert_eq!(
        (s, &bare["data"]["latest_version"], &bare["data"]["versions"], &bare["data"]["kind"]),
        (StatusCode::CREATED, &json!(0), &json!([]), &json!("article"))
    );

    let (s, archived) = app.post(&format!("/api/content/items/{id}/archive"), Some(a), json!({})).await;
    assert_eq!((s, &archived["data"]["status"]), (StatusCode::OK, &json!("archived")), "{archived}");
    let at = archived["data"]["archived_at"].clone();
    assert!(at.is_string());
    assert_eq!(archived["data"]["versions"].as_array().unwrap().len(), 2);
    let (s, again) = app.call(reqwest::Method::POST, &format!("/api/content/items/{id}/archive"), Some(a), None).await;
    assert_eq!((s, &again["data"]["archived_at"]), (StatusCode::OK, &at), "repeating answers 200 and changes nothing");
    let (s, got) = app.get(&format!("/api/content/items/{id}"), Some(a)).await;
    assert_eq!((s, &got["data"]["status"]), (StatusCode::OK, &json!("archived")));
    let versions: Vec<i64> = got["data"]["versions"].as_array().unwrap().iter().map(|v| v["version"].as_i64().unwrap()).collect();
    assert_eq!(versions, [1, 2], "versions stay readable");
    let b = assert_error(app.post(&format!("/api/content/items/{id}/versions"), Some(a), json!({ "body": 3 })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the item is archived: it takes no new version"]));

    // Non-UUID, unknown and another tenant's items are not found.
    assert_error(app.post("/api/content/items/welcome/archive", Some(a), json!({})).await, 404, "NotFound");
    assert_error(app.post("/api/content/items/0190a000-0000-7000-8000-000000000000/archive", Some(a), json!({})).await, 404, "NotFound");
    assert_error(app.get("/api/content/items/welcome", Some(a)).await, 404, "NotFound");
    let bare_id = bare["data"]["item_id"].as_str().unwrap();
    assert_error(app.post(&format!("/api/content/items/{bare_id}/archive"), Some(&t.b_token), json!({})).await, 404, "NotFound");
    assert_error(app.post(&format!("/api/content/items/{bare_id}/versions"), Some(&t.b_key), json!({ "body": 1 })).await, 404, "NotFound");
    assert_error(app.get(&format!("/api/content/items/{id}"), Some(&t.b_token)).await, 404, "NotFound");

    let b =
        assert_error(app.post(&format!("/api/content/items/{bare_id}/versions"), Some(a), json!({ "note": "n".repeat(501) })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["body is required", "note must be at most 500 characters"]));
    let b = assert_error(app.post("/api/content/items", Some(a), json!({ "kind": "poem", "body": "x".repeat(300 * 1024) })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["title is required", "kind must be one of: article, email, page, snippet, social_post, document"]));
    let b = assert_error(app.post("/api/content/items", Some(a), json!({ "title": "Big", "body": "x".repeat(300 * 1024) })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["body must be at most 262144 bytes of JSON"]));
    let b = assert_error(
        app.post(&format!("/api/content/items/{bare_id}/versions"), Some(a), json!({ "body": ["x".repeat(300 * 1024)], "note": "n" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["body must be at most 262144 bytes of JSON"]));

    let events = app.events_of(&t.a["tenant_id"]).await;
    let ours: Vec<&str> = events.iter().map(String::as_str).filter(|e| e.starts_with("content.")).collect();
    assert_eq!(
        ours,
        ["content.item.created.v1", "content.item.versioned.v1", "content.item.versioned.v1", "content.item.created.v1", "content.item.archived.v1"],
        "one archive event however often it is repeated"
    );
}
db_test!(items_gain_versions_until_archived_and_stay_readable);
