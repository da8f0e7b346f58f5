//! sdk-source-record: claims replaced only by superseding them, in one
//! transaction; no route changes or deletes a claim, and the database
//! refuses it too.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::{db_test, helpers::*};

async fn claims_are_superseded_never_changed_or_deleted(app: TestApp) {
    let t = app.two_tenants("claims").await;
    let a = t.a_token.as_str();
    let (s, c) = app
        .post(
            "/api/source-records/claims",
            Some(a),
            json!({ "subject_id": "person-1", "attribute": "email", "value": "a@old.example", "source": "crm", "source_ref": "row 7" }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let first = c["data"]["claim_id"].as_str().unwrap().to_string();
    assert_eq!((c["data"]["status"].as_str(), c["data"]["value"].as_str()), (Some("ACTIVE"), Some("a@old.example")));

    let (s, r) = app.post(&format!("/api/source-records/claims/{first}/supersede"), Some(a), json!({ "value": "a@new.example" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let second = r["data"]["successor"]["claim_id"].as_str().unwrap().to_string();
    assert_eq!((r["data"]["superseded"]["status"].as_str(), r["data"]["superseded"]["superseded_by"].as_str()), (Some("SUPERSEDED"), Some(second.as_str())));
    let s2 = &r["data"]["successor"];
    assert_eq!((s2["supersedes"].as_str(), s2["source"].as_str(), s2["attribute"].as_str()), (Some(first.as_str()), Some("crm"), Some("email")));
    assert_error(app.post(&format!("/api/source-records/claims/{first}/supersede"), Some(a), json!({ "value": "x" })).await, 409, "Conflict");
    let (s, r) = app.post(&format!("/api/source-records/claims/{second}/supersede"), Some(a), json!({ "value": "a@third.example", "source": "form" })).await;
    assert_eq!((s, r["data"]["successor"]["source"].as_str()), (StatusCode::CREATED, Some("form")));
    let (_, read) = app.get(&format!("/api/source-records/claims/{first}"), Some(a)).await;
    assert_eq!((read["data"]["status"].as_str(), read["data"]["value"].as_str()), (Some("SUPERSEDED"), Some("a@old.example")));

    // No route changes or deletes a claim; the database refuses it too.
    assert_error(app.call(Method::DELETE, &format!("/api/source-records/claims/{first}"), Some(a), None).await, 405, "MethodNotAllowed");
    assert_error(app.call(Method::PUT, &format!("/api/source-records/claims/{first}"), Some(a), Some(json!({ "value": "x" }))).await, 405, "MethodNotAllowed");
    let db = app.state().db.writer();
    let update = sqlx::query("UPDATE source_claim SET value = '\"forged\"' WHERE claim_id = $1").bind(&first).execute(db).await;
    assert!(update.unwrap_err().to_string().contains("a source claim changes only by being superseded"));
    let reactivate = sqlx::query("UPDATE source_claim SET status = 'ACTIVE' WHERE claim_id = $1").bind(&first).execute(db).await;
    assert!(reactivate.is_err(), "a superseded claim stays superseded");
    let delete = sqlx::query("DELETE FROM source_claim WHERE claim_id = $1").bind(&second).execute(db).await;
    assert!(delete.unwrap_err().to_string().contains("source claims are never deleted"));

    assert_error(app.get(&format!("/api/source-records/claims/{first}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.post(&format!("/api/source-records/claims/{second}/supersede"), Some(&t.b_token), json!({ "value": "x" })).await, 404, "NotFound");
    let b =
        assert_error(app.post("/api/source-records/claims", Some(a), json!({ "subject_id": "p", "attribute": "x".repeat(129) })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["attribute must be at most 128 characters", "value is required", "source is required"]));
    let big = json!({ "subject_id": "p", "attribute": "x", "value": "v".repeat(64 * 1024), "source": "crm", "observed_at": "soon" });
    let b = assert_error(app.post("/api/source-records/claims", Some(a), big).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["observed_at must be an RFC 3339 timestamp"]));
    // Matching its schema, the body still holds a value of at most 64 KiB.
    let big = json!({ "subject_id": "p", "attribute": "x", "value": "v".repeat(64 * 1024), "source": "crm" });
    let b = assert_error(app.post("/api/source-records/claims", Some(a), big).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["value must be at most 64 KiB of JSON"]));
    let b = assert_error(app.post(&format!("/api/source-records/claims/{second}/supersede"), Some(a), json!({ "value": null })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["value is required"]));
    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |n: &str| events.iter().filter(|e| *e == n).count();
    assert_eq!((count("source-record.claim.asserted.v1"), count("source-record.claim.superseded.v1")), (1, 2));
}
db_test!(claims_are_superseded_never_changed_or_deleted);

/// A subject's claims are listed (what is believed of it now: its active
/// ones), filtered by attribute, status and source, newest first.
async fn a_subjects_claims_are_listed_and_filtered(app: TestApp) {
    let t = app.two_tenants("claims-list").await;
    let a = t.a_token.as_str();
    let claim =
        |subject: &str, attribute: &str, value: &str, source: &str| json!({ "subject_id": subject, "attribute": attribute, "value": value, "source": source });
    let mut ids = Vec::new();
    for body in [
        claim("person-1", "email", "a@old.example", "crm"),
        claim("person-1", "phone", "+31 20 000", "form"),
        claim("person-2", "email", "b@example.com", "crm"),
    ] {
        let (s, c) = app.post("/api/source-records/claims", Some(a), body).await;
        assert_eq!(s, StatusCode::CREATED, "{c}");
        ids.push(c["data"]["claim_id"].as_str().unwrap().to_string());
    }
    let (s, r) = app.post(&format!("/api/source-records/claims/{}/supersede", ids[0]), Some(a), json!({ "value": "a@new.example" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let successor = r["data"]["successor"]["claim_id"].as_str().unwrap().to_string();

    let listed = |v: &serde_json::Value| v["data"].as_array().unwrap().iter().map(|c| c["claim_id"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let (s, all) = app.get("/api/source-records/claims", Some(a)).await;
    assert_eq!((s, &all["total"]), (StatusCode::OK, &json!(4)));
    assert_eq!(listed(&all), [successor.clone(), ids[2].clone(), ids[1].clone(), ids[0].clone()], "newest first");
    let (_, subject) = app.get("/api/source-records/claims?subject_id=person-1", Some(a)).await;
    assert_eq!(subject["total"], 3);
    let (_, now) = app.get("/api/source-records/claims?subject_id=person-1&status=ACTIVE", Some(a)).await;
    assert_eq!(listed(&now), [successor.clone(), ids[1].clone()]);
    let (_, email) = app.get("/api/source-records/claims?subject_id=person-1&attribute=email&status=ACTIVE", Some(a)).await;
    assert_eq!((listed(&email), &email["data"][0]["value"]), (vec![successor.clone()], &json!("a@new.example")));
    let (_, old) = app.get("/api/source-records/claims?status=SUPERSEDED", Some(a)).await;
    assert_eq!((listed(&old), &old["data"][0]["superseded_by"]), (vec![ids[0].clone()], &json!(successor)));
    let (_, crm) = app.get("/api/source-records/claims?source=crm", Some(a)).await;
    assert_eq!(crm["total"], 3);
    let (_, page) = app.get("/api/source-records/claims?subject_id=person-1&limit=1&offset=2", Some(a)).await;
    assert_eq!((&page["total"], listed(&page)), (&json!(3), vec![ids[0].clone()]));
    let (_, none) = app.get("/api/source-records/claims?subject_id=person-3", Some(a)).await;
    assert_eq!((&none["total"], &none["data"]), (&json!(0), &json!([])));
    let body =
        assert_error(app.get(&format!("/api/source-records/claims?status=active&subject_id={}", "s".repeat(129)), Some(a)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["subject_id must be at most 128 characters", "status must be one of: ACTIVE, SUPERSEDED"]));
    let (_, theirs) = app.get("/api/source-records/claims?subject_id=person-1", Some(&t.b_token)).await;
    assert_eq!((&theirs["total"], &theirs["data"]), (&json!(0), &json!([])));
}
db_test!(a_subjects_claims_are_listed_and_filtered);
