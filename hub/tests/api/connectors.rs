//! sdk-connectors: sync items whose failures dead-letter, the dead-letter
//! list, and replays of one or all (of a connector_kind), idempotent.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn failed_sync_items_dead_letter_and_replay_once(app: TestApp) {
    let t = app.two_tenants("connectors").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].clone());
    let tid = tenant.as_str().unwrap();
    let item = |kind: &str, id: &str, outcome: &str| json!({ "connector_kind": kind, "external_id": id, "outcome": outcome, "error": "upstream 503", "payload": { "n": id } });
    let (s, ok1) = app.post("/api/connectors/sync-items", Some(a), json!({ "connector_kind": "hubspot", "external_id": "c-1", "outcome": "succeeded" })).await;
    assert_eq!(s, StatusCode::CREATED, "{ok1}");
    assert_eq!(
        (ok1["data"]["status"].as_str(), ok1["data"]["attempts"].as_i64(), ok1["data"]["deadletter_id"].clone(), ok1["data"]["direction"].as_str()),
        (Some("synced"), Some(1), Value::Null, Some("inbound"))
    );
    let (s, f1) = app.post("/api/connectors/sync-items", Some(a), item("hubspot", "c-2", "failed")).await;
    assert_eq!(s, StatusCode::CREATED, "{f1}");
    assert_eq!((f1["data"]["status"].as_str(), f1["data"]["last_error"].as_str()), (Some("dead_lettered"), Some("upstream 503")));
    let d1 = f1["data"]["deadletter_id"].as_str().unwrap().to_string();
    // A second failure of the same item keeps its one open dead letter.
    let (s, again) = app.post("/api/connectors/sync-items", Some(a), item("hubspot", "c-2", "failed")).await;
    assert_eq!((s, again["data"]["deadletter_id"].as_str(), again["data"]["attempts"].as_i64()), (StatusCode::OK, Some(d1.as_str()), Some(2)));
    let (_, f2) = app.post("/api/connectors/sync-items", Some(a), item("gcal", "e-1", "failed")).await;
    let d2 = f2["data"]["deadletter_id"].as_str().unwrap().to_string();
    let (_, f3) = app.post("/api/connectors/sync-items", Some(a), item("gcal", "e-2", "failed")).await;
    let d3 = f3["data"]["deadletter_id"].as_str().unwrap().to_string();
    let (_, _) = app.post("/api/connectors/sync-items", Some(&t.b_token), item("gcal", "e-1", "failed")).await;

    let b = assert_error(
        app.post("/api/connectors/sync-items", Some(a), json!({ "connector_kind": "Hub Spot", "outcome": "failed", "payload": [1] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["external_id is required", "payload must be a JSON object"]));
    // Matching its schema, the body still names a kind of the allowed characters, and why it failed.
    let b = assert_error(
        app.post("/api/connectors/sync-items", Some(a), json!({ "connector_kind": "Hub Spot", "external_id": "y", "outcome": "failed", "payload": {} })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["connector_kind must be 1 to 64 of a-z, 0-9, '.', '_' or '-'", "error is required when the outcome is failed"]));
    let b = assert_error(
        app.post(
            "/api/connectors/sync-items",
            Some(a),
            json!({ "connector_kind": "k".repeat(65), "external_id": "y".repeat(257), "outcome": "succeeded", "direction": "sideways" }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!(["connector_kind must be at most 64 characters", "external_id must be at most 256 characters", "direction must be one of: inbound, outbound"])
    );
    let b = assert_error(
        app.post("/api/connectors/sync-items", Some(a), json!({ "connector_kind": "x", "external_id": "y", "outcome": "maybe" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["outcome must be one of: succeeded, failed"]));

    // The list: tenant_id required and the caller's; newest first; open ones by default.
    let (s, l) = app.get(&format!("/api/connectors/deadletters?tenant_id={tid}"), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    let ids: Vec<&str> = l["data"].as_array().unwrap().iter().map(|d| d["deadletter_id"].as_str().unwrap()).collect();
    assert_eq!((ids, l["total"].as_i64()), (vec![d3.as_str(), d2.as_str(), d1.as_str()], Some(3)));
    assert_eq!((l["data"][2]["failures"].as_i64(), l["data"][2]["external_id"].as_str()), (Some(2), Some("c-2")));
    let (_, l) = app.get(&format!("/api/connectors/deadletters?tenant_id={tid}&connector_kind=gcal&limit=1"), Some(a)).await;
    assert_eq!((l["data"][0]["deadletter_id"].as_str(), l["total"].as_i64()), (Some(d3.as_str()), Some(2)));
    let b = assert_error(app.get("/api/connectors/deadletters", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["tenant_id is required"]));
    assert_error(app.get(&format!("/api/connectors/deadletters?tenant_id={}", t.b["tenant_id"].as_str().unwrap()), Some(a)).await, 403, "TenantMismatch");
    let b = assert_error(app.get(&format!("/api/connectors/deadletters?tenant_id={tid}&status=dead"), Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["status must be one of: dead_lettered, replayed, resolved"]));
    assert_error(app.get(&format!("/api/connectors/deadletters?tenant_id={tid}&limit=ten"), Some(a)).await, 400, "ValidationError");

    // Replay one: the item goes back to pending; again is 404; another tenant's is 404.
    let b = assert_error(app.post("/api/connectors/deadletters/replay", Some(a), json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["deadletter_id or tenant_id is required"]));
    assert_error(app.post("/api/connectors/deadletters/replay", Some(&t.b_token), json!({ "deadletter_id": d1 })).await, 404, "NotFound");
    let (s, r) = app.post("/api/connectors/deadletters/replay", Some(a), json!({ "deadletter_id": d1 })).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!((r["data"]["replayed"].as_i64(), r["data"]["deadletter_ids"].clone()), (Some(1), json!([d1])));
    assert_error(app.post("/api/connectors/deadletters/replay", Some(a), json!({ "deadletter_id": d1 })).await, 404, "NotFound");
    assert_error(app.post("/api/connectors/deadletters/replay", Some(a), json!({ "deadletter_id": uuid::Uuid::now_v7() })).await, 404, "NotFound");
    let (_, pending) = app.get("/api/connectors/sync-items?status=pending", Some(a)).await;
    assert_eq!(
        (pending["total"].as_i64(), pending["data"][0]["external_id"].as_str(), pending["data"][0]["replays"].as_i64()),
        (Some(1), Some("c-2"), Some(1))
    );

    // An item that syncs on its own resolves its dead letter.
    let (s, _) = app.post("/api/connectors/sync-items", Some(a), item("gcal", "e-2", "succeeded")).await;
    assert_eq!(s, StatusCode::OK);
    let (_, l) = app.get(&format!("/api/connectors/deadletters?tenant_id={tid}&status=resolved"), Some(a)).await;
    assert_eq!((l["total"].as_i64(), l["data"][0]["deadletter_id"].as_str()), (Some(1), Some(d3.as_str())));

    // Replay all of a kind, with a key: a repeat answers the same, replays nothing.
    assert_error(app.post("/api/connectors/deadletters/replay", Some(a), json!({ "tenant_id": t.b["tenant_id"] })).await, 403, "TenantMismatch");
    let all = json!({ "tenant_id": tenant, "connector_kind": "gcal", "idempotency_key": "nightly-1" });
    let (s, r) = app.post("/api/connectors/deadletters/replay", Some(a), all.clone()).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!((r["data"]["replayed"].as_i64(), r["data"]["deadletter_ids"].clone(), r["data"]["repeated"].as_bool()), (Some(1), json!([d2]), Some(false)));
    let (s, r2) = app.post("/api/connectors/deadletters/replay", Some(a), all).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        (r2["data"]["replay_id"].clone(), r2["data"]["replayed"].as_i64(), r2["data"]["repeated"].as_bool()),
        (r["data"]["replay_id"].clone(), Some(1), Some(true))
    );
    let b = assert_error(
        app.post("/api/connectors/deadletters/replay", Some(a), json!({ "tenant_id": tenant, "idempotency_key": "nightly-1" })).await,
        409,
        "Conflict",
    );
    assert_eq!(b["details"], json!(["idempotency_key was used for another replay"]));
    // Nothing open is left: replaying all replays none.
    let (s, r) = app.post("/api/connectors/deadletters/replay", Some(a), json!({ "tenant_id": tenant })).await;
    assert_eq!((s, r["data"]["replayed"].as_i64()), (StatusCode::OK, Some(0)));
    let (_, l) = app.get(&format!("/api/connectors/deadletters?tenant_id={tid}&status=replayed"), Some(a)).await;
    assert_eq!(l["total"], 2);
    // B's own dead letter was never touched.
    let (_, l) = app.get(&format!("/api/connectors/deadletters?tenant_id={}", t.b["tenant_id"].as_str().unwrap()), Some(&t.b_token)).await;
    assert_eq!(l["total"], 1);

    let (_, items) = app.get("/api/connectors/sync-items?connector_kind=gcal", Some(a)).await;
    assert_eq!(items["total"], 2);
    assert_error(app.get("/api/connectors/sync-items?status=lost", Some(a)).await, 400, "ValidationError");

    let events = app.events_of(&tenant).await;
    let count = |ty: &str| events.iter().filter(|e| *e == ty).count();
    assert_eq!(
        (
            count("connector.sync.completed.v1"),
            count("connector.sync.failed.v1"),
            count("connector.item.dead_lettered.v1"),
            count("connector.item.replayed.v1")
        ),
        (2, 4, 3, 2)
    );
}
db_test!(failed_sync_items_dead_letter_and_replay_once);

async fn an_item_and_a_dead_letter_are_read_by_id(app: TestApp) {
    let t = app.two_tenants("connectors-one").await;
    let a = t.a_token.as_str();
    let (s, failed) = app
        .post(
            "/api/connectors/sync-items",
            Some(a),
            json!({ "connector_kind": "hubspot", "external_id": "c-7", "outcome": "failed", "error": "upstream 503", "payload": { "n": 7 } }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{failed}");
    let (item, letter) = (failed["data"]["item_id"].as_str().unwrap().to_string(), failed["data"]["deadletter_id"].as_str().unwrap().to_string());

    let (s, one) = app.get(&format!("/api/connectors/sync-items/{item}"), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{one}");
    assert_eq!(
        (one["data"]["item_id"].as_str(), one["data"]["status"].as_str(), one["data"]["external_id"].as_str(), one["data"]["payload"].clone()),
        (Some(item.as_str()), Some("dead_lettered"), Some("c-7"), json!({ "n": 7 }))
    );
    let (s, dl) = app.get(&format!("/api/connectors/deadletters/{letter}"), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{dl}");
    assert_eq!(
        (dl["data"]["deadletter_id"].as_str(), dl["data"]["item_id"].as_str(), dl["data"]["status"].as_str(), dl["data"]["error"].as_str()),
        (Some(letter.as_str()), Some(item.as_str()), Some("dead_lettered"), Some("upstream 503"))
    );
    // After a replay: the dead letter is read in any status, the item is pending.
    let (s, r) = app.post("/api/connectors/deadletters/replay", Some(a), json!({ "deadletter_id": letter })).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let (_, dl) = app.get(&format!("/api/connectors/deadletters/{letter}"), Some(a)).await;
    assert_eq!(dl["data"]["status"], "replayed");
    assert!(dl["data"]["replayed_at"].is_string());
    let (_, one) = app.get(&format!("/api/connectors/sync-items/{item}"), Some(a)).await;
    assert_eq!((one["data"]["status"].as_str(), one["data"]["replays"].as_i64()), (Some("pending"), Some(1)));

    for path in ["/api/connectors/sync-items", "/api/connectors/deadletters"] {
        assert_error(app.get(&format!("{path}/{}", uuid::Uuid::now_v7()), Some(a)).await, 404, "NotFound");
        assert_error(app.get(&format!("{path}/c-7"), Some(a)).await, 404, "NotFound");
    }
    assert_error(app.get(&format!("/api/connectors/sync-items/{item}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get(&format!("/api/connectors/deadletters/{letter}"), Some(&t.b_token)).await, 404, "NotFound");
}
db_test!(an_item_and_a_dead_letter_are_read_by_id);
