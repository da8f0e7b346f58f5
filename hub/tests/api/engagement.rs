//! sdk-engagement: encounters open, close (stamping the retention deadline)
//! and seal, each once and in that order.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn encounters_open_close_and_seal_with_their_retention(app: TestApp) {
    let t = app.two_tenants("encounters").await;
    let a = t.a_token.as_str();
    let (s, g) = app.post("/api/geo/addresses", Some(a), json!({ "lines": ["1 Clinic Road"], "country_code": "NL" })).await;
    assert_eq!(s, StatusCode::CREATED, "{g}");
    let address = g["data"]["address"]["address_id"].clone();
    let (s, e) = app
        .post(
            "/api/engagement/encounters",
            Some(a),
            json!({ "kind": "consultation", "vault_key_ref": "vault://enc/1", "retention_policy": "regulated", "address_id": address, "billing_ref": "order-7" }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{e}");
    let first = e["data"]["encounter_id"].as_str().unwrap().to_string();
    assert_eq!(
        (e["data"]["state"].as_str(), e["data"]["retention_policy"].as_str(), e["data"]["retention_days"].as_i64(), e["data"]["address_id"].clone()),
        (Some("open"), Some("regulated"), Some(2557), address.clone())
    );
    assert_eq!(
        (e["data"]["closed_at"].clone(), e["data"]["retention_expires_at"].clone(), e["data"]["sealed_at"].clone()),
        (Value::Null, Value::Null, Value::Null)
    );
    let (s, f) =
        app.post("/api/engagement/encounters", Some(a), json!({ "parent_encounter_id": first, "retention_policy": "custom", "retention_days": 30 })).await;
    assert_eq!(s, StatusCode::CREATED, "{f}");
    let second = f["data"]["encounter_id"].as_str().unwrap().to_string();
    assert_eq!(
        (f["data"]["kind"].as_str(), f["data"]["parent_encounter_id"].as_str(), f["data"]["retention_days"].as_i64()),
        (Some("visit"), Some(first.as_str()), Some(30))
    );

    let b = assert_error(
        app.post(
            "/api/engagement/encounters",
            Some(a),
            json!({ "kind": "Bad Kind", "retention_policy": "forever", "retention_days": 0, "parent_encounter_id": "x", "vault_key_ref": "k".repeat(257) }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "vault_key_ref must be at most 256 characters",
            "retention_policy must be one of: operational, regulated, custom",
            "retention_days must be an integer from 1 to 36500",
            "parent_encounter_id must be a UUID"
        ])
    );
    let b = assert_error(app.post("/api/engagement/encounters", Some(a), json!({ "kind": "Bad Kind" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["kind must be 1 to 64 of a-z, 0-9, '.', '_' or '-'"]));
    let b = assert_error(app.post("/api/engagement/encounters", Some(a), json!({ "retention_policy": "custom" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["retention_days is required with retention_policy custom"]));
    let b = assert_error(app.post("/api/engagement/encounters", Some(a), json!({ "retention_days": 5 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["retention_days is only for retention_policy custom"]));
    // References of another tenant are not this tenant's.
    let b = assert_error(
        app.post("/api/engagement/encounters", Some(&t.b_token), json!({ "parent_encounter_id": first, "address_id": address })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["parent_encounter_id is not an encounter of this tenant", "address_id is not an address of this tenant"]));

    // Seal before close is refused; close stamps the retention deadline.
    let b = assert_error(app.post(&format!("/api/engagement/encounters/{first}/seal"), Some(a), json!({})).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the encounter is open: only closed encounters can be sealed"]));
    let (s, c) = app.post(&format!("/api/engagement/encounters/{first}/close"), Some(a), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{c}");
    assert_eq!(c["data"]["state"], "closed");
    let closed = chrono::DateTime::parse_from_rfc3339(c["data"]["closed_at"].as_str().unwrap()).unwrap();
    let expires = chrono::DateTime::parse_from_rfc3339(c["data"]["retention_expires_at"].as_str().unwrap()).unwrap();
    assert_eq!((expires - closed).num_days(), 2557);
    let b = assert_error(app.post(&format!("/api/engagement/encounters/{first}/close"), Some(a), json!({})).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the encounter is closed: only open encounters can be closed"]));
    let (s, sealed) = app.post(&format!("/api/engagement/encounters/{first}/seal"), Some(a), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{sealed}");
    assert_eq!((sealed["data"]["state"].as_str(), sealed["data"]["retention_expires_at"].clone()), (Some("sealed"), c["data"]["retention_expires_at"].clone()));
    assert!(sealed["data"]["sealed_at"].is_string());
    assert_error(app.post(&format!("/api/engagement/encounters/{first}/seal"), Some(a), json!({})).await, 409, "Conflict");
    assert_error(app.post(&format!("/api/engagement/encounters/{first}/close"), Some(a), json!({})).await, 409, "Conflict");

    let (s, r) = app.get(&format!("/api/engagement/encounters/{first}"), Some(a)).await;
    assert_eq!((s, r["data"]["state"].as_str(), r["data"]["vault_key_ref"].as_str()), (StatusCode::OK, Some("sealed"), Some("vault://enc/1")));
    // Unknown, non-UUID and another tenant's: a bare NotFound.
    for path in [format!("/api/engagement/encounters/{}", uuid::Uuid::now_v7()), "/api/engagement/encounters/nope".to_string()] {
        let b = assert_error(app.get(&path, Some(a)).await, 404, "NotFound");
        assert_eq!(b, json!({ "success": false, "error": "NotFound" }));
    }
    assert_error(app.get(&format!("/api/engagement/encounters/{first}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.post(&format!("/api/engagement/encounters/{second}/close"), Some(&t.b_token), json!({})).await, 404, "NotFound");

    let (s, l) = app.get("/api/engagement/encounters", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    let ids: Vec<&str> = l["data"].as_array().unwrap().iter().map(|e| e["encounter_id"].as_str().unwrap()).collect();
    assert_eq!((ids, l["total"].as_i64()), (vec![second.as_str(), first.as_str()], Some(2)));
    let (_, l) = app.get("/api/engagement/encounters?state=open&limit=1", Some(a)).await;
    assert_eq!((l["data"][0]["encounter_id"].as_str(), l["total"].as_i64()), (Some(second.as_str()), Some(1)));
    let (_, l) = app.get("/api/engagement/encounters?limit=1&offset=1", Some(a)).await;
    assert_eq!((l["data"][0]["encounter_id"].as_str(), l["total"].as_i64()), (Some(first.as_str()), Some(2)));
    let b = assert_error(app.get("/api/engagement/encounters?limit=x&offset=-1", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["limit must be an integer", "offset must be 0 or more"]));
    let b = assert_error(app.get("/api/engagement/encounters?state=gone", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["state must be one of: open, closed, sealed"]));
    let (_, l) = app.get("/api/engagement/encounters", Some(&t.b_token)).await;
    assert_eq!(l["total"], 0);

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |ty: &str| events.iter().filter(|e| *e == ty).count();
    assert_eq!((count("engagement.encounter.opened.v1"), count("engagement.encounter.closed.v1"), count("engagement.encounter.sealed.v1")), (2, 1, 1));
}
db_test!(encounters_open_close_and_seal_with_their_retention);

async fn an_open_encounter_changes_its_references(app: TestApp) {
    let t = app.two_tenants("enc-patch").await;
    let a = t.a_token.as_str();
    let (_, first) =
        app.post("/api/engagement/encounters", Some(a), json!({ "kind": "consultation", "vault_key_ref": "vault://enc/1", "billing_ref": "order-1" })).await;
    let first = first["data"]["encounter_id"].as_str().unwrap().to_string();
    let (_, second) = app.post("/api/engagement/encounters", Some(a), json!({ "parent_encounter_id": first })).await;
    let second = second["data"]["encounter_id"].as_str().unwrap().to_string();
    let (s, c) = app.post("/api/crm/contacts", Some(a), json!({ "name": "Pat" })).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let contact = c["data"]["contact_id"].clone();
    let patch = |id: &str, body: Value| {
        let (app, path) = (&app, format!("/api/engagement/encounters/{id}"));
        async move { app.call(Method::PATCH, &path, Some(a), Some(body)).await }
    };

    let (s, e) = patch(&first, json!({ "vault_key_ref": "vault://enc/2", "contact_id": contact })).await;
    assert_eq!(s, StatusCode::OK, "{e}");
    assert_eq!((e["data"]["vault_key_ref"].clone(), e["data"]["contact_id"].clone()), (json!("vault://enc/2"), contact.clone()));
    assert_eq!(
        (e["data"]["billing_ref"].as_str(), e["data"]["kind"].as_str(), e["data"]["state"].as_str()),
        (Some("order-1"), Some("consultation"), Some("open")),
        "absent fields stay"
    );
    let (_, got) = app.get(&format!("/api/engagement/encounters/{first}"), Some(a)).await;
    assert_eq!(got["data"]["vault_key_ref"], "vault://enc/2");
    let (_, of_contact) = app.get(&format!("/api/engagement/encounters?contact_id={}", contact.as_str().unwrap()), Some(a)).await;
    assert_eq!(of_contact["total"], 1);

    // Refusals: nothing to change, references of nothing, a cycle.
    let body = assert_error(patch(&first, json!({})).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["at least one of vault_key_ref, parent_encounter_id, address_id, billing_ref, contact_id is required"]));
    let body = assert_error(patch(&first, json!({ "parent_encounter_id": first })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["parent_encounter_id must be another encounter"]));
    let body = assert_error(patch(&first, json!({ "parent_encounter_id": second })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["parent_encounter_id must not be an encounter that follows up this one"]));
    let nobody = uuid::Uuid::now_v7().to_string();
    let body = assert_error(patch(&first, json!({ "address_id": nobody, "contact_id": nobody })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["address_id is not an address of this tenant", "contact_id is not a contact of this tenant"]));
    assert_error(patch(&first, json!({ "billing_ref": "x".repeat(257) })).await, 400, "ValidationError");
    assert_error(patch(&nobody, json!({ "billing_ref": "b" })).await, 404, "NotFound");
    assert_error(patch("not-a-uuid", json!({ "billing_ref": "b" })).await, 404, "NotFound");
    assert_error(
        app.call(Method::PATCH, &format!("/api/engagement/encounters/{first}"), Some(&t.b_token), Some(json!({ "billing_ref": "b" }))).await,
        404,
        "NotFound",
    );

    // Only while open.
    let (s, _) = app.post(&format!("/api/engagement/encounters/{second}/close"), Some(a), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    let body = assert_error(patch(&second, json!({ "billing_ref": "late" })).await, 409, "Conflict");
    assert_eq!(body["details"][0], "the encounter is closed: only open encounters can be changed");
    let updated = app.events_of(&t.a["tenant_id"]).await.into_iter().filter(|e| e == "engagement.encounter.updated.v1").count();
    assert_eq!(updated, 1);
}
db_test!(an_open_encounter_changes_its_references);
