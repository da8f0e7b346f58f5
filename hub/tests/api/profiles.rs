//! sdk-profile: an app identity's bands, sealed under its person's key,
//! read by the tenants its person belongs to and replaced whole by the
//! tenants of its app; events name the changed fields, never their values.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

fn band(identity: &Value, kind: &str) -> String {
    format!("/api/profiles/{}/bands/{kind}", identity.as_str().unwrap())
}

async fn put(app: &TestApp, token: &str, path: &str, body: Value) -> (StatusCode, Value) {
    app.call(Method::PUT, path, Some(token), Some(body)).await
}

/// The payloads of one event type in a tenant's chain, oldest first.
async fn payloads(app: &TestApp, tenant: &Value, event_type: &str) -> Vec<Value> {
    let rows: Vec<String> = sqlx::query_scalar("SELECT payload FROM audit_entry WHERE tenant_id = $1 AND event_type = $2 ORDER BY seq")
        .bind(tenant.as_str().unwrap())
        .bind(event_type)
        .fetch_all(&app.state().db.read)
        .await
        .unwrap();
    rows.iter().map(|p| serde_json::from_str(p).unwrap()).collect()
}

async fn bands_are_read_and_replaced_whole_with_events_naming_the_changed_fields(app: TestApp) {
    let t = app.two_tenants("prof").await;
    let a = t.a_token.as_str();
    let identity = &t.a["app_identity_id"];

    // Signup wrote the profile band.
    let (s, r) = app.get(&band(identity, "profile"), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let b = &r["data"]["band"];
    assert_eq!((b["band_kind"].as_str(), &b["app_identity_id"], &b["fields"]), (Some("profile"), identity, &json!({ "display_name": "Ada Admin" })));
    assert!(b["created_at"].is_string() && b["updated_at"].is_string(), "{b}");
    assert_error(app.get(&band(identity, "preference"), Some(a)).await, 404, "NotFound");

    let (s, r) = put(&app, a, &band(identity, "preference"), json!({ "fields": { "theme": "dark", "lang": "nl", "digest": { "daily": true } } })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    assert_eq!(r["data"]["band"]["fields"], json!({ "theme": "dark", "lang": "nl", "digest": { "daily": true } }));
    let created_at = r["data"]["band"]["created_at"].clone();
    let (s, r) = put(&app, a, &band(identity, "preference"), json!({ "fields": { "theme": "light", "digest": { "daily": true } } })).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["data"]["band"]["fields"], json!({ "theme": "light", "digest": { "daily": true } }), "replaced whole: lang is gone");
    assert_eq!(r["data"]["band"]["created_at"], created_at);
    let updated_at = r["data"]["band"]["updated_at"].clone();
    // The same content again changes nothing and records nothing.
    let (s, again) = put(&app, a, &band(identity, "preference"), json!({ "fields": { "digest": { "daily": true }, "theme": "light" } })).await;
    assert_eq!((s, &again["data"]["band"]["updated_at"]), (StatusCode::OK, &updated_at), "{again}");
    let (_, read) = app.get(&band(identity, "preference"), Some(a)).await;
    assert_eq!(read["data"]["band"]["fields"], json!({ "theme": "light", "digest": { "daily": true } }));
    assert_eq!(read["data"]["band"]["updated_at"], updated_at);

    let (s, r) = put(&app, a, &band(identity, "notification_routing"), json!({ "fields": { "email": "primary", "sms": null } })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let (s, r) = put(&app, a, &band(identity, "profile"), json!({ "fields": { "display_name": "Ada L." } })).await;
    assert_eq!((s, &r["data"]["band"]["fields"]), (StatusCode::OK, &json!({ "display_name": "Ada L." })), "{r}");

    // The fields are sealed: no value is in the table.
    let sealed: Vec<Vec<u8>> = sqlx::query_scalar("SELECT fields_envelope FROM profile_band WHERE app_identity_id = $1")
        .bind(identity.as_str().unwrap())
        .fetch_all(&app.state().db.read)
        .await
        .unwrap();
    assert_eq!(sealed.len(), 3);
    assert!(sealed.iter().all(|e| !String::from_utf8_lossy(e).contains("light") && !String::from_utf8_lossy(e).contains("Ada")));

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |n: &str| events.iter().filter(|e| *e == n).count();
    assert_eq!((count("profile.band.updated.v1"), count("profile.preference.changed.v1"), count("profile.notification_routing.changed.v1")), (4, 2, 1));
    let updated = payloads(&app, &t.a["tenant_id"], "profile.band.updated.v1").await;
    let band_id = read["data"]["band"]["band_id"].clone();
    assert_eq!(
        updated[0],
        json!({ "app_identity_id": identity, "band_id": band_id, "band_kind": "preference", "changed_fields": ["digest", "lang", "theme"] })
    );
    assert_eq!(updated[1]["changed_fields"], json!(["lang", "theme"]), "names only, never values");
    assert_eq!((updated[3]["band_kind"].as_str(), &updated[3]["changed_fields"]), (Some("profile"), &json!(["display_name"])));
    let preference = payloads(&app, &t.a["tenant_id"], "profile.preference.changed.v1").await;
    assert_eq!(preference, updated[..2].to_vec());
    let routing = payloads(&app, &t.a["tenant_id"], "profile.notification_routing.changed.v1").await;
    assert_eq!(routing[0]["changed_fields"], json!(["email", "sms"]));

    // A key with the scope writes at once: a band confers no authority.
    let (_, key) = app.key(a, "prof-app", json!(["profile.*"])).await;
    let key = key["api_key"].as_str().unwrap();
    let (s, r) = put(&app, key, &band(identity, "preference"), json!({ "fields": { "theme": "system" } })).await;
    assert_eq!((s, &r["data"]["band"]["fields"]), (StatusCode::OK, &json!({ "theme": "system" })), "{r}");
    let (_, narrow) = app.key(a, "prof-read", json!(["profile.profile.read"])).await;
    let narrow = narrow["api_key"].as_str().unwrap();
    assert_eq!(app.get(&band(identity, "preference"), Some(narrow)).await.0, StatusCode::OK);
    let b = assert_error(put(&app, narrow, &band(identity, "preference"), json!({ "fields": {} })).await, 403, "Forbidden");
    assert_eq!(b["required_scopes"], json!(["profile.profile.write"]));
}
db_test!(bands_are_read_and_replaced_whole_with_events_naming_the_changed_fields);

async fn every_problem_of_a_band_write_is_in_one_answer(app: TestApp) {
    let t = app.two_tenants("profv").await;
    let a = t.a_token.as_str();
    let identity = &t.a["app_identity_id"];
    let b = assert_error(put(&app, a, &band(identity, "avatar"), json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["band_kind must be one of: profile, preference, notification_routing", "fields is required"]));
    let b = assert_error(app.get(&band(identity, "avatar"), Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["band_kind must be one of: profile, preference, notification_routing"]));
    let b = assert_error(put(&app, a, &band(identity, "preference"), json!({ "fields": ["theme"] })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["fields must be a JSON object"]));
    let mut many: serde_json::Map<String, Value> = (0..101).map(|i| (format!("f{i}"), json!(i))).collect();
    many.insert(" ".into(), json!(1));
    many.insert("n".repeat(129), json!(1));
    let b = assert_error(put(&app, a, &band(identity, "preference"), json!({ "fields": many })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["fields must hold at most 100 fields", "every field name must be 1 to 128 characters"]));
    let b = assert_error(put(&app, a, &band(identity, "preference"), json!({ "fields": { "bio": "x".repeat(64 * 1024) } })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["fields must be at most 64 KiB as JSON"]));
    // Just under the bound is fine.
    let (s, _) = put(&app, a, &band(identity, "preference"), json!({ "fields": { "bio": "x".repeat(64 * 1024 - 20) } })).await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(app.events_of(&t.a["tenant_id"]).await.iter().filter(|e| e.starts_with("profile.")).count(), 2, "refused writes record nothing");
}
db_test!(every_problem_of_a_band_write_is_in_one_answer);

async fn bands_are_visible_to_the_persons_tenants_and_written_by_its_apps(app: TestApp) {
    let t = app.two_tenants("profi").await;
    let a = t.a_token.as_str();
    let identity = &t.a["app_identity_id"];
    for token in [t.b_token.as_str(), t.b_key.as_str()] {
        assert_error(app.get(&band(identity, "profile"), Some(token)).await, 404, "NotFound");
        assert_error(put(&app, token, &band(identity, "profile"), json!({ "fields": { "display_name": "Mallory" } })).await, 404, "NotFound");
        // Unknown and malformed identities look the same, whatever the kind.
        assert_error(app.get("/api/profiles/0190a000-0000-7000-8000-000000000000/bands/avatar", Some(token)).await, 404, "NotFound");
    }
    assert_error(app.get("/api/profiles/not-a-uuid/bands/profile", Some(a)).await, 404, "NotFound");

    // Once A's person joins B, B reads the band; its bands stay A's app's to write.
    let (s, m) = app.post("/api/memberships", Some(&t.b_token), json!({ "person_id": t.a["person_id"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{m}");
    let (s, r) = app.get(&band(identity, "profile"), Some(&t.b_token)).await;
    assert_eq!((s, &r["data"]["band"]["fields"]), (StatusCode::OK, &json!({ "display_name": "Ada Admin" })), "{r}");
    assert_error(put(&app, &t.b_token, &band(identity, "profile"), json!({ "fields": { "display_name": "Mallory" } })).await, 404, "NotFound");
    let (_, r) = app.get(&band(identity, "profile"), Some(a)).await;
    assert_eq!(r["data"]["band"]["fields"], json!({ "display_name": "Ada Admin" }));
    assert!(!app.events_of(&t.b["tenant_id"]).await.iter().any(|e| e.starts_with("profile.")));

    // Once the person's key is destroyed, the bands cannot be opened or written.
    sqlx::query(
        "UPDATE crypto_data_key SET wrapped_key = NULL, destroyed_at = $1 WHERE key_id = (SELECT person_key_ref FROM identity_person WHERE person_id = $2)",
    )
    .bind("2026-01-01T00:00:00.000000Z")
    .bind(t.a["person_id"].as_str().unwrap())
    .execute(app.state().db.writer())
    .await
    .unwrap();
    let (s, r) = app.get(&band(identity, "profile"), Some(a)).await;
    assert_eq!((s, &r["data"]["band"]["fields"], r["data"]["band"]["band_kind"].as_str()), (StatusCode::OK, &Value::Null, Some("profile")), "{r}");
    assert_error(put(&app, a, &band(identity, "profile"), json!({ "fields": {} })).await, 409, "Conflict");
}
db_test!(bands_are_visible_to_the_persons_tenants_and_written_by_its_apps);

async fn an_identitys_bands_are_listed_and_cleared(app: TestApp) {
    let t = app.two_tenants("bands").await;
    let a = t.a_token.as_str();
    let identity = &t.a["app_identity_id"];
    let all = format!("/api/profiles/{}/bands", identity.as_str().unwrap());
    let (s, r) = put(&app, a, &band(identity, "preference"), json!({ "fields": { "theme": "dark" } })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");

    // Every band in one read, newest first, opened.
    let (s, list) = app.get(&all, Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{list}");
    assert_eq!(list["total"], 2);
    let kinds: Vec<&str> = list["data"].as_array().unwrap().iter().map(|b| b["band_kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["preference", "profile"]);
    assert_eq!(list["data"][0]["fields"], json!({ "theme": "dark" }));
    assert_eq!(list["data"][1]["fields"], json!({ "display_name": "Ada Admin" }));
    let (_, page) = app.get(&format!("{all}?limit=1&offset=1"), Some(a)).await;
    assert_eq!((page["total"].as_i64(), page["data"][0]["band_kind"].as_str()), (Some(2), Some("profile")));
    assert_error(app.get(&all, Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/profiles/not-an-id/bands", Some(a)).await, 404, "NotFound");

    // Clear one: it is gone, the others stay.
    assert_error(app.call(Method::DELETE, &band(identity, "preference"), Some(&t.b_token), None).await, 404, "NotFound");
    assert_error(app.call(Method::DELETE, &band(identity, "notification_routing"), Some(a), None).await, 404, "NotFound");
    let b = assert_error(app.call(Method::DELETE, &band(identity, "moods"), Some(a), None).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["band_kind must be one of: profile, preference, notification_routing"]));
    let (s, gone) = app.call(Method::DELETE, &band(identity, "preference"), Some(a), None).await;
    assert_eq!(s, StatusCode::OK, "{gone}");
    assert_eq!(gone["data"], json!({ "app_identity_id": identity, "band_kind": "preference", "band_id": list["data"][0]["band_id"], "deleted": true }));
    assert_error(app.get(&band(identity, "preference"), Some(a)).await, 404, "NotFound");
    assert_error(app.call(Method::DELETE, &band(identity, "preference"), Some(a), None).await, 404, "NotFound");
    let (_, list) = app.get(&all, Some(a)).await;
    assert_eq!((list["total"].as_i64(), list["data"][0]["band_kind"].as_str()), (Some(1), Some("profile")));
    // Written again, it starts anew.
    let (s, _) = put(&app, a, &band(identity, "preference"), json!({ "fields": { "theme": "light" } })).await;
    assert_eq!(s, StatusCode::CREATED);

    // The event names the band, never its fields.
    let cleared = payloads(&app, &t.a["tenant_id"], "profile.band.cleared.v1").await;
    assert_eq!(cleared, [json!({ "app_identity_id": identity, "band_id": gone["data"]["band_id"], "band_kind": "preference" })]);
}
db_test!(an_identitys_bands_are_listed_and_cleared);
