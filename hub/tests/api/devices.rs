//! Devices, attestation, device-person links, diagnostics and the hdk
//! records, manifests and outbox.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

fn device_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

async fn register(app: &TestApp, token: &str, device: &str) -> Value {
    let (s, body) = app
        .post(
            "/api/devices",
            Some(token),
            json!({ "device_uuid": device, "platform": "ios", "os_version": "18.1", "app_version": "1.0", "device_key_ref": "se-key-1" }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    body["data"].clone()
}

async fn devices_upsert_on_device_uuid(app: TestApp) {
    let t = app.signup("dev@example.com", "dev").await;
    let token = t["token"].as_str().unwrap();
    let id = device_id();
    let first = register(&app, token, &id).await;
    assert_eq!(first["created"], true);
    assert_eq!(first["status"], "active");
    assert_eq!(first["platform"], "ios");
    // Re-registering updates versions and last_seen_at; an omitted key ref is kept.
    let (s, again) = app.post("/api/devices", Some(token), json!({ "device_uuid": id, "platform": "ios", "os_version": "18.2", "app_version": "1.1" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let again = &again["data"];
    assert_eq!(again["created"], false);
    assert_eq!(again["os_version"], "18.2");
    assert_eq!(again["app_version"], "1.1");
    assert_eq!(again["device_key_ref"], "se-key-1");
    assert!(again["last_seen_at"].as_str().unwrap() > first["last_seen_at"].as_str().unwrap());
    let body = assert_error(app.post("/api/devices", Some(token), json!({ "device_uuid": "nope", "platform": "palm" })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["device_uuid must be a UUID", "platform must be one of: ios, android, web, desktop"]));
    let (s, got) = app.get(&format!("/api/devices/{id}"), Some(token)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(got["data"]["device_uuid"], id);
    assert_error(app.get("/api/devices/not-a-uuid", Some(token)).await, 404, "NotFound");

    // Revocation: the reason becomes the status; re-registering does not undo it.
    assert_error(app.post(&format!("/api/devices/{id}/revoke"), Some(token), json!({ "reason": "lost" })).await, 400, "ValidationError");
    let (s, r) = app.post(&format!("/api/devices/{id}/revoke"), Some(token), json!({ "reason": "stolen" })).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(r["data"]["status"], "stolen");
    let (_, again) = app.post("/api/devices", Some(token), json!({ "device_uuid": id, "platform": "ios" })).await;
    assert_eq!(again["data"]["status"], "stolen");
    let other = device_id();
    register(&app, token, &other).await;
    let (_, r) = app.post(&format!("/api/devices/{other}/revoke"), Some(token), json!({ "reason": "revoked" })).await;
    assert_eq!(r["data"]["status"], "revoked");
}
db_test!(devices_upsert_on_device_uuid);

fn envelope(key: &device_core::attestation::SoftwareKey, method: &str, device: &str, challenge: &str) -> Value {
    let env = device_core::attestation::build_envelope(method, device, "se-key-1", &key.public_key(), challenge, |m| Ok(key.sign(m))).unwrap();
    serde_json::to_value(env).unwrap()
}

async fn challenge(app: &TestApp, token: &str, device: &str) -> String {
    let (s, c) = app.post(&format!("/api/devices/{device}/challenge"), Some(token), json!({})).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    c["data"]["challenge"].as_str().unwrap().to_string()
}

async fn attestations_are_verified_by_the_hub(app: TestApp) {
    let t = app.signup("att@example.com", "att").await;
    let token = t["token"].as_str().unwrap();
    let id = device_id();
    register(&app, token, &id).await;
    let key = device_core::attestation::SoftwareKey::generate();
    let path = format!("/api/devices/{id}/attest");

    // A good envelope over a hub-issued challenge verifies, whatever the body claims.
    let c = challenge(&app, token, &id).await;
    let (s, a) = app.post(&path, Some(token), json!({ "method": "secure-enclave", "signature_envelope": envelope(&key, "secure-enclave", &id, &c), "verified": false, "expires_at": "2030-01-01T00:00:00Z" })).await;
    assert_eq!(s, StatusCode::CREATED, "{a}");
    assert_eq!(a["data"]["verified"], true);
    assert_eq!(a["data"]["expires_at"], "2030-01-01T00:00:00.000000Z");
    // The same challenge cannot be used twice.
    let (_, a) = app.post(&path, Some(token), json!({ "method": "secure-enclave", "signature_envelope": envelope(&key, "secure-enclave", &id, &c) })).await;
    assert_eq!(a["data"]["verified"], false);
    assert_eq!(a["data"]["failure_reason"], "the challenge has already been used");
    // A challenge the hub never issued.
    let (_, a) =
        app.post(&path, Some(token), json!({ "method": "secure-enclave", "signature_envelope": envelope(&key, "secure-enclave", &id, "made-up") })).await;
    assert_eq!(a["data"]["verified"], false);
    // A tampered envelope does not verify.
    let c = challenge(&app, token, &id).await;
    let mut forged = envelope(&key, "secure-enclave", &id, &c);
    forged["key_ref"] = json!("another-key");
    let (_, a) = app.post(&path, Some(token), json!({ "method": "secure-enclave", "signature_envelope": forged })).await;
    assert_eq!(a["data"]["verified"], false, "{a}");
    // Another key than the one pinned at the first verified attestation.
    let c = challenge(&app, token, &id).await;
    let intruder = device_core::attestation::SoftwareKey::generate();
    let (_, a) =
        app.post(&path, Some(token), json!({ "method": "secure-enclave", "signature_envelope": envelope(&intruder, "secure-enclave", &id, &c) })).await;
    assert_eq!(a["data"]["verified"], false);
    assert_eq!(a["data"]["failure_reason"], "the envelope is signed by a key other than the device's attested key");
    // As JSON text, the envelope works too.
    let c = challenge(&app, token, &id).await;
    let (_, a) =
        app.post(&path, Some(token), json!({ "method": "secure-enclave", "signature_envelope": envelope(&key, "secure-enclave", &id, &c).to_string() })).await;
    assert_eq!(a["data"]["verified"], true);
    let body = assert_error(app.post(&path, Some(token), json!({ "method": "fingerprint" })).await, 400, "ValidationError");
    assert_eq!(body["details"].as_array().unwrap().len(), 2);
    // The vocabulary is closed: an unregistered type refuses the whole push, nothing is stored.
    let unknown = json!({ "rows": [
        { "event_type": "diagnostic.health.reported.v1", "payload": {}, "idempotency_key": "new" },
        { "event_type": "shop.order.placed.v1", "payload": {}, "idempotency_key": "new2" },
    ] });
    let body = assert_error(app.post("/api/hdk/diagnostic/outbox", Some(token), unknown).await, 400, "ValidationError");
    assert_eq!(
        body["details"],
        json!(["rows[1].event_type shop.order.placed.v1 is neither a platform event type nor one of the tenant's (register it with POST /api/events/types)"])
    );
    let (_, got) = app.get(&format!("/api/devices/{id}"), Some(token)).await;
    assert_eq!(got["data"]["attested"], true);
}
db_test!(attestations_are_verified_by_the_hub);

async fn persons_are_linked_to_devices(app: TestApp) {
    let t = app.signup("lk@example.com", "lk").await;
    let token = t["token"].as_str().unwrap();
    let id = device_id();
    register(&app, token, &id).await;
    let path = format!("/api/devices/{id}/link-person");
    let (s, l) = app.post(&path, Some(token), json!({ "person_id": t["person_id"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{l}");
    assert_eq!(l["data"]["status"], "active");
    let (s, _) = app.post(&path, Some(token), json!({ "person_id": t["person_id"] })).await;
    assert_eq!(s, StatusCode::OK, "linking again is idempotent");
    // A person who is not a member of the tenant.
    let (_, reg) = app.post("/api/auth/register", None, json!({ "email": "out@example.com", "password": "out password", "display_name": "O" })).await;
    assert_error(app.post(&path, Some(token), json!({ "person_id": reg["data"]["person_id"] })).await, 400, "ValidationError");
    let (s, list) = app.get(&format!("/api/devices/{id}/persons"), Some(token)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
    assert_eq!(list["data"][0]["person_id"], t["person_id"]);
    assert_error(app.post(&format!("/api/devices/{}/link-person", device_id()), Some(token), json!({ "person_id": t["person_id"] })).await, 404, "NotFound");
}
db_test!(persons_are_linked_to_devices);

async fn devices_are_listed_and_person_links_suspended_and_revoked(app: TestApp) {
    let t = app.signup("dl@example.com", "dl").await;
    let token = t["token"].as_str().unwrap();
    let person = t["person_id"].as_str().unwrap();
    let (first, second, third) = (device_id(), device_id(), device_id());
    register(&app, token, &first).await;
    let (s, d) = app.post("/api/devices", Some(token), json!({ "device_uuid": second, "platform": "android" })).await;
    assert_eq!(s, StatusCode::CREATED, "{d}");
    register(&app, token, &third).await;
    let (s, _) = app.post(&format!("/api/devices/{third}/revoke"), Some(token), json!({ "reason": "stolen" })).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = app.post(&format!("/api/devices/{first}/link-person"), Some(token), json!({ "person_id": person })).await;
    assert_eq!(s, StatusCode::CREATED);
    let ids = |v: &Value| v["data"].as_array().unwrap().iter().map(|d| d["device_uuid"].as_str().unwrap().to_string()).collect::<Vec<_>>();

    let (s, all) = app.get("/api/devices", Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{all}");
    assert_eq!((ids(&all), all["total"].as_i64()), (vec![third.clone(), second.clone(), first.clone()], Some(3)), "newest first");
    assert_eq!(all["data"][0]["status"], "stolen");
    for (query, expected) in [
        ("platform=android".to_string(), vec![second.clone()]),
        ("status=stolen".to_string(), vec![third.clone()]),
        ("platform=ios&status=active".to_string(), vec![first.clone()]),
        (format!("person_id={}", person.to_uppercase()), vec![first.clone()]),
        ("platform=web".to_string(), vec![]),
    ] {
        let (s, page) = app.get(&format!("/api/devices?{query}"), Some(token)).await;
        assert_eq!(s, StatusCode::OK, "{page}");
        assert_eq!((ids(&page), page["total"].as_i64()), (expected.clone(), Some(expected.len() as i64)), "{query}");
    }
    let (_, paged) = app.get("/api/devices?limit=1&offset=2", Some(token)).await;
    assert_eq!((ids(&paged), paged["total"].as_i64()), (vec![first.clone()], Some(3)));
    let body = assert_error(app.get("/api/devices?platform=palm&status=lost&person_id=x", Some(token)).await, 400, "ValidationError");
    assert_eq!(
        body["details"],
        json!(["platform must be one of: ios, android, web, desktop", "status must be one of: active, revoked, stolen", "person_id must be a UUID"])
    );

    // A link is suspended, then revoked; linking again makes it active.
    let link = format!("/api/devices/{first}/persons/{person}");
    let (s, suspended) = app.post(&format!("{link}/suspend"), Some(token), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{suspended}");
    assert_eq!((suspended["data"]["status"].as_str(), suspended["data"]["person_id"].as_str()), (Some("suspended"), Some(person)));
    let (s, again) = app.post(&format!("{link}/suspend"), Some(token), json!({})).await;
    assert_eq!((s, &again["data"]), (StatusCode::OK, &suspended["data"]), "suspending again answers the same");
    let (_, none) = app.get(&format!("/api/devices?person_id={person}"), Some(token)).await;
    assert_eq!(none["total"], 0, "a suspended link does not count");
    let (_, links) = app.get(&format!("/api/devices/{first}/persons?status=suspended"), Some(token)).await;
    assert_eq!((links["data"][0]["person_id"].as_str(), links["total"].as_i64()), (Some(person), Some(1)));
    let (s, revoked) = app.post(&format!("{link}/revoke"), Some(token), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{revoked}");
    assert_eq!(revoked["data"]["status"], "revoked");
    let (s, again) = app.post(&format!("{link}/revoke"), Some(token), json!({})).await;
    assert_eq!((s, &again["data"]), (StatusCode::OK, &revoked["data"]), "revoking again answers the same");
    let body = assert_error(app.post(&format!("{link}/suspend"), Some(token), json!({})).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the link is revoked: only an active link can be suspended"]));
    let (_, active) = app.get(&format!("/api/devices/{first}/persons?status=active"), Some(token)).await;
    assert_eq!(active["total"], 0);
    let (s, relinked) = app.post(&format!("/api/devices/{first}/link-person"), Some(token), json!({ "person_id": person })).await;
    assert_eq!((s, relinked["data"]["status"].as_str()), (StatusCode::OK, Some("active")));
    // An active link is revoked directly too.
    let (s, r) = app.post(&format!("{link}/revoke"), Some(token), json!({})).await;
    assert_eq!((s, r["data"]["status"].as_str()), (StatusCode::OK, Some("revoked")));
    // No link, no device, no UUID: not found.
    assert_error(app.post(&format!("/api/devices/{second}/persons/{person}/revoke"), Some(token), json!({})).await, 404, "NotFound");
    assert_error(app.post(&format!("/api/devices/{}/persons/{person}/suspend", device_id()), Some(token), json!({})).await, 404, "NotFound");
    assert_error(app.post(&format!("/api/devices/{first}/persons/nope/revoke"), Some(token), json!({})).await, 404, "NotFound");
    let (s, page) = app.get(&format!("/api/devices/{first}/persons?limit=1"), Some(token)).await;
    assert_eq!((s, page["total"].as_i64(), page["data"].as_array().unwrap().len()), (StatusCode::OK, Some(1), 1));
    let body = assert_error(app.get(&format!("/api/devices/{first}/persons?status=gone"), Some(token)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["status must be one of: active, suspended, revoked"]));

    let link_events: Vec<String> = app.events_of(&t["tenant_id"]).await.into_iter().filter(|e| e.starts_with("device.person.")).collect();
    assert_eq!(
        link_events,
        ["device.person.linked.v1", "device.person.suspended.v1", "device.person.unlinked.v1", "device.person.linked.v1", "device.person.unlinked.v1"]
    );
}
db_test!(devices_are_listed_and_person_links_suspended_and_revoked);

async fn every_attestation_attempt_can_be_read(app: TestApp) {
    let t = app.signup("al@example.com", "al").await;
    let token = t["token"].as_str().unwrap();
    let id = device_id();
    register(&app, token, &id).await;
    let key = device_core::attestation::SoftwareKey::generate();
    let path = format!("/api/devices/{id}/attest");
    let c = challenge(&app, token, &id).await;
    let (_, good) = app.post(&path, Some(token), json!({ "method": "secure-enclave", "signature_envelope": envelope(&key, "secure-enclave", &id, &c) })).await;
    let (_, bad) = app.post(&path, Some(token), json!({ "method": "app-attest", "signature_envelope": envelope(&key, "app-attest", &id, "made-up") })).await;
    assert_eq!((good["data"]["verified"].clone(), bad["data"]["verified"].clone()), (json!(true), json!(false)));
    let list = format!("/api/devices/{id}/attestations");
    let (s, all) = app.get(&list, Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{all}");
    assert_eq!(all["total"], 2);
    assert_eq!(all["data"], json!([bad["data"], good["data"]]), "newest first, as the attest answered");
    assert!(!all.to_string().contains("signature"), "never the envelope: {all}");
    let (_, only) = app.get(&format!("{list}?method=secure-enclave"), Some(token)).await;
    assert_eq!((only["data"].clone(), only["total"].as_i64()), (json!([good["data"]]), Some(1)));
    let (_, paged) = app.get(&format!("{list}?limit=1&offset=1"), Some(token)).await;
    assert_eq!((paged["data"].clone(), paged["total"].as_i64()), (json!([good["data"]]), Some(2)));
    let body = assert_error(app.get(&format!("{list}?method=face"), Some(token)).await, 400, "ValidationError");
    assert!(body["details"][0].as_str().unwrap().starts_with("method must be one of"), "{body}");
    assert_error(app.get(&format!("/api/devices/{}/attestations", device_id()), Some(token)).await, 404, "NotFound");
    // Another device's attempts are not this one's.
    let other = device_id();
    register(&app, token, &other).await;
    let (_, empty) = app.get(&format!("/api/devices/{other}/attestations"), Some(token)).await;
    assert_eq!((empty["data"].clone(), empty["total"].as_i64()), (json!([]), Some(0)));
}
db_test!(every_attestation_attempt_can_be_read);

/// Each device write records its event in the tenant's chain, in the same
/// transaction; a refused write records nothing.
async fn device_writes_record_their_events(app: TestApp) {
    let t = app.signup("ev@example.com", "ev").await;
    let token = t["token"].as_str().unwrap();
    let id = device_id();
    register(&app, token, &id).await;
    let key = device_core::attestation::SoftwareKey::generate();
    let c = challenge(&app, token, &id).await;
    let (s, _) = app
        .post(
            &format!("/api/devices/{id}/attest"),
            Some(token),
            json!({ "method": "secure-enclave", "signature_envelope": envelope(&key, "secure-enclave", &id, &c) }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, _) = app.post(&format!("/api/devices/{id}/link-person"), Some(token), json!({ "person_id": t["person_id"] })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, _) = app.post("/api/diagnostic/crash", Some(token), json!({ "device_uuid": id, "stack_envelope": "secret stack" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, _) = app.post("/api/diagnostic/snapshots", Some(token), json!({ "device_uuid": id, "status": "ok" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, _) = app.post(&format!("/api/devices/{id}/revoke"), Some(token), json!({ "reason": "stolen" })).await;
    assert_eq!(s, StatusCode::OK);
    assert_error(app.post(&format!("/api/devices/{id}/revoke"), Some(token), json!({ "reason": "lost" })).await, 400, "ValidationError");
    let device_events: Vec<String> =
        app.events_of(&t["tenant_id"]).await.into_iter().filter(|e| e.starts_with("device.") || e.starts_with("diagnostic.")).collect();
    assert_eq!(
        device_events,
        [
            "device.device.registered.v1",
            "device.device.attested.v1",
            "device.person.linked.v1",
            "diagnostic.crash.reported.v1",
            "diagnostic.health.reported.v1",
            "device.device.revoked.v1"
        ]
    );
    let payloads: Vec<String> =
        sqlx::query_scalar("SELECT payload FROM audit_entry WHERE event_type = 'diagnostic.crash.reported.v1'").fetch_all(&app.state().db.read).await.unwrap();
    assert!(!payloads[0].contains("secret stack"), "the stack stays out of the chain: {}", payloads[0]);
}
db_test!(device_writes_record_their_events);

async fn crashes_and_health_are_recorded_per_device(app: TestApp) {
    let t = app.signup("cr@example.com", "cr").await;
    let token = t["token"].as_str().unwrap();
    let id = device_id();
    register(&app, token, &id).await;
    let body = assert_error(app.get("/api/diagnostic/crash", Some(token)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["device_uuid is required"]));
    let (s, empty) = app.get(&format!("/api/diagnostic/crash?device_uuid={id}"), Some(token)).await;
    assert_eq!((s, empty["data"].clone()), (StatusCode::OK, json!([])));
    for at in ["2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"] {
        let (s, c) = app.post("/api/diagnostic/crash", Some(token), json!({ "device_uuid": id, "occurred_at": at, "stack_envelope": "c3RhY2s=", "app_version": "1.0", "os_version": "18", "person_id": t["person_id"], "tenant_id": t["tenant_id"] })).await;
        assert_eq!(s, StatusCode::CREATED, "{c}");
    }
    let (_, list) = app.get(&format!("/api/diagnostic/crash?device_uuid={id}"), Some(token)).await;
    let list = list["data"].as_array().unwrap().clone();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["occurred_at"], "2026-02-01T00:00:00.000000Z", "newest first");
    let (s, one) = app.get(&format!("/api/diagnostic/crash/{}", list[1]["id"].as_str().unwrap()), Some(token)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(one["data"]["stack_envelope"], "c3RhY2s=");
    assert_error(app.post("/api/diagnostic/crash", Some(token), json!({ "device_uuid": device_id(), "stack_envelope": "x" })).await, 400, "ValidationError");
    assert_error(
        app.post("/api/diagnostic/crash", Some(token), json!({ "device_uuid": id, "stack_envelope": "x", "tenant_id": device_id() })).await,
        403,
        "TenantMismatch",
    );

    // Health: the public read says only the latest status.
    let (_, h) = app.get(&format!("/api/diagnostic/health?device_uuid={id}"), None).await;
    assert_eq!(h["data"]["status"], "unknown");
    for (status, at) in [("ok", "2026-01-01T00:00:00Z"), ("degraded", "2026-01-02T00:00:00Z")] {
        let (s, _) = app
            .post("/api/diagnostic/snapshots", Some(token), json!({ "device_uuid": id, "status": status, "metrics": { "battery_pct": 12 }, "taken_at": at }))
            .await;
        assert_eq!(s, StatusCode::CREATED);
    }
    let (s, h) = app.get(&format!("/api/diagnostic/health?device_uuid={id}"), Some("garbage")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(h["data"], json!({ "device_uuid": id, "status": "degraded", "taken_at": "2026-01-02T00:00:00.000000Z" }));
}
db_test!(crashes_and_health_are_recorded_per_device);

async fn the_hdk_outbox_drains_oldest_first_exactly_once(app: TestApp) {
    let t = app.signup("ob@example.com", "ob").await;
    let token = t["token"].as_str().unwrap();
    let rows: Vec<Value> =
        (0..5).map(|i| json!({ "event_type": "diagnostic.health.reported.v1", "payload": { "i": i }, "idempotency_key": format!("k{i}") })).collect();
    let (s, pushed) = app.post("/api/hdk/diagnostic/outbox", Some(token), json!({ "rows": rows })).await;
    assert_eq!(s, StatusCode::CREATED, "{pushed}");
    assert_eq!(pushed["data"]["accepted"].as_array().unwrap().len(), 5);
    let (_, again) = app.post("/api/hdk/diagnostic/outbox", Some(token), json!({ "rows": [rows[0]] })).await;
    assert_eq!(again["data"]["duplicates"], json!(["k0"]));
    let body = assert_error(
        app.post("/api/hdk/diagnostic/outbox", Some(token), json!({ "rows": [{ "event_type": "bad", "payload": null }], "device_uuid": "nope" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["device_uuid must be a UUID", "rows[0].payload is required", "rows[0].idempotency_key is required"]));
    // Matching its schema, a row still names an event type of the form the platform's take.
    let body = assert_error(
        app.post("/api/hdk/diagnostic/outbox", Some(token), json!({ "rows": [{ "event_type": "bad", "payload": {}, "idempotency_key": "k9" }] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["rows[0].event_type must look like <domain>.<entity>.<verb>.v<N>"]));
    let body = assert_error(app.post("/api/hdk/diagnostic/outbox", Some(token), json!({ "rows": [] })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["rows must hold 1 to 500 items"]));

    let (s, d) = app.post("/api/hdk/diagnostic/drain", Some(token), json!({ "limit": 2 })).await;
    assert_eq!(s, StatusCode::OK, "{d}");
    assert_eq!(d["data"]["count"], 2);
    assert_eq!(d["data"]["rows"][0]["payload"], json!({ "i": 0 }));
    assert_eq!(d["data"]["rows"][1]["payload"], json!({ "i": 1 }));
    assert!(d["data"]["rows"][0]["drained_at"].is_string());
    // No body: the default limit takes the rest.
    let res = app.client.post(format!("{}/api/hdk/diagnostic/drain", app.base)).bearer_auth(token).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let d: Value = res.json().await.unwrap();
    assert_eq!(d["data"]["count"], 3);
    let (_, d) = app.post("/api/hdk/diagnostic/drain", Some(token), json!({})).await;
    assert_eq!(d["data"], json!({ "count": 0, "rows": [] }));
    let body = assert_error(app.post("/api/hdk/diagnostic/drain", Some(token), json!({ "limit": "ten" })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["limit must be an integer from 1 to 1000"]));
    // Each drain that took rows is an event; the empty one is not.
    let drained = app.events_of(&t["tenant_id"]).await.into_iter().filter(|e| e == "diagnostic.outbox.drained.v1").count();
    assert_eq!(drained, 2);
}
db_test!(the_hdk_outbox_drains_oldest_first_exactly_once);

async fn identity_claims_permissions_measurements_and_watermarks(app: TestApp) {
    let t = app.signup("hdk@example.com", "hdk").await;
    let token = t["token"].as_str().unwrap();
    let id = device_id();
    // Identity claims: neither credential is fine; envelopes never come back.
    let (s, c) = app.post("/api/hdk/idp/claims", Some(token), json!({ "device_uuid": id, "person_id": t["person_id"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    assert_eq!((c["data"]["has_pin"].clone(), c["data"]["has_biometric_template"].clone()), (json!(false), json!(false)));
    let (s, c) = app
        .post(
            "/api/hdk/idp/claims",
            Some(token),
            json!({ "device_uuid": id, "person_id": t["person_id"], "pin_envelope": "cGlu", "biometric_template_envelope": "YmlvbWV0cmlj" }),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "an upsert of an existing claim");
    assert_eq!(c["data"]["has_pin"], true);
    let sealed: Vec<u8> = sqlx::query_scalar("SELECT pin_envelope FROM hdk_idp_claim").fetch_one(&app.state().db.read).await.unwrap();
    assert!(!sealed.windows(3).any(|w| w == b"pin"), "sealed at rest");
    assert_error(
        app.post("/api/hdk/idp/claims", Some(token), json!({ "device_uuid": id, "person_id": t["person_id"], "pin_envelope": "not base64!" })).await,
        400,
        "ValidationError",
    );
    let (s, got) = app.get(&format!("/api/hdk/idp/claims?device_uuid={id}"), Some(token)).await;
    assert_eq!(s, StatusCode::OK);
    assert!(!got.to_string().contains("cGlu"));
    let body = assert_error(app.post("/api/hdk/idp/claims", Some(token), json!({})).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["device_uuid is required", "person_id is required"]));

    // Permission snapshots: newest by taken_at, whatever the arrival order.
    for (set, at) in [(json!({ "camera": "granted" }), "2026-03-01T00:00:00Z"), (json!({ "camera": "denied" }), "2026-01-01T00:00:00Z")] {
        let (s, _) = app
            .post(
                "/api/hdk/permissions/snapshots",
                Some(token),
                json!({ "device_uuid": id, "persona_id": t["persona_id"], "permission_set": set, "taken_at": at }),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED);
    }
    let (s, latest) = app.get(&format!("/api/hdk/permissions/snapshots/latest?device_uuid={id}"), Some(token)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(latest["data"]["permission_set"], json!({ "camera": "granted" }));
    assert_eq!(latest["data"]["tenant_id"], t["tenant_id"]);
    assert_eq!(latest["data"]["persona_id"], t["persona_id"]);
    assert_error(app.get(&format!("/api/hdk/permissions/snapshots/latest?device_uuid={}", device_id()), Some(token)).await, 404, "NotFound");

    // Measurements and watermarks: required query, empty list when unknown.
    assert_error(app.get("/api/hdk/measure/measurements", Some(token)).await, 400, "ValidationError");
    let (s, empty) = app.get("/api/hdk/measure/measurements?capture_id=nothing", Some(token)).await;
    assert_eq!((s, empty.clone()), (StatusCode::OK, json!({ "success": true, "data": [], "total": 0 })));
    let (s, m) = app.post("/api/hdk/measure/measurements", Some(token), json!({ "capture_id": "cap-1", "kind": "distance", "value": 0, "unit": "m" })).await;
    assert_eq!(s, StatusCode::CREATED, "0 is a value: {m}");
    let (_, list) = app.get("/api/hdk/measure/measurements?capture_id=cap-1", Some(token)).await;
    assert_eq!(list["data"][0]["value"], json!(0.0));
    assert_error(app.get("/api/hdk/watermark/applications", Some(token)).await, 400, "ValidationError");
    let (_, empty) = app.get("/api/hdk/watermark/applications?variant_id=v", Some(token)).await;
    assert_eq!(empty["data"], json!([]));
    let (s, _) =
        app.post("/api/hdk/watermark/applications", Some(token), json!({ "variant_id": "v", "watermark_kind": "visible", "payload": { "text": "(c)" } })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, list) = app.get("/api/hdk/watermark/applications?variant_id=v", Some(token)).await;
    assert_eq!(list["data"][0]["payload"], json!({ "text": "(c)" }));
}
db_test!(identity_claims_permissions_measurements_and_watermarks);

async fn manifests_state_the_documented_capabilities(app: TestApp) {
    let t = app.signup("mf@example.com", "mf").await;
    let token = t["token"].as_str();
    let (s, cam) = app.get("/api/hdk/camera/manifest", token).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(cam["data"]["photo_formats"], json!(["jpeg", "heic", "raw_dng"]));
    assert_eq!(cam["data"]["video_codecs"], json!(["h264", "hevc", "av1"]));
    assert_eq!(cam["data"]["max_photo_megapixels"], 48);
    assert_eq!(cam["data"]["max_video"], json!({ "resolution": "4K", "fps": 60 }));
    let (_, ed) = app.get("/api/hdk/image-editor/manifest", token).await;
    assert_eq!(ed["data"]["tools"], json!(["crop", "rotate", "flip", "markup", "text", "blur", "sharpen", "filter"]));
    assert_eq!(ed["data"]["filters"].as_array().unwrap().len(), 5);
    assert_eq!(ed["data"]["output_formats"], json!(["jpeg", "png", "heic"]));
    let (_, map) = app.get("/api/hdk/map/manifest", token).await;
    assert_eq!(map["data"]["overlays"], json!(["pin", "polyline", "polygon", "heatmap", "cluster"]));
    assert_eq!(map["data"]["routing_modes"], json!(["driving", "walking", "cycling", "transit"]));
    let (_, sc) = app.get("/api/hdk/scanner/manifest", token).await;
    assert_eq!(sc["data"]["symbologies"], json!(["qr_code", "pdf_417", "code_128", "ean_13", "data_matrix"]));
    let (_, v) = app.get("/api/hdk/video-editor/manifest", token).await;
    assert_eq!(v["data"]["tools"], json!(["trim", "merge", "caption", "mute", "speed", "overlay"]));
    assert_eq!(v["data"]["output_formats"], json!(["mp4", "hevc", "webm"]));
    assert_eq!(v["data"]["max_resolution"], "4K");
}
db_test!(manifests_state_the_documented_capabilities);

/// Every device and hdk route: another tenant's resources are 404, and a
/// key lacking the scope is 403 naming the scope.
async fn device_routes_are_isolated_and_scoped(app: TestApp) {
    let t = app.two_tenants("dev").await;
    let a_token = t.a_token.as_str();
    let id = device_id();
    register(&app, a_token, &id).await;
    let (_, crash) = app.post("/api/diagnostic/crash", Some(a_token), json!({ "device_uuid": id, "stack_envelope": "x" })).await;
    app.post("/api/hdk/idp/claims", Some(a_token), json!({ "device_uuid": id, "person_id": t.a["person_id"] })).await;
    app.post("/api/hdk/permissions/snapshots", Some(a_token), json!({ "device_uuid": id, "permission_set": {} })).await;
    app.post("/api/hdk/measure/measurements", Some(a_token), json!({ "capture_id": "a-cap", "kind": "k", "value": 1, "unit": "u" })).await;
    app.post("/api/hdk/watermark/applications", Some(a_token), json!({ "variant_id": "a-var", "watermark_kind": "visible" })).await;
    app.post(
        "/api/hdk/diagnostic/outbox",
        Some(a_token),
        json!({ "rows": [{ "event_type": "diagnostic.health.reported.v1", "payload": {}, "idempotency_key": "a" }] }),
    )
    .await;
    let routes: Vec<Route> = vec![
        (Method::GET, format!("/api/devices/{id}")),
        (Method::GET, format!("/api/devices/{id}/persons")),
        (Method::GET, format!("/api/devices/{id}/attestations")),
        (Method::POST, format!("/api/devices/{id}/persons/{}/revoke", t.a["person_id"].as_str().unwrap())),
        (Method::POST, format!("/api/devices/{id}/persons/{}/suspend", t.a["person_id"].as_str().unwrap())),
        (Method::GET, format!("/api/diagnostic/crash/{}", crash["data"]["id"].as_str().unwrap())),
        (Method::GET, format!("/api/hdk/idp/claims?device_uuid={id}")),
        (Method::GET, format!("/api/hdk/permissions/snapshots/latest?device_uuid={id}")),
        (Method::POST, format!("/api/devices/{id}/revoke")),
        (Method::POST, format!("/api/devices/{id}/link-person")),
        (Method::POST, format!("/api/devices/{id}/challenge")),
        (Method::POST, format!("/api/devices/{id}/attest")),
    ];
    assert_isolated(&app, &t, &routes, |_| false).await;
    // Lists keyed by A's values show B nothing, and B's drain takes none of A's rows.
    for token in [&t.b_token, &t.b_key] {
        for path in [
            format!("/api/diagnostic/crash?device_uuid={id}"),
            "/api/hdk/measure/measurements?capture_id=a-cap".into(),
            "/api/hdk/watermark/applications?variant_id=a-var".into(),
        ] {
            let (s, l) = app.get(&path, Some(token)).await;
            assert_eq!((s.as_u16(), &l["data"], &l["total"]), (200, &json!([]), &json!(0)), "{path}");
        }
        let (_, d) = app.post("/api/hdk/diagnostic/drain", Some(token), json!({})).await;
        assert_eq!(d["data"]["count"], 0);
    }
    let (_, d) = app.post("/api/hdk/diagnostic/drain", Some(a_token), json!({})).await;
    assert_eq!(d["data"]["count"], 1);

    let routes: Vec<(Method, String, &str)> = vec![
        (Method::POST, "/api/devices".into(), "device.device.write"),
        (Method::GET, "/api/devices".into(), "device.device.read"),
        (Method::GET, format!("/api/devices/{id}"), "device.device.read"),
        (Method::GET, format!("/api/devices/{id}/attestations"), "device.device.read"),
        (Method::POST, format!("/api/devices/{id}/persons/{id}/revoke"), "device.device.write"),
        (Method::POST, format!("/api/devices/{id}/persons/{id}/suspend"), "device.device.write"),
        (Method::POST, format!("/api/devices/{id}/challenge"), "device.device.write"),
        (Method::POST, format!("/api/devices/{id}/attest"), "device.device.write"),
        (Method::POST, format!("/api/devices/{id}/link-person"), "device.device.write"),
        (Method::GET, format!("/api/devices/{id}/persons"), "device.device.read"),
        (Method::POST, format!("/api/devices/{id}/revoke"), "device.device.write"),
        (Method::GET, "/api/diagnostic/crash".into(), "diagnostic.crash.read"),
        (Method::POST, "/api/diagnostic/crash".into(), "diagnostic.crash.write"),
        (Method::GET, format!("/api/diagnostic/crash/{id}"), "diagnostic.crash.read"),
        (Method::POST, "/api/diagnostic/snapshots".into(), "diagnostic.snapshot.write"),
        (Method::GET, "/api/hdk/camera/manifest".into(), "hdk.camera.read"),
        (Method::GET, "/api/hdk/image-editor/manifest".into(), "hdk.image-editor.read"),
        (Method::GET, "/api/hdk/map/manifest".into(), "hdk.map.read"),
        (Method::GET, "/api/hdk/scanner/manifest".into(), "hdk.scanner.read"),
        (Method::GET, "/api/hdk/video-editor/manifest".into(), "hdk.video-editor.read"),
        (Method::POST, "/api/hdk/diagnostic/outbox".into(), "hdk.diagnostic.write"),
        (Method::POST, "/api/hdk/diagnostic/drain".into(), "hdk.diagnostic.write"),
        (Method::POST, "/api/hdk/idp/claims".into(), "hdk.idp.write"),
        (Method::GET, "/api/hdk/idp/claims".into(), "hdk.idp.read"),
        (Method::POST, "/api/hdk/permissions/snapshots".into(), "hdk.permission.write"),
        (Method::GET, "/api/hdk/permissions/snapshots/latest".into(), "hdk.permission.read"),
        (Method::POST, "/api/hdk/measure/measurements".into(), "hdk.measure.write"),
        (Method::GET, "/api/hdk/measure/measurements".into(), "hdk.measure.read"),
        (Method::POST, "/api/hdk/watermark/applications".into(), "hdk.watermark.write"),
        (Method::GET, "/api/hdk/watermark/applications".into(), "hdk.watermark.read"),
    ];
    assert_scoped(&app, a_token, json!(["crm.*"]), &routes).await;
}
db_test!(device_routes_are_isolated_and_scoped);

fn in_minutes(minutes: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::minutes(minutes)).to_rfc3339()
}

/// Another tenant that registers the same device_uuid cannot change what
/// the public health read shows for it, and no client-supplied time may
/// lie more than five minutes ahead.
async fn the_public_health_read_speaks_for_the_registering_tenant_only(app: TestApp) {
    let a = app.signup("owner@example.com", "health-a").await;
    let b = app.signup("squatter@example.com", "health-b").await;
    let (ta, tb) = (a["token"].as_str().unwrap(), b["token"].as_str().unwrap());
    let id = device_id();
    register(&app, ta, &id).await;
    let (s, _) = app.post("/api/diagnostic/snapshots", Some(ta), json!({ "device_uuid": id, "status": "ok", "taken_at": in_minutes(-10) })).await;
    assert_eq!(s, StatusCode::CREATED);

    // The attack: B registers the same device and posts a critical snapshot dated 2099.
    register(&app, tb, &id).await;
    let body = assert_error(
        app.post("/api/diagnostic/snapshots", Some(tb), json!({ "device_uuid": id, "status": "critical", "taken_at": "2099-01-01T00:00:00Z" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["taken_at must not be more than 5 minutes in the future"]));
    // A current critical snapshot of B's is B's own.
    let (s, _) = app.post("/api/diagnostic/snapshots", Some(tb), json!({ "device_uuid": id, "status": "critical" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let app = &app;
    let health = |query: String| async move { app.get(&format!("/api/diagnostic/health?{query}"), None).await };
    let (s, h) = health(format!("device_uuid={id}")).await;
    assert_eq!((s, h["data"]["status"].clone()), (StatusCode::OK, json!("ok")), "the first registrant speaks for the device: {h}");
    let (_, h) = health(format!("device_uuid={id}&tenant_id={}", b["tenant_id"].as_str().unwrap())).await;
    assert_eq!(h["data"]["status"], "critical", "a tenant's own snapshots, when named");
    let (_, h) = health(format!("device_uuid={id}&tenant_id={}", a["tenant_id"].as_str().unwrap())).await;
    assert_eq!(h["data"]["status"], "ok");
    let (_, h) = health(format!("device_uuid={id}&tenant_id={}", device_id())).await;
    assert_eq!(h["data"], json!({ "device_uuid": id, "status": "unknown", "taken_at": null }), "a tenant that did not register it");
    let body = assert_error(health(format!("device_uuid={id}&tenant_id=nope")).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["tenant_id must be a UUID"]));
    // A's newer snapshot shows; a few minutes of clock skew are tolerated.
    let (s, _) = app.post("/api/diagnostic/snapshots", Some(ta), json!({ "device_uuid": id, "status": "degraded", "taken_at": in_minutes(4) })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, h) = health(format!("device_uuid={id}")).await;
    assert_eq!(h["data"]["status"], "degraded");
    assert_error(
        app.post("/api/diagnostic/snapshots", Some(ta), json!({ "device_uuid": id, "status": "ok", "taken_at": in_minutes(6) })).await,
        400,
        "ValidationError",
    );

    // Every other time at which a client says something happened has the same bound.
    let future = "2099-01-01T00:00:00Z";
    let refused = [
        ("/api/diagnostic/crash", json!({ "device_uuid": id, "stack_envelope": "x", "occurred_at": future }), "occurred_at"),
        ("/api/hdk/permissions/snapshots", json!({ "device_uuid": id, "permission_set": {}, "taken_at": future }), "taken_at"),
        ("/api/hdk/watermark/applications", json!({ "variant_id": "v", "watermark_kind": "visible", "applied_at": future }), "applied_at"),
    ];
    for (path, body, field) in refused {
        let body = assert_error(app.post(path, Some(ta), body).await, 400, "ValidationError");
        assert_eq!(body["details"], json!([format!("{field} must not be more than 5 minutes in the future")]), "{path}");
    }
    let (s, ack) = app
        .post(
            "/api/hdk/sync/batches",
            Some(ta),
            json!({ "batch_id": "f", "device_uuid": id, "events": [
        { "idempotency_key": "future", "event_type": "agent.run.completed.v1", "payload": {}, "occurred_at": future },
    ] }),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{ack}");
    assert_eq!(ack["data"]["rejected"], json!([{ "idempotency_key": "future", "reason": "occurred_at must not be more than 5 minutes in the future" }]));
}
db_test!(the_public_health_read_speaks_for_the_registering_tenant_only);

/// A permission snapshot names a persona of the caller's tenant, as every
/// route that takes one: another tenant's persona is refused as an unknown
/// one is, and nothing is stored; the caller's own is recorded with its
/// event in the tenant's chain.
async fn a_permission_snapshot_takes_only_a_persona_of_the_tenant(app: TestApp) {
    let t = app.two_tenants("hdk-perm").await;
    let a = t.a_token.as_str();
    let device = device_id();
    let snapshot = |persona: &Value| json!({ "device_uuid": device, "persona_id": persona, "permission_set": { "camera": "granted" } });
    let refused = |actual| {
        let body = assert_error(actual, 400, "ValidationError");
        assert_eq!(body["details"], json!(["persona_id is not a persona of this tenant"]));
    };
    refused(app.post("/api/hdk/permissions/snapshots", Some(a), snapshot(&t.b["persona_id"])).await);
    refused(app.post("/api/hdk/permissions/snapshots", Some(a), snapshot(&json!(device_id()))).await);
    assert_error(app.get(&format!("/api/hdk/permissions/snapshots/latest?device_uuid={device}"), Some(a)).await, 404, "NotFound");
    let recorded = "device.permission_snapshot.recorded.v1";
    assert!(!app.events_of(&t.a["tenant_id"]).await.iter().any(|e| e == recorded));

    let (s, own) = app.post("/api/hdk/permissions/snapshots", Some(a), snapshot(&t.a["persona_id"])).await;
    assert_eq!(s, StatusCode::CREATED, "{own}");
    assert_eq!((&own["data"]["persona_id"], &own["data"]["tenant_id"]), (&t.a["persona_id"], &t.a["tenant_id"]));
    // Without a persona the snapshot is the device's alone, and recorded too.
    let (s, bare) = app.post("/api/hdk/permissions/snapshots", Some(a), json!({ "device_uuid": device, "permission_set": [] })).await;
    assert_eq!((s, &bare["data"]["persona_id"]), (StatusCode::CREATED, &Value::Null), "{bare}");
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == recorded).count(), 2, "{events:?}");
    let payload: String = sqlx::query_scalar("SELECT payload FROM audit_entry WHERE tenant_id = $1 AND event_type = $2 ORDER BY seq LIMIT 1")
        .bind(t.a["tenant_id"].as_str().unwrap())
        .bind(recorded)
        .fetch_one(&app.state().db.read)
        .await
        .unwrap();
    let payload: Value = serde_json::from_str(&payload).unwrap();
    assert_eq!(
        payload,
        json!({ "snapshot_id": own["data"]["snapshot_id"], "device_uuid": device, "persona_id": t.a["persona_id"], "taken_at": own["data"]["taken_at"] })
    );
    assert!(!app.events_of(&t.b["tenant_id"]).await.iter().any(|e| e == recorded), "nothing in the other tenant's chain");
}
db_test!(a_permission_snapshot_takes_only_a_persona_of_the_tenant);

async fn a_lost_devices_claim_is_removed_and_snapshots_have_a_history(app: TestApp) {
    let t = app.signup("idr@example.com", "idr").await;
    let token = t["token"].as_str().unwrap();
    let (id, other_device) = (device_id(), device_id());
    for d in [&id, &other_device] {
        let (s, c) = app.post("/api/hdk/idp/claims", Some(token), json!({ "device_uuid": d, "person_id": t["person_id"], "pin_envelope": "cGlu" })).await;
        assert_eq!(s, StatusCode::CREATED, "{c}");
    }
    let remove = |d: &str| format!("/api/hdk/idp/claims?device_uuid={d}");
    // Another tenant cannot remove it.
    let other = app.signup("idr2@example.com", "idr2").await;
    assert_error(app.call(Method::DELETE, &remove(&id), other["token"].as_str(), None).await, 404, "NotFound");
    let body = assert_error(app.call(Method::DELETE, "/api/hdk/idp/claims?device_uuid=nope", Some(token), None).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["device_uuid must be a UUID"]));
    assert_error(app.call(Method::DELETE, "/api/hdk/idp/claims", Some(token), None).await, 400, "ValidationError");
    let (s, gone) = app.call(Method::DELETE, &remove(&id), Some(token), None).await;
    assert_eq!(s, StatusCode::OK, "{gone}");
    assert_eq!(gone["data"], json!({ "device_uuid": id, "person_id": t["person_id"], "deleted": true }));
    // Erased, envelopes and all; the other device keeps its claim.
    assert_error(app.get(&remove(&id), Some(token)).await, 404, "NotFound");
    assert_error(app.call(Method::DELETE, &remove(&id), Some(token), None).await, 404, "NotFound");
    let (s, _) = app.get(&remove(&other_device), Some(token)).await;
    assert_eq!(s, StatusCode::OK);
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM hdk_idp_claim WHERE device_uuid = $1").bind(&id).fetch_one(&app.state().db.read).await.unwrap();
    assert_eq!(left, 0);
    let removed = app.events_of(&t["tenant_id"]).await.into_iter().filter(|e| e == "device.idp_claim.removed.v1").count();
    assert_eq!(removed, 1);
    // The claim can be made again (a reassigned device).
    let (s, _) = app.post("/api/hdk/idp/claims", Some(token), json!({ "device_uuid": id, "person_id": t["person_id"] })).await;
    assert_eq!(s, StatusCode::CREATED);

    // Permission snapshot history: newest taken first, within from..to.
    for (set, at) in [("a", "2026-01-01T00:00:00Z"), ("c", "2026-03-01T00:00:00Z"), ("b", "2026-02-01T00:00:00Z")] {
        let (s, r) =
            app.post("/api/hdk/permissions/snapshots", Some(token), json!({ "device_uuid": id, "permission_set": { "camera": set }, "taken_at": at })).await;
        assert_eq!(s, StatusCode::CREATED, "{r}");
    }
    let (s, _) = app.post("/api/hdk/permissions/snapshots", Some(token), json!({ "device_uuid": other_device, "permission_set": [] })).await;
    assert_eq!(s, StatusCode::CREATED);
    let history = |q: &str| format!("/api/hdk/permissions/snapshots?device_uuid={id}{q}");
    let (s, all) = app.get(&history(""), Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{all}");
    assert_eq!(all["total"], 3);
    let sets: Vec<Value> = all["data"].as_array().unwrap().iter().map(|r| r["permission_set"]["camera"].clone()).collect();
    assert_eq!(sets, vec![json!("c"), json!("b"), json!("a")]);
    let (_, window) = app.get(&history("&from=2026-01-15T00:00:00Z&to=2026-03-01T00:00:00Z"), Some(token)).await;
    assert_eq!(window["total"], 2);
    assert_eq!(window["data"][1]["permission_set"]["camera"], "b");
    let (_, page) = app.get(&history("&limit=1&offset=2"), Some(token)).await;
    assert_eq!((page["total"].clone(), page["data"][0]["permission_set"]["camera"].clone()), (json!(3), json!("a")));
    let body = assert_error(app.get(&history("&from=2026-03-01T00:00:00Z&to=2026-01-01T00:00:00Z"), Some(token)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["from must be on or before to"]));
    let body = assert_error(app.get(&history("&from=soon"), Some(token)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["from must be an RFC 3339 timestamp"]));
    assert_error(app.get("/api/hdk/permissions/snapshots", Some(token)).await, 400, "ValidationError");
    let (_, theirs) = app.get(&history(""), other["token"].as_str()).await;
    assert_eq!(theirs["total"], 0);
}
db_test!(a_lost_devices_claim_is_removed_and_snapshots_have_a_history);
