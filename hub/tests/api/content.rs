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

/// Items are listed by kind and status, changed while active, and an
/// archived item restored (active again, it takes versions and changes).
async fn items_are_listed_changed_and_restored(app: TestApp) {
    let t = app.two_tenants("content-life").await;
    let (a, b) = (t.a_token.as_str(), t.b_token.as_str());
    let mut items = Vec::new();
    for (title, kind) in [("Welcome", "email"), ("Pricing", "page"), ("Launch", "email")] {
        let (s, item) = app.post("/api/content/items", Some(a), json!({ "title": title, "kind": kind, "body": { "text": title } })).await;
        assert_eq!(s, StatusCode::CREATED, "{item}");
        items.push(item["data"]["item_id"].as_str().unwrap().to_string());
    }
    let (welcome, launch) = (&items[0], &items[2]);
    let (s, _) = app.post(&format!("/api/content/items/{welcome}/archive"), Some(a), json!({})).await;
    assert_eq!(s, StatusCode::OK);

    // The list: newest first, without versions; filters; paging.
    let titles = |v: &Value| v["data"].as_array().unwrap().iter().map(|i| i["title"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let (s, all) = app.get("/api/content/items", Some(a)).await;
    assert_eq!((s, &all["total"], titles(&all)), (StatusCode::OK, &json!(3), vec!["Launch".to_string(), "Pricing".into(), "Welcome".into()]));
    assert!(all["data"][0].get("versions").is_none(), "{all}");
    assert_eq!(all["data"][0]["latest_version"], 1);
    let (_, emails) = app.get("/api/content/items?kind=email", Some(a)).await;
    assert_eq!((&emails["total"], titles(&emails)), (&json!(2), vec!["Launch".to_string(), "Welcome".into()]));
    let (_, archived) = app.get("/api/content/items?kind=email&status=archived", Some(a)).await;
    assert_eq!((&archived["total"], titles(&archived)), (&json!(1), vec!["Welcome".to_string()]));
    let (_, page) = app.get("/api/content/items?status=active&limit=1&offset=1", Some(a)).await;
    assert_eq!((&page["total"], titles(&page)), (&json!(2), vec!["Pricing".to_string()]));
    let body = assert_error(app.get("/api/content/items?kind=poem&status=gone", Some(a)).await, 400, "ValidationError");
    assert_eq!(
        body["details"],
        json!(["kind must be one of: article, email, page, snippet, social_post, document", "status must be one of: active, archived"])
    );
    let (_, theirs) = app.get("/api/content/items", Some(b)).await;
    assert_eq!((&theirs["total"], &theirs["data"]), (&json!(0), &json!([])));

    // A change: at least one field, validated; versions stay.
    let app = &app;
    let patch = |id: &str, token: &str, body: Value| {
        let (url, token) = (format!("/api/content/items/{id}"), token.to_string());
        async move { app.call(reqwest::Method::PATCH, &url, Some(&token), Some(body)).await }
    };
    let body = assert_error(patch(launch, a, json!({})).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["give at least one of: title, kind"]));
    let body = assert_error(patch(launch, a, json!({ "title": "t".repeat(201), "kind": "poem" })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["title must be at most 200 characters", "kind must be one of: article, email, page, snippet, social_post, document"]));
    let body = assert_error(patch(launch, a, json!({ "title": "  " })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["title is required"]));
    assert_error(patch(launch, b, json!({ "title": "theirs" })).await, 404, "NotFound");
    assert_error(patch("launch", a, json!({ "title": "x" })).await, 404, "NotFound");
    let (s, changed) = patch(launch, a, json!({ "title": "Launch day", "kind": "article" })).await;
    assert_eq!(s, StatusCode::OK, "{changed}");
    assert_eq!(
        (&changed["data"]["title"], &changed["data"]["kind"], &changed["data"]["versions"][0]["body"]),
        (&json!("Launch day"), &json!("article"), &json!({ "text": "Launch" }))
    );
    // An archived item is not changed.
    let body = assert_error(patch(welcome, a, json!({ "title": "Hello" })).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the item is archived: it cannot be changed"]));

    // Restored: active again, archived_at cleared; a repeat answers the same.
    assert_error(app.post(&format!("/api/content/items/{welcome}/restore"), Some(b), json!({})).await, 404, "NotFound");
    let (s, restored) = app.post(&format!("/api/content/items/{welcome}/restore"), Some(a), json!({})).await;
    assert_eq!((s, &restored["data"]["status"], &restored["data"]["archived_at"]), (StatusCode::OK, &json!("active"), &Value::Null), "{restored}");
    let (s, again) = app.post(&format!("/api/content/items/{welcome}/restore"), Some(a), json!({})).await;
    assert_eq!((s, &again["data"]), (StatusCode::OK, &restored["data"]));
    let (s, v) = app.post(&format!("/api/content/items/{welcome}/versions"), Some(a), json!({ "body": "v2" })).await;
    assert_eq!((s, &v["data"]["version"]), (StatusCode::CREATED, &json!(2)));
    let (s, _) = patch(welcome, a, json!({ "title": "Hello" })).await;
    assert_eq!(s, StatusCode::OK);

    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "content.item.updated.v1").count(), 2, "{events:?}");
    assert_eq!(events.iter().filter(|e| *e == "content.item.restored.v1").count(), 1, "one restore event however often repeated");
}
db_test!(items_are_listed_changed_and_restored);
