//! sdk-projection: a subject's snapshot folded from its append-only log of
//! assertions (the latest per attribute wins), hashed over canonical JSON,
//! rebuilt idempotently; subjects are the tenant's own.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

fn sha256_hex(text: &str) -> String {
    hex::encode(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, text.as_bytes()))
}

async fn rebuilt_payloads(app: &TestApp, tenant_id: &Value) -> Vec<Value> {
    let payloads: Vec<String> =
        sqlx::query_scalar("SELECT payload FROM audit_entry WHERE tenant_id = $1 AND event_type = 'projection.snapshot.rebuilt.v1' ORDER BY seq")
            .bind(tenant_id.as_str().unwrap())
            .fetch_all(&app.state().db.read)
            .await
            .unwrap();
    payloads.iter().map(|p| serde_json::from_str(p).unwrap()).collect()
}

async fn a_rebuild_keeps_the_latest_assertion_of_each_attribute_and_writes_only_a_change(app: TestApp) {
    let t = app.two_tenants("proj").await;
    let a = Some(t.a_token.as_str());
    let (s, r) = app.post("/api/projections", a, json!({ "subject_id": "cust-42" })).await;
    assert_eq!((s, &r["data"]["subject_id"], &r["data"]["assertion_count"]), (StatusCode::CREATED, &json!("cust-42"), &json!(0)), "{r}");
    assert_error(app.get("/api/projections/cust-42", a).await, 404, "NotFound");

    let assertions = [
        json!({ "attribute": "email", "value": "a@old.example", "asserted_at": "2024-01-01T00:00:00Z", "source": "crm" }),
        // Recorded later but asserted earlier: it does not win.
        json!({ "attribute": "email", "value": "a@stale.example", "asserted_at": "2023-06-01T00:00:00Z" }),
        json!({ "attribute": "tier", "value": { "since": "2024", "level": 2 } }),
        json!({ "attribute": "nickname", "value": "Al" }),
        // A null retracts the attribute.
        json!({ "attribute": "nickname", "value": null }),
        // The same time: the one recorded last wins.
        json!({ "attribute": "score", "value": 1, "asserted_at": "2024-01-01T00:00:00Z" }),
        json!({ "attribute": "score", "value": 2, "asserted_at": "2024-01-01T00:00:00Z" }),
    ];
    for (i, body) in assertions.iter().enumerate() {
        let (s, r) = app.post("/api/projections/cust-42/assertions", a, body.clone()).await;
        assert_eq!((s, &r["data"]["seq"], &r["data"]["value"]), (StatusCode::CREATED, &json!(i + 1), &body["value"]), "{r}");
    }
    let (_, log) = app.get("/api/projections/cust-42/assertions?limit=2&offset=1", a).await;
    assert_eq!(log["total"], 7);
    assert_eq!(
        (&log["data"][0]["value"], &log["data"][0]["asserted_at"], &log["data"][1]["seq"]),
        (&json!("a@stale.example"), &json!("2023-06-01T00:00:00.000000Z"), &json!(3))
    );

    let text = r#"{"email":"a@old.example","score":2,"tier":{"level":2,"since":"2024"}}"#;
    let (s, first) = app.post("/api/projections/cust-42/rebuild", a, json!({})).await;
    assert_eq!(s, StatusCode::OK, "{first}");
    let snapshot = &first["data"];
    assert_eq!(snapshot["state"], serde_json::from_str::<Value>(text).unwrap());
    assert_eq!((&snapshot["content_hash"], &snapshot["assertion_count"], &snapshot["changed"]), (&json!(sha256_hex(text)), &json!(7), &json!(true)));
    let (s, second) = app.post("/api/projections/cust-42/rebuild", a, json!({})).await;
    assert_eq!(s, StatusCode::OK, "{second}");
    assert_eq!(
        (&second["data"]["content_hash"], &second["data"]["rebuilt_at"], &second["data"]["changed"]),
        (&snapshot["content_hash"], &snapshot["rebuilt_at"], &json!(false))
    );
    let (s, read) = app.get("/api/projections/cust-42", a).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        read["data"],
        json!({ "subject_id": "cust-42", "state": snapshot["state"], "content_hash": snapshot["content_hash"], "assertion_count": 7, "rebuilt_at": snapshot["rebuilt_at"] })
    );
    assert_eq!(rebuilt_payloads(&app, &t.a["tenant_id"]).await.len(), 1, "the same content rebuilt twice is one event");

    // Restating a value changes nothing; a new one does.
    app.post("/api/projections/cust-42/assertions", a, json!({ "attribute": "score", "value": 2 })).await;
    let (_, same) = app.post("/api/projections/cust-42/rebuild", a, json!({})).await;
    assert_eq!((&same["data"]["changed"], &same["data"]["assertion_count"]), (&json!(false), &json!(7)));
    app.post("/api/projections/cust-42/assertions", a, json!({ "attribute": "score", "value": 3 })).await;
    let (_, changed) = app.post("/api/projections/cust-42/rebuild", a, json!({})).await;
    let text = r#"{"email":"a@old.example","score":3,"tier":{"level":2,"since":"2024"}}"#;
    assert_eq!(
        (&changed["data"]["changed"], &changed["data"]["content_hash"], &changed["data"]["assertion_count"]),
        (&json!(true), &json!(sha256_hex(text)), &json!(9))
    );
    let payloads = rebuilt_payloads(&app, &t.a["tenant_id"]).await;
    assert_eq!(
        payloads[1],
        json!({ "subject_id": "cust-42", "content_hash": sha256_hex(text), "previous_hash": snapshot["content_hash"], "assertion_count": 9 })
    );
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "projection.assertion.recorded.v1").count(), 9);

    // The log is append-only, whoever writes to the database.
    let db = app.state().db.writer();
    let update = sqlx::query("UPDATE projection_assertion SET value = '1' WHERE subject_id = 'cust-42'").execute(db).await;
    assert!(update.unwrap_err().to_string().contains("projection assertions are append-only"));
    let delete = sqlx::query("DELETE FROM projection_assertion WHERE subject_id = 'cust-42'").execute(db).await;
    assert!(delete.unwrap_err().to_string().contains("projection assertions are append-only"));
}
db_test!(a_rebuild_keeps_the_latest_assertion_of_each_attribute_and_writes_only_a_change);

async fn subjects_are_each_tenants_own(app: TestApp) {
    let t = app.two_tenants("proj-iso").await;
    let (a, b) = (Some(t.a_token.as_str()), Some(t.b_token.as_str()));
    app.post("/api/projections", a, json!({ "subject_id": "shared name" })).await;
    app.post("/api/projections/shared%20name/assertions", a, json!({ "attribute": "x", "value": 1 })).await;
    let (s, mine) = app.post("/api/projections/shared%20name/rebuild", a, json!({})).await;
    assert_eq!(s, StatusCode::OK, "{mine}");

    // Another tenant sees none of it, whatever the body.
    for (m, path, body) in [
        (Method::GET, "/api/projections/shared%20name", None),
        (Method::GET, "/api/projections/shared%20name/assertions", None),
        (Method::POST, "/api/projections/shared%20name/assertions", Some(json!({ "attribute": "x", "value": 2 }))),
        (Method::POST, "/api/projections/shared%20name/assertions", Some(json!({}))),
        (Method::POST, "/api/projections/shared%20name/rebuild", Some(json!({}))),
    ] {
        assert_error(app.call(m.clone(), path, b, body.clone()).await, 404, "NotFound");
        assert_error(app.call(m, path, Some(&t.b_key), body).await, 404, "NotFound");
    }
    // The same name is B's own subject once B registers it.
    let (s, _) = app.post("/api/projections", b, json!({ "subject_id": "shared name" })).await;
    assert_eq!(s, StatusCode::CREATED);
    assert_error(app.get("/api/projections/shared%20name", b).await, 404, "NotFound");
    let (s, theirs) = app.post("/api/projections/shared%20name/rebuild", b, json!({})).await;
    assert_eq!(s, StatusCode::OK, "{theirs}");
    assert_eq!(
        (&theirs["data"]["state"], &theirs["data"]["content_hash"], &theirs["data"]["assertion_count"]),
        (&json!({}), &json!(sha256_hex("{}")), &json!(0))
    );
    let (_, still) = app.get("/api/projections/shared%20name", a).await;
    assert_eq!((&still["data"]["state"], &still["data"]["content_hash"]), (&json!({ "x": 1 }), &mine["data"]["content_hash"]));
}
db_test!(subjects_are_each_tenants_own);

async fn subjects_and_assertions_are_validated_in_one_answer(app: TestApp) {
    let t = app.two_tenants("proj-val").await;
    let a = Some(t.a_token.as_str());
    for (body, detail) in [
        (json!({}), "subject_id is required"),
        (json!({ "subject_id": "   " }), "subject_id is required"),
        (json!({ "subject_id": " padded" }), "subject_id must be 1 to 128 characters, without control characters or surrounding spaces"),
        (json!({ "subject_id": "x".repeat(129) }), "subject_id must be at most 128 characters"),
        (json!({ "subject_id": 7 }), "subject_id must be a string"),
        (json!({ "subject_id": "line\nbreak" }), "subject_id must be 1 to 128 characters, without control characters or surrounding spaces"),
    ] {
        let b = assert_error(app.post("/api/projections", a, body).await, 400, "ValidationError");
        assert_eq!(b["details"], json!([detail]));
    }
    let (s, _) = app.post("/api/projections", a, json!({ "subject_id": "p-1" })).await;
    assert_eq!(s, StatusCode::CREATED);
    assert_error(app.post("/api/projections", a, json!({ "subject_id": "p-1" })).await, 409, "Conflict");

    let b = assert_error(app.post("/api/projections/p-1/assertions", a, json!({ "source": "crm" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["attribute is required"]));
    // `value` may be null (a retraction), so its presence is checked once the body matches its schema.
    let b = assert_error(app.post("/api/projections/p-1/assertions", a, json!({ "attribute": "a", "source": "crm" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["value is required"]));
    let bad = json!({ "attribute": "a".repeat(129), "value": "v", "source": "s".repeat(129), "asserted_at": "soon" });
    let b = assert_error(app.post("/api/projections/p-1/assertions", a, bad).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!(["attribute must be at most 128 characters", "source must be at most 128 characters", "asserted_at must be an RFC 3339 timestamp"])
    );
    let bad = json!({ "attribute": "a\u{1}b", "value": "v".repeat(64 * 1024) });
    let b = assert_error(app.post("/api/projections/p-1/assertions", a, bad).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["attribute must be at most 128 characters, without control characters", "value must be at most 65536 bytes of JSON"]));
    let future = json!({ "attribute": "a", "value": 1, "asserted_at": "2999-01-01T00:00:00Z" });
    let b = assert_error(app.post("/api/projections/p-1/assertions", a, future).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["asserted_at must not be more than 5 minutes in the future"]));
    assert_error(app.post("/api/projections/p-2/assertions", a, json!({})).await, 404, "NotFound");
    assert_error(app.post(&format!("/api/projections/{}/rebuild", "x".repeat(129)), a, json!({})).await, 404, "NotFound");
    let (_, subject) = app.post("/api/projections/p-1/rebuild", a, json!({})).await;
    assert_eq!(subject["data"]["assertion_count"], 0, "refused assertions are not counted: {subject}");
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| e.starts_with("projection.assertion")).count(), 0);
}
db_test!(subjects_and_assertions_are_validated_in_one_answer);

async fn registered_subjects_are_listed_newest_first(app: TestApp) {
    let t = app.two_tenants("proj-list").await;
    let a = Some(t.a_token.as_str());
    for subject in ["first", "second", "third"] {
        let (s, r) = app.post("/api/projections", a, json!({ "subject_id": subject })).await;
        assert_eq!(s, StatusCode::CREATED, "{r}");
    }
    for _ in 0..2 {
        let (s, r) = app.post("/api/projections/second/assertions", a, json!({ "attribute": "x", "value": 1 })).await;
        assert_eq!(s, StatusCode::CREATED, "{r}");
    }
    let (s, list) = app.get("/api/projections", a).await;
    assert_eq!((s, list["total"].as_i64()), (StatusCode::OK, Some(3)), "{list}");
    let rows: Vec<(&str, i64)> =
        list["data"].as_array().unwrap().iter().map(|r| (r["subject_id"].as_str().unwrap(), r["assertion_count"].as_i64().unwrap())).collect();
    assert_eq!(rows, [("third", 0), ("second", 2), ("first", 0)]);
    assert!(list["data"][0]["created_at"].is_string());
    let (_, page) = app.get("/api/projections?limit=1&offset=2", a).await;
    assert_eq!((page["total"].as_i64(), page["data"].as_array().unwrap().len(), page["data"][0]["subject_id"].as_str()), (Some(3), 1, Some("first")));
    assert_error(app.get("/api/projections?limit=many", a).await, 400, "ValidationError");
    let (s, theirs) = app.get("/api/projections", Some(&t.b_token)).await;
    assert_eq!((s, theirs["total"].as_i64(), theirs["data"].clone()), (StatusCode::OK, Some(0), json!([])));
}
db_test!(registered_subjects_are_listed_newest_first);
