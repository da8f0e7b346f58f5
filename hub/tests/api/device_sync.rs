//! hdk-sync: the hub's resolve, batch and policy routes, and device-core
//! syncing with a running hub through its Python bindings.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn register_type(app: &TestApp, token: &str, name: &str, policy: &str) {
    let (s, body) =
        app.post("/api/events/types", Some(token), json!({ "event_type": name, "retention_class": "operational", "conflict_policy": policy })).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
}

async fn resolve_applies_the_registered_policy(app: TestApp) {
    let t = app.signup("rs@example.com", "rs").await;
    let token = t["token"].as_str().unwrap();
    let body = assert_error(
        app.post("/api/hdk/sync/resolve", Some(token), json!({ "event_type": "field.note.saved.v1", "input_a": 1, "input_b": 2 })).await,
        400,
        "ValidationError",
    );
    assert!(body["details"][0].as_str().unwrap().contains("not registered"));
    register_type(&app, token, "field.note.saved.v1", "lww").await;
    register_type(&app, token, "field.form.saved.v1", "merge").await;
    register_type(&app, token, "field.consent.given.v1", "human-review").await;
    let (s, r) = app
        .post(
            "/api/hdk/sync/resolve",
            Some(token),
            json!({
                "event_type": "field.note.saved.v1",
                "input_a": { "timestamp": "2026-01-01T00:00:00Z", "text": "old" },
                "input_b": { "timestamp": "2026-01-02T00:00:00Z", "text": "new" },
                "batch_id": "b-1",
            }),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["data"]["policy"], "lww");
    assert_eq!(r["data"]["status"], "resolved");
    assert_eq!(r["data"]["result"]["text"], "new");
    assert_eq!(r["data"]["batch_id"], "b-1");
    let (_, r) = app
        .post(
            "/api/hdk/sync/resolve",
            Some(token),
            json!({ "event_type": "field.form.saved.v1", "input_a": { "a": 1, "x": 1 }, "input_b": { "b": 2, "x": 2 } }),
        )
        .await;
    assert_eq!(r["data"]["result"]["a"], 1);
    assert_eq!(r["data"]["result"]["b"], 2);
    assert_eq!(r["data"]["conflicts"][0]["field"], "/x");
    let (_, r) = app.post("/api/hdk/sync/resolve", Some(token), json!({ "event_type": "field.consent.given.v1", "input_a": "yes", "input_b": "no" })).await;
    assert_eq!(r["data"]["status"], "pending_review");
    let body = assert_error(
        app.post("/api/hdk/sync/resolve", Some(token), json!({ "event_type": "field.note.saved.v1", "input_a": null, "audit_entry_id": "x" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["input_a is required", "input_b is required", "audit_entry_id must be a UUID"]));
    // Each resolution is recorded in the tenant's chain: a human-review one as escalated.
    let events = app.events_of(&t["tenant_id"]).await;
    assert!(events.contains(&"sync.conflict.resolved.v1".to_string()), "{events:?}");
    assert!(events.contains(&"sync.conflict.escalated.v1".to_string()), "{events:?}");
    // Another tenant has not registered the type.
    let other = app.signup("rs2@example.com", "rs2").await;
    assert_error(
        app.post("/api/hdk/sync/resolve", other["token"].as_str(), json!({ "event_type": "field.note.saved.v1", "input_a": 1, "input_b": 2 })).await,
        400,
        "ValidationError",
    );
}
db_test!(resolve_applies_the_registered_policy);

async fn batches_store_each_event_once_per_tenant(app: TestApp) {
    let t = app.signup("sb@example.com", "sb").await;
    let token = t["token"].as_str().unwrap();
    register_type(&app, token, "field.visit.logged.v1", "merge").await;
    let device = uuid::Uuid::now_v7().to_string();
    let event = |key: &str, ty: &str| json!({ "idempotency_key": key, "event_id": uuid::Uuid::now_v7().to_string(), "event_type": ty, "payload": { "k": key }, "occurred_at": "2026-05-01T10:00:00Z" });
    let batch = json!({ "batch_id": "b1", "device_uuid": device, "events": [event("a", "field.visit.logged.v1"), event("b", "field.visit.logged.v1"), event("c", "not.a.known.type.v1")] });
    let (s, ack) = app.post("/api/hdk/sync/batches", Some(token), batch.clone()).await;
    assert_eq!(s, StatusCode::OK, "{ack}");
    assert_eq!(ack["data"]["accepted"], json!(["a", "b"]));
    assert_eq!(ack["data"]["rejected"][0]["idempotency_key"], "c");
    let (_, ack) = app.post("/api/hdk/sync/batches", Some(token), batch).await;
    assert_eq!(ack["data"]["duplicates"], json!(["a", "b"]));
    assert_eq!(ack["data"]["accepted"], json!([]));
    // A batch that stored something is an event; a batch of duplicates is not.
    let received = app.events_of(&t["tenant_id"]).await.into_iter().filter(|e| e == "sync.batch.received.v1").count();
    assert_eq!(received, 1);
    // The same keys from another tenant are that tenant's own events.
    let other = app.signup("sb2@example.com", "sb2").await;
    let (_, ack) = app
        .post(
            "/api/hdk/sync/batches",
            other["token"].as_str(),
            json!({ "batch_id": "x", "device_uuid": device, "events": [event("a", "field.visit.logged.v1")] }),
        )
        .await;
    assert_eq!(ack["data"]["rejected"].as_array().unwrap().len(), 1, "the other tenant has not registered the type");
    // A retired type takes no new event, offline or not.
    let (s, _) = app.call(Method::PATCH, "/api/events/types/field.visit.logged.v1", Some(token), Some(json!({ "schema_state": "retired" }))).await;
    assert_eq!(s, StatusCode::OK);
    let (_, ack) = app
        .post("/api/hdk/sync/batches", Some(token), json!({ "batch_id": "b3", "device_uuid": device, "events": [event("d", "field.visit.logged.v1")] }))
        .await;
    assert_eq!(ack["data"]["rejected"], json!([{ "idempotency_key": "d", "reason": "event type 'field.visit.logged.v1' is retired: it takes no new events" }]));
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM hdk_sync_event").fetch_one(&app.state().db.read).await.unwrap();
    assert_eq!(n, 2);
    let body = assert_error(app.post("/api/hdk/sync/batches", Some(token), json!({ "events": [{}] })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["batch_id is required", "device_uuid is required", "events[0].idempotency_key is required"]));

    let (s, p) = app.get("/api/hdk/sync/policies", Some(token)).await;
    assert_eq!(s, StatusCode::OK);
    let types = p["data"]["event_types"].as_array().unwrap();
    let platform = hub_kernel::audit::registry::baseline().types.len();
    assert_eq!(types.len(), platform + 1, "the baseline and the tenant's own type");
    let own: &Value = types.iter().find(|t| t["event_type"] == "field.visit.logged.v1").unwrap();
    assert_eq!(own["conflict_policy"], "merge");
    let (_, p) = app.get("/api/hdk/sync/policies", other["token"].as_str()).await;
    assert_eq!(p["data"]["event_types"].as_array().unwrap().len(), platform);

    let (_, key) = app.key(token, "sync-key", json!(["crm.*"])).await;
    for (path, scope) in [("/api/hdk/sync/resolve", "hdk.sync.write"), ("/api/hdk/sync/batches", "hdk.sync.write")] {
        let b = assert_error(app.post(path, key["api_key"].as_str(), json!({})).await, 403, "Forbidden");
        assert_eq!(b["required_scopes"], json!([scope]));
    }
    let b = assert_error(app.get("/api/hdk/sync/policies", key["api_key"].as_str()).await, 403, "Forbidden");
    assert_eq!(b["required_scopes"], json!(["hdk.sync.read"]));
}
db_test!(batches_store_each_event_once_per_tenant);

/// device-core, through its Python bindings, pulls policies from and pushes
/// its outbox to this hub, losing one answer on the way.
async fn device_core_syncs_with_a_running_hub_through_python(app: TestApp) {
    let t = app.signup("py@example.com", "py").await;
    let token = t["token"].as_str().unwrap();
    register_type(&app, token, "field.visit.logged.v1", "merge").await;
    let (_, key) = app.key(token, "device-app", json!(["hdk.*"])).await;
    let device = uuid::Uuid::now_v7().to_string();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../device-core/tests/python/test_hub_sync.py");
    let (base, api_key) = (app.base.clone(), key["api_key"].as_str().unwrap().to_owned());
    let envs = [("HUB_URL", base), ("HUB_API_KEY", api_key), ("DEVICE_UUID", device.clone())];
    let out = tokio::task::spawn_blocking(move || bindings::python_suite(&script, &envs.each_ref().map(|(k, v)| (*k, v.as_str()))))
        .await
        .expect("run the Python sync test");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("Ran 1 test") && stderr.trim_end().ends_with("OK"), "{stderr}");
    // On the hub: each of the 25 events exactly once, the stray one refused.
    let rows: Vec<(String, i64)> = sqlx::query_as("SELECT idempotency_key, COUNT(*) FROM hdk_sync_event WHERE device_uuid = $1 GROUP BY idempotency_key")
        .bind(&device)
        .fetch_all(&app.state().db.read)
        .await
        .unwrap();
    assert_eq!(rows.len(), 25);
    assert!(rows.iter().all(|(k, n)| *n == 1 && k.starts_with("visit-")));
}
db_test!(device_core_syncs_with_a_running_hub_through_python);

async fn parked_conflicts_are_listed_and_decided(app: TestApp) {
    let t = app.signup("rd@example.com", "rd").await;
    let token = t["token"].as_str().unwrap();
    register_type(&app, token, "field.note.saved.v1", "lww").await;
    register_type(&app, token, "field.consent.given.v1", "human-review").await;
    let (_, lww) = app
        .post(
            "/api/hdk/sync/resolve",
            Some(token),
            json!({ "event_type": "field.note.saved.v1", "input_a": { "timestamp": "2026-01-01T00:00:00Z", "n": 1 }, "input_b": { "timestamp": "2026-01-02T00:00:00Z", "n": 2 } }),
        )
        .await;
    let mut parked = Vec::new();
    for (a, b) in [("yes", "no"), ("maybe", "later")] {
        let (s, r) = app
            .post("/api/hdk/sync/resolve", Some(token), json!({ "event_type": "field.consent.given.v1", "input_a": a, "input_b": b, "batch_id": "b-9" }))
            .await;
        assert_eq!(s, StatusCode::OK, "{r}");
        parked.push(r["data"]["resolution_id"].as_str().unwrap().to_string());
    }
    // The list: newest first, by status and event type, with the total.
    let (s, all) = app.get("/api/hdk/sync/resolutions", Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{all}");
    assert_eq!(all["total"], 3);
    assert_eq!(all["data"][0]["resolution_id"], parked[1].as_str());
    assert_eq!(all["data"][2]["resolution_id"], lww["data"]["resolution_id"]);
    assert_eq!(all["data"][2]["result"]["result"]["n"], 2);
    let (_, queue) = app.get("/api/hdk/sync/resolutions?status=pending_review", Some(token)).await;
    assert_eq!(queue["total"], 2);
    assert_eq!(queue["data"][1]["input_a"], "yes");
    assert_eq!(queue["data"][1]["batch_id"], "b-9");
    let (_, by_type) = app.get("/api/hdk/sync/resolutions?event_type=field.note.saved.v1&limit=1", Some(token)).await;
    assert_eq!((by_type["total"].clone(), by_type["data"][0]["status"].clone()), (json!(1), json!("resolved")));
    let (_, page) = app.get("/api/hdk/sync/resolutions?limit=1&offset=1", Some(token)).await;
    assert_eq!((page["total"].clone(), page["data"][0]["resolution_id"].clone()), (json!(3), json!(parked[0])));
    assert_error(app.get("/api/hdk/sync/resolutions?status=open", Some(token)).await, 400, "ValidationError");

    // Deciding: the chosen side, or a person's value; once.
    let decide = |id: &str| format!("/api/hdk/sync/resolutions/{id}/decision");
    let body = assert_error(app.post(&decide(&parked[0]), Some(token), json!({ "choice": "value" })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["value is required with choice value"]));
    let body = assert_error(app.post(&decide(&parked[0]), Some(token), json!({ "choice": "a", "value": 1 })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["value is only taken with choice value"]));
    assert_error(app.post(&decide(&parked[0]), Some(token), json!({ "choice": "c" })).await, 400, "ValidationError");
    let (s, d) = app.post(&decide(&parked[0]), Some(token), json!({ "choice": "b" })).await;
    assert_eq!(s, StatusCode::OK, "{d}");
    assert_eq!(d["data"]["status"], "resolved");
    assert_eq!(d["data"]["result"]["result"], "no");
    assert_eq!(d["data"]["result"]["decision"], "b");
    let (s, d) = app.post(&decide(&parked[1]), Some(token), json!({ "choice": "value", "value": { "consent": "partial" } })).await;
    assert_eq!(s, StatusCode::OK, "{d}");
    assert_eq!(d["data"]["result"]["result"], json!({ "consent": "partial" }));
    let body = assert_error(app.post(&decide(&parked[0]), Some(token), json!({ "choice": "a" })).await, 409, "Conflict");
    assert!(body["details"][0].as_str().unwrap().contains("only a pending_review resolution can be decided"), "{body}");
    let lww_id = lww["data"]["resolution_id"].as_str().unwrap();
    assert_error(app.post(&decide(lww_id), Some(token), json!({ "choice": "a" })).await, 409, "Conflict");
    assert_error(app.post(&decide(&uuid::Uuid::now_v7().to_string()), Some(token), json!({ "choice": "a" })).await, 404, "NotFound");
    assert_error(app.post(&decide("not-a-uuid"), Some(token), json!({ "choice": "a" })).await, 404, "NotFound");
    let (_, queue) = app.get("/api/hdk/sync/resolutions?status=pending_review", Some(token)).await;
    assert_eq!(queue["total"], 0);
    let resolved = app.events_of(&t["tenant_id"]).await.into_iter().filter(|e| e == "sync.conflict.resolved.v1").count();
    assert_eq!(resolved, 3, "the lww resolution and the two decisions");
    // Another tenant sees none of them and decides none.
    let other = app.signup("rd2@example.com", "rd2").await;
    let (_, theirs) = app.get("/api/hdk/sync/resolutions", other["token"].as_str()).await;
    assert_eq!(theirs["total"], 0);
    assert_error(app.post(&decide(&parked[0]), other["token"].as_str(), json!({ "choice": "a" })).await, 404, "NotFound");
}
db_test!(parked_conflicts_are_listed_and_decided);

async fn synced_events_are_pulled_back(app: TestApp) {
    let t = app.signup("pl@example.com", "pl").await;
    let token = t["token"].as_str().unwrap();
    register_type(&app, token, "field.visit.logged.v1", "merge").await;
    register_type(&app, token, "field.note.saved.v1", "lww").await;
    let (d1, d2) = (uuid::Uuid::now_v7().to_string(), uuid::Uuid::now_v7().to_string());
    let event = |key: &str, ty: &str| json!({ "idempotency_key": key, "event_id": key, "event_type": ty, "payload": { "k": key }, "occurred_at": "2026-05-01T10:00:00Z" });
    let (s, _) = app
        .post(
            "/api/hdk/sync/batches",
            Some(token),
            json!({ "batch_id": "b1", "device_uuid": d1, "events": [event("a", "field.visit.logged.v1"), event("b", "field.note.saved.v1")] }),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let (_, first) = app.get("/api/hdk/sync/events", Some(token)).await;
    let mark = first["data"][0]["received_at"].as_str().unwrap().to_string();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let (s, _) =
        app.post("/api/hdk/sync/batches", Some(token), json!({ "batch_id": "b2", "device_uuid": d2, "events": [event("c", "field.visit.logged.v1")] })).await;
    assert_eq!(s, StatusCode::OK);
    let (s, all) = app.get("/api/hdk/sync/events", Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{all}");
    assert_eq!(all["total"], 3);
    assert_eq!(all["data"][0]["idempotency_key"], "c");
    assert_eq!(all["data"][0]["payload"], json!({ "k": "c" }));
    assert_eq!(all["data"][0]["device_uuid"], d2.as_str());
    assert_eq!(all["data"][0]["batch_id"], "b2");
    let (_, since) = app.get(&format!("/api/hdk/sync/events?since={}", mark.replace('+', "%2B")), Some(token)).await;
    assert_eq!((since["total"].clone(), since["data"][0]["idempotency_key"].clone()), (json!(1), json!("c")));
    let (_, visits) = app.get("/api/hdk/sync/events?event_type=field.visit.logged.v1", Some(token)).await;
    assert_eq!(visits["total"], 2);
    let (_, of_d1) = app.get(&format!("/api/hdk/sync/events?device_uuid={d1}&limit=1"), Some(token)).await;
    assert_eq!((of_d1["total"].clone(), of_d1["data"].as_array().unwrap().len()), (json!(2), 1));
    let body = assert_error(app.get("/api/hdk/sync/events?since=yesterday", Some(token)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["since must be an RFC 3339 timestamp"]));
    let body = assert_error(app.get("/api/hdk/sync/events?device_uuid=x", Some(token)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["device_uuid must be a UUID"]));
    let other = app.signup("pl2@example.com", "pl2").await;
    let (_, theirs) = app.get("/api/hdk/sync/events", other["token"].as_str()).await;
    assert_eq!(theirs["total"], 0);
}
db_test!(synced_events_are_pulled_back);
