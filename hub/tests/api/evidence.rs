//! sdk-evidence: captures of an encounter, listed by encounter_id
//! (required), pointing at committed media blobs of the tenant only.

use aws_lc_rs::digest;
use reqwest::StatusCode;
use serde_json::json;

use crate::{db_test, helpers::*};

async fn captures_of_an_encounter_keep_their_blob_digest(app: TestApp) {
    let t = app.two_tenants("evidence").await;
    let a = t.a_token.as_str();
    // A committed photo, and one still pending.
    let photo = b"jpeg bytes of the meter";
    let (_, blob) = app.post("/api/media/blobs", Some(a), json!({ "content_type": "image/jpeg" })).await;
    let blob = blob["data"]["blob_id"].as_str().unwrap().to_string();
    let res = app.client.put(format!("{}/api/media/blobs/{blob}/content", app.base)).bearer_auth(a).body(photo.to_vec()).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let sum = hex::encode(digest::digest(&digest::SHA256, photo));
    let (s, _) = app.post(&format!("/api/media/blobs/{blob}/commit"), Some(a), json!({ "checksum_hex": sum })).await;
    assert_eq!(s, StatusCode::OK);
    let (_, pending) = app.post("/api/media/blobs", Some(a), json!({})).await;

    let (s, c) = app
        .post(
            "/api/evidence/captures",
            Some(a),
            json!({ "encounter_id": "visit-1", "kind": "photo", "blob_id": blob, "captured_at": "2026-01-01T10:00:00Z", "metadata": { "lens": "wide" } }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    assert_eq!((c["data"]["sha256"].as_str(), c["data"]["kind"].as_str()), (Some(sum.as_str()), Some("photo")));
    let (s, _) = app
        .post(
            "/api/evidence/captures",
            Some(a),
            json!({ "encounter_id": "visit-1", "kind": "note", "note": "meter sealed", "captured_at": "2026-01-01T09:00:00Z" }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    app.post("/api/evidence/captures", Some(a), json!({ "encounter_id": "visit-2", "kind": "note", "note": "other visit" })).await;

    let (s, list) = app.get("/api/evidence/captures?encounter_id=visit-1", Some(a)).await;
    assert_eq!((s, list["total"].as_i64()), (StatusCode::OK, Some(2)));
    let kinds: Vec<&str> = list["data"].as_array().unwrap().iter().map(|c| c["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["note", "photo"], "in the order captured");
    assert_error(app.get("/api/evidence/captures", Some(a)).await, 400, "ValidationError");
    assert_error(app.get("/api/evidence/captures?encounter_id=", Some(a)).await, 400, "ValidationError");
    let (_, none) = app.get("/api/evidence/captures?encounter_id=visit-1", Some(&t.b_token)).await;
    assert_eq!(none["total"], 0, "another tenant sees none of it");

    let pending = pending["data"]["blob_id"].as_str().unwrap();
    let b = assert_error(
        app.post("/api/evidence/captures", Some(a), json!({ "encounter_id": "v", "kind": "photo", "blob_id": pending })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["blob_id must be a committed blob (status ready)"]));
    let b = assert_error(
        app.post("/api/evidence/captures", Some(&t.b_token), json!({ "encounter_id": "v", "kind": "photo", "blob_id": blob })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["blob_id is not a media blob of this tenant"]));
    let b = assert_error(
        app.post("/api/evidence/captures", Some(a), json!({ "kind": "selfie", "blob_id": "b", "metadata": 1, "captured_at": "yesterday" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "encounter_id is required",
            "kind must be one of: photo, video, audio, document, signature, note, measurement",
            "blob_id must be a UUID",
            "metadata must be a JSON object",
            "captured_at must be an RFC 3339 timestamp"
        ])
    );
    let b = assert_error(app.post("/api/evidence/captures", Some(a), json!({ "encounter_id": "e\u{7}", "kind": "photo" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["encounter_id must be at most 128 characters, none of them control characters", "a capture needs a blob_id or a note"]));
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "evidence.capture.recorded.v1").count(), 3);
}
db_test!(captures_of_an_encounter_keep_their_blob_digest);

async fn one_capture_is_read_by_its_id(app: TestApp) {
    let t = app.two_tenants("evidence-one").await;
    let a = t.a_token.as_str();
    let (s, c) = app
        .post("/api/evidence/captures", Some(a), json!({ "encounter_id": "visit-9", "kind": "signature", "note": "signed", "metadata": { "pad": 2 } }))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let id = c["data"]["capture_id"].as_str().unwrap();
    let (s, one) = app.get(&format!("/api/evidence/captures/{id}"), Some(a)).await;
    assert_eq!((s, &one["data"]), (StatusCode::OK, &c["data"]));
    assert_eq!((one["data"]["metadata"].clone(), one["data"]["blob_id"].clone()), (json!({ "pad": 2 }), json!(null)));
    assert_error(app.get(&format!("/api/evidence/captures/{id}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get(&format!("/api/evidence/captures/{}", uuid::Uuid::now_v7()), Some(a)).await, 404, "NotFound");
    assert_error(app.get("/api/evidence/captures/visit-9", Some(a)).await, 404, "NotFound");
}
db_test!(one_capture_is_read_by_its_id);
