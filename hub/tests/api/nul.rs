//! U+0000 (NUL) is refused at the edge on both backends: PostgreSQL's text
//! cannot hold it, so a NUL in a body (value or key, at any depth), a query
//! parameter, a path parameter or a form field is 400 naming where, before
//! a statement could fail on it; the text `\u0000` (an escaped backslash,
//! then `u0000`) is no NUL and is stored as sent.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

const WHY: &str = "must not contain the NUL character (U+0000)";

fn signup_body(email: &str, org_name: &str, app_id: &str) -> Value {
    json!({
        "email": email, "password": "correct horse battery", "org_name": org_name,
        "app_id": app_id, "display_name": "Ada Admin", "region": "eu-west-1",
    })
}

#[track_caller]
fn assert_nul(actual: (StatusCode, Value), details: &[&str]) {
    let body = assert_error(actual, 400, "ValidationError");
    let expected: Vec<String> = details.iter().map(|d| format!("{d} {WHY}")).collect();
    assert_eq!(body["details"], json!(expected), "{body}");
}

async fn a_nul_anywhere_in_a_request_is_400_naming_it(app: TestApp) {
    // The unauthenticated signup: each field is named.
    assert_nul(app.post("/api/auth/signup-tenant", None, signup_body("ada\u{0}@example.com", "Acme", "nul-a")).await, &["email"]);
    assert_nul(app.post("/api/auth/signup-tenant", None, signup_body("ada@example.com", "Ac\u{0}me", "nul-a")).await, &["org_name"]);
    // The same body spelt with a content type off the fast path.
    let res = app
        .client
        .post(format!("{}/api/auth/signup-tenant", app.base))
        .header("content-type", "application/json; charset=utf-8")
        .body(signup_body("ada@example.com", "Ac\u{0}me", "nul-a").to_string())
        .send()
        .await
        .unwrap();
    assert_nul((res.status(), res.json().await.unwrap()), &["org_name"]);
    // Nothing was created: the same email signs up afterwards.
    let t = app.signup("ada@example.com", "nul-a").await;
    let token = t["token"].as_str().unwrap();

    // A nested value, and a nested key, of a tenant write.
    let contact = |attributes: Value| json!({ "name": "Ada", "emails": ["ada@engines.example"], "attributes": attributes });
    assert_nul(app.post("/api/crm/contacts", Some(token), contact(json!({ "note": "a\u{0}b" }))).await, &["attributes.note"]);
    assert_nul(app.post("/api/crm/contacts", Some(token), contact(json!({ "k\u{0}": "v" }))).await, &[r#"key "k\u0000" of attributes"#]);
    assert_nul(app.post("/api/crm/contacts", Some(token), contact(json!({ "deep": [{ "x": "\u{0}" }] }))).await, &["attributes.deep[0].x"]);
    let (_, list) = app.get("/api/crm/contacts", Some(token)).await;
    assert_eq!(list["total"], 0, "{list}");

    // A query parameter, and a path parameter, percent-encoded.
    assert_nul(app.get("/api/crm/contacts?company=Eng%00ines", Some(token)).await, &["query parameter company"]);
    assert_nul(app.get("/api/crm/contacts/abc%00def", Some(token)).await, &["path parameter contact_id"]);
    assert_nul(app.get("/api/crm/contacts/abc%00def/timeline", Some(token)).await, &["path parameter contact_id"]);

    // A form body (the client-credentials exchange).
    let res = app
        .client
        .post(format!("{}/api/auth/token", app.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("grant_type=client_credentials&client_secret=pk_live_%00")
        .send()
        .await
        .unwrap();
    assert_nul((res.status(), res.json().await.unwrap()), &["form field client_secret"]);
}
db_test!(a_nul_anywhere_in_a_request_is_400_naming_it);

async fn the_text_backslash_u0000_is_no_nul_and_is_kept(app: TestApp) {
    // JSON "\\u0000": a backslash, then the text u0000.
    let literal = r"\u0000";
    let t = app.signup("grace@example.com", "nul-b").await;
    let token = t["token"].as_str().unwrap();
    let (s, c) = app.post("/api/crm/contacts", Some(token), json!({ "name": literal, "company": literal, "attributes": { literal: literal } })).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let id = c["data"]["contact_id"].as_str().unwrap();
    let (s, one) = app.get(&format!("/api/crm/contacts/{id}"), Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{one}");
    assert_eq!((&one["data"]["name"], &one["data"]["company"], &one["data"]["attributes"]), (&json!(literal), &json!(literal), &json!({ literal: literal })));
    let (s, found) = app.get("/api/crm/contacts?company=%5Cu0000", Some(token)).await;
    assert_eq!((s, &found["total"]), (StatusCode::OK, &json!(1)), "{found}");
    // An escaped backslash followed by a real NUL is still one.
    assert_nul(app.post("/api/crm/contacts", Some(token), json!({ "name": "\\\u{0}" })).await, &["name"]);
    let (s, created) = app.post("/api/auth/signup-tenant", None, signup_body("hopper@example.com", literal, "nul-c")).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
}
db_test!(the_text_backslash_u0000_is_no_nul_and_is_kept);
