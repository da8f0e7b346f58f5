//! sdk-meter: usage events rolled up per day and sku (a key repeated within
//! 24 hours counts once), batches answered event by event, and monthly
//! hard caps refused with 429 naming the sku unless an override is active.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

pub async fn usage(app: &TestApp, token: &str, event: Value) -> (StatusCode, Value) {
    app.post("/api/meter/usage", Some(token), event).await
}

fn this_month() -> String {
    chrono::Utc::now().format("%Y-%m").to_string()
}

async fn usage_rolls_up_per_day_and_sku_and_a_repeated_key_counts_once(app: TestApp) {
    let t = app.two_tenants("meter").await;
    let a = t.a_token.as_str();
    let asset = uuid::Uuid::now_v7().to_string();
    let sensor = uuid::Uuid::now_v7().to_string();
    let event = |sku: &str, quantity: i64, at: &str, key: &str| json!({ "asset_id": asset, "sku": sku, "quantity": quantity, "occurred_at": at, "idempotency_key": key });

    let (s, first) = usage(&app, a, event("api.call", 3, "2026-11-01T10:00:00Z", "k1")).await;
    assert_eq!(s, StatusCode::CREATED, "{first}");
    assert_eq!(
        (first["data"]["sku"].as_str(), first["data"]["quantity"].as_i64(), first["data"]["occurred_at"].as_str(), first["data"]["sensor_id"].clone()),
        (Some("api.call"), Some(3), Some("2026-11-01T10:00:00.000000Z"), Value::Null)
    );
    let (s, again) = usage(&app, a, event("api.call", 99, "2026-11-01T11:00:00Z", "k1")).await;
    assert_eq!((s, &again["data"]), (StatusCode::OK, &first["data"]), "a repeat answers the first record");
    assert_eq!(usage(&app, a, event("api.call", 4, "2026-11-01T23:59:59Z", "k2")).await.0, StatusCode::CREATED);
    assert_eq!(usage(&app, a, event("storage.gb", 10, "2026-11-02T00:00:00Z", "k3")).await.0, StatusCode::CREATED);
    let (s, e) =
        usage(&app, a, json!({ "asset_id": asset, "sensor_id": sensor, "sku": "api.call", "quantity": 1, "occurred_at": "2026-11-02T08:00:00+02:00", "idempotency_key": "k4" }))
            .await;
    assert_eq!((s, e["data"]["occurred_at"].as_str()), (StatusCode::CREATED, Some("2026-11-02T06:00:00.000000Z")), "{e}");

    let (s, rows) = app.get(&format!("/api/meter/assets/{asset}/usage"), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{rows}");
    assert_eq!(
        rows,
        json!({ "success": true, "data": [
            { "asset_id": asset, "sensor_id": sensor, "day": "2026-11-02", "sku": "api.call", "units": 1, "events": 1 },
            { "asset_id": asset, "sensor_id": null, "day": "2026-11-02", "sku": "storage.gb", "units": 10, "events": 1 },
            { "asset_id": asset, "sensor_id": null, "day": "2026-11-01", "sku": "api.call", "units": 7, "events": 2 },
        ] })
    );
    let (_, some) = app.get(&format!("/api/meter/assets/{asset}/usage?from=2026-11-01&to=2026-11-01"), Some(a)).await;
    assert_eq!(some["data"].as_array().unwrap().len(), 1);
    let b = assert_error(app.get(&format!("/api/meter/assets/{asset}/usage?from=yesterday&to=2026-13-01"), Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["from must be a day, YYYY-MM-DD", "to must be a day, YYYY-MM-DD"]));
    assert_error(app.get(&format!("/api/meter/assets/{asset}/usage"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get(&format!("/api/meter/assets/{}/usage", uuid::Uuid::now_v7()), Some(a)).await, 404, "NotFound");
    assert_error(app.get("/api/meter/assets/not-a-uuid/usage", Some(a)).await, 404, "NotFound");

    // After 24 hours a key names a new event.
    sqlx::query("UPDATE meter_usage_key SET recorded_at = $1 WHERE idempotency_key = 'k1'")
        .bind(hub_kernel::db::format_time(chrono::Utc::now() - chrono::Duration::hours(25)))
        .execute(app.state().db.writer())
        .await
        .unwrap();
    let (s, later) = usage(&app, a, event("api.call", 5, "2026-11-01T12:00:00Z", "k1")).await;
    assert_eq!(s, StatusCode::CREATED, "{later}");
    assert_ne!(later["data"]["event_id"], first["data"]["event_id"]);
    let (_, rows) = app.get(&format!("/api/meter/assets/{asset}/usage?from=2026-11-01&to=2026-11-01"), Some(a)).await;
    assert_eq!((rows["data"][0]["units"].as_i64(), rows["data"][0]["events"].as_i64()), (Some(12), Some(3)));

    let b = assert_error(usage(&app, a, json!({ "asset_id": "x", "quantity": -1, "sensor_id": 5 })).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!([
            "asset_id must be a UUID",
            "sensor_id must be a string",
            "sku is required",
            "quantity must be an integer from 0 to 1000000000000",
            "idempotency_key is required"
        ])
    );
    let b = assert_error(
        usage(&app, a, json!({ "asset_id": "x", "quantity": 1.5, "sku": "a b", "occurred_at": "2099-01-01T00:00:00Z" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["asset_id must be a UUID", "quantity must be an integer from 0 to 1000000000000", "idempotency_key is required"]));
    let b = assert_error(
        usage(&app, a, json!({ "asset_id": asset, "quantity": 1, "sku": "a b", "occurred_at": "2099-01-01T00:00:00Z", "idempotency_key": "k\u{1}" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "sku must be 1 to 128 letters, digits or . _ : / -",
            "occurred_at must not be more than 5 minutes in the future",
            "idempotency_key must be at most 200 characters, none of them control characters"
        ])
    );
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "meter.usage.recorded.v1").count(), 5, "{events:?}");
}
db_test!(usage_rolls_up_per_day_and_sku_and_a_repeated_key_counts_once);

async fn a_batch_answers_each_event_and_a_bad_event_fails_alone(app: TestApp) {
    let t = app.two_tenants("meterbatch").await;
    let a = t.a_token.as_str();
    let asset = uuid::Uuid::now_v7().to_string();
    let event = |quantity: i64, key: &str| json!({ "asset_id": asset, "sku": "api.call", "quantity": quantity, "occurred_at": "2026-11-03T10:00:00Z", "idempotency_key": key });
    let (s, before) = usage(&app, a, event(2, "old")).await;
    assert_eq!(s, StatusCode::CREATED);

    let (s, r) =
        usage(&app, a, json!({ "events": [event(1, "b1"), { "asset_id": asset, "quantity": 1 }, event(7, "b1"), event(9, "old"), "x", event(0, "b2")] })).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let d = &r["data"];
    assert_eq!((d["recorded"].as_i64(), d["repeated"].as_i64(), d["refused"].as_i64(), d["invalid"].as_i64()), (Some(2), Some(2), Some(0), Some(2)));
    let statuses: Vec<i64> = d["results"].as_array().unwrap().iter().map(|o| o["status"].as_i64().unwrap()).collect();
    assert_eq!(statuses, [201, 400, 200, 200, 400, 201]);
    let results = &d["results"];
    assert_eq!(results[1], json!({ "index": 1, "status": 400, "error": "ValidationError", "details": ["sku is required", "idempotency_key is required"] }));
    assert_eq!(results[4]["details"], json!(["an event must be a JSON object"]));
    assert_eq!(results[2]["event"], results[0]["event"], "a key repeated in the batch answers its first event");
    assert_eq!(results[3]["event"], before["data"], "a key seen before answers its first record");

    let (_, rows) = app.get(&format!("/api/meter/assets/{asset}/usage"), Some(a)).await;
    assert_eq!((rows["data"][0]["units"].as_i64(), rows["data"][0]["events"].as_i64()), (Some(3), Some(3)));
    for bad in [json!({ "events": [] }), json!({ "events": "x" }), json!({ "events": vec![event(1, "k"); 1001] })] {
        let b = assert_error(usage(&app, a, bad).await, 400, "ValidationError");
        assert_eq!(b["details"], json!(["events must be an array of 1 to 1000 events"]));
    }
    // A full batch of distinct keys lands in one request.
    let many: Vec<Value> = (0..1000).map(|i| event(1, &format!("many-{i}"))).collect();
    let (s, r) = usage(&app, a, json!({ "events": many.clone() })).await;
    assert_eq!((s, r["data"]["recorded"].as_i64()), (StatusCode::OK, Some(1000)));
    // Its replay (the keys claimed and read back over several statements)
    // answers every event's first record.
    let (s, again) = usage(&app, a, json!({ "events": many })).await;
    assert_eq!((s, again["data"]["recorded"].as_i64(), again["data"]["repeated"].as_i64()), (StatusCode::OK, Some(0), Some(1000)));
    let first: Vec<&Value> = r["data"]["results"].as_array().unwrap().iter().map(|o| &o["event"]["event_id"]).collect();
    let replayed: Vec<&Value> = again["data"]["results"].as_array().unwrap().iter().map(|o| &o["event"]["event_id"]).collect();
    assert_eq!((first.len(), first == replayed), (1000, true));
    let (_, rows) = app.get(&format!("/api/meter/assets/{asset}/usage"), Some(a)).await;
    assert_eq!(rows["data"][0]["units"].as_i64(), Some(1003));
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "meter.usage.recorded.v1").count(), 3, "one event a request that recorded usage");
}
db_test!(a_batch_answers_each_event_and_a_bad_event_fails_alone);

async fn a_tenant_over_its_hard_cap_is_refused_naming_the_sku_until_an_override(app: TestApp) {
    let t = app.two_tenants("metercap").await;
    let (a, b) = (t.a_token.as_str(), t.b_token.as_str());
    let db = &app.state().db;
    let tenant_a = t.a["tenant_id"].as_str().unwrap();
    let asset = uuid::Uuid::now_v7().to_string();
    let event = |sku: &str, quantity: i64, key: &str| json!({ "asset_id": asset, "sku": sku, "quantity": quantity, "idempotency_key": key });
    assert_eq!(usage(&app, a, event("sms", 6, "s1")).await.0, StatusCode::CREATED, "usage before the cap counts against it");
    let cap = hub_billing::meter::set_hardcap(db, tenant_a, "sms", 10, "op-1").await.unwrap();
    assert_eq!((cap.sku.as_str(), cap.monthly_units), ("sms", 10));

    let refused = assert_error(usage(&app, a, event("sms", 5, "s2")).await, 429, "HardCapReached");
    assert_eq!(
        refused,
        json!({ "success": false, "error": "HardCapReached", "sku": "sms", "period": this_month(),
            "details": [format!("the tenant's hard cap for sku sms is reached for {}", this_month())] })
    );
    assert_eq!(usage(&app, a, event("sms", 4, "s3")).await.0, StatusCode::CREATED, "up to the cap exactly");
    assert_error(usage(&app, a, event("sms", 1, "s4")).await, 429, "HardCapReached");
    assert_eq!(usage(&app, a, event("mms", 50, "m1")).await.0, StatusCode::CREATED, "another sku is not capped");
    assert_eq!(usage(&app, b, event("sms", 50, "b1")).await.0, StatusCode::CREATED, "another tenant is not capped");

    let until = hub_kernel::db::format_time(chrono::Utc::now() + chrono::Duration::hours(1));
    let o = hub_billing::meter::override_hardcap(
        db,
        "op-1",
        hub_billing::meter::NewOverride {
            tenant_id: tenant_a,
            sku: "sms",
            until: &until,
            operator_id: "op-1",
            reason: "incident 7",
            trace_id: Some("trace-1"),
        },
    )
    .await
    .unwrap();
    assert_eq!((o.sku.as_str(), o.reason.as_str(), o.trace_id.as_deref()), ("sms", "incident 7", Some("trace-1")));
    let (s, e) = usage(&app, a, event("sms", 5, "s2")).await;
    assert_eq!((s, e["data"]["quantity"].as_i64()), (StatusCode::CREATED, Some(5)), "a refused key is judged afresh: {e}");
    // An expired override no longer applies.
    sqlx::query("UPDATE meter_hardcap_override SET until = $1").bind("2020-01-01T00:00:00.000000Z").execute(db.writer()).await.unwrap();
    assert_error(usage(&app, a, event("sms", 1, "s5")).await, 429, "HardCapReached");

    // In a batch, the events that fit are recorded and the rest refused,
    // in the batch's order (not the keys').
    hub_billing::meter::set_hardcap(db, t.b["tenant_id"].as_str().unwrap(), "fax", 5, "op-1").await.unwrap();
    let (s, r) = usage(&app, b, json!({ "events": [event("fax", 3, "f3"), event("fax", 3, "f2"), event("fax", 2, "f1")] })).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!((r["data"]["recorded"].as_i64(), r["data"]["refused"].as_i64()), (Some(2), Some(1)));
    assert_eq!(
        r["data"]["results"][1],
        json!({ "index": 1, "status": 429, "error": "HardCapReached", "sku": "fax",
            "details": [format!("the tenant's hard cap for sku fax is reached for {}", this_month())] })
    );

    let bad = hub_billing::meter::set_hardcap(db, tenant_a, "a b", -1, "op-1").await.unwrap_err();
    assert_eq!(bad.body()["details"], json!(["sku must be 1 to 128 letters, digits or . _ : / -", "monthly_units must be 0 or more"]));
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "meter.hardcap.reached.v1").count(), 1, "once a sku and month: {events:?}");
    assert_eq!(events.iter().filter(|e| *e == "billing.hardcap.overridden.v1").count(), 1);
}
db_test!(a_tenant_over_its_hard_cap_is_refused_naming_the_sku_until_an_override);

async fn parallel_usage_never_exceeds_a_hard_cap(app: TestApp) {
    let t = app.two_tenants("meterrace").await;
    hub_billing::meter::set_hardcap(&app.state().db, t.a["tenant_id"].as_str().unwrap(), "gpu.s", 10, "op-1").await.unwrap();
    let asset = uuid::Uuid::now_v7().to_string();
    let calls = (0..20).map(|i| {
        let (app, token, asset) = (&app, t.a_token.clone(), asset.clone());
        async move { usage(app, &token, json!({ "asset_id": asset, "sku": "gpu.s", "quantity": 1, "idempotency_key": format!("p{i}") })).await.0 }
    });
    let statuses = futures_util::future::join_all(calls).await;
    assert_eq!(statuses.iter().filter(|s| **s == StatusCode::CREATED).count(), 10, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == StatusCode::TOO_MANY_REQUESTS).count(), 10, "{statuses:?}");
    let (_, rows) = app.get(&format!("/api/meter/assets/{asset}/usage"), Some(&t.a_token)).await;
    assert_eq!(rows["data"][0]["units"].as_i64(), Some(10));
}
db_test!(parallel_usage_never_exceeds_a_hard_cap);

async fn parallel_batches_sharing_keys_count_each_key_once(app: TestApp) {
    let t = app.two_tenants("meterkeys").await;
    let asset = uuid::Uuid::now_v7().to_string();
    let batch = |reverse: bool| {
        let mut keys: Vec<usize> = (0..100).collect();
        if reverse {
            keys.reverse();
        }
        let events: Vec<Value> = keys.iter().map(|k| json!({ "asset_id": asset, "sku": "x", "quantity": 1, "idempotency_key": format!("k{k}") })).collect();
        json!({ "events": events })
    };
    let calls = (0..4).map(|i| {
        let (app, token, body) = (&app, t.a_token.clone(), batch(i % 2 == 1));
        async move { usage(app, &token, body).await }
    });
    let answers = futures_util::future::join_all(calls).await;
    assert!(answers.iter().all(|(s, _)| *s == StatusCode::OK), "{answers:?}");
    let recorded: i64 = answers.iter().map(|(_, b)| b["data"]["recorded"].as_i64().unwrap()).sum();
    let repeated: i64 = answers.iter().map(|(_, b)| b["data"]["repeated"].as_i64().unwrap()).sum();
    assert_eq!((recorded, repeated), (100, 300));
    let (_, rows) = app.get(&format!("/api/meter/assets/{asset}/usage"), Some(&t.a_token)).await;
    assert_eq!((rows["data"][0]["units"].as_i64(), rows["data"][0]["events"].as_i64()), (Some(100), Some(100)));
}
db_test!(parallel_batches_sharing_keys_count_each_key_once);

async fn a_tenant_reads_its_caps_and_its_usage_across_assets(app: TestApp) {
    let t = app.two_tenants("meterlists").await;
    let (a, b) = (t.a_token.as_str(), t.b_token.as_str());
    let db = &app.state().db;
    let tenant_a = t.a["tenant_id"].as_str().unwrap();
    let (one, two) = (uuid::Uuid::now_v7().to_string(), uuid::Uuid::now_v7().to_string());
    let event = |asset: &str, sku: &str, quantity: i64, at: &str, key: &str| json!({ "asset_id": asset, "sku": sku, "quantity": quantity, "occurred_at": at, "idempotency_key": key });
    for (asset, sku, q, at, key) in [
        (&one, "api.call", 3, "2026-11-01T10:00:00Z", "u1"),
        (&two, "api.call", 4, "2026-11-01T12:00:00Z", "u2"),
        (&one, "storage.gb", 10, "2026-11-01T13:00:00Z", "u3"),
        (&one, "api.call", 1, "2026-11-02T08:00:00Z", "u4"),
    ] {
        assert_eq!(usage(&app, a, event(asset, sku, q, at, key)).await.0, StatusCode::CREATED);
    }
    assert_eq!(usage(&app, b, event(&one, "api.call", 50, "2026-11-01T10:00:00Z", "b1")).await.0, StatusCode::CREATED);

    // The tenant-wide roll-up: per day and sku over every asset, day
    // descending then sku.
    let (s, l) = app.get("/api/meter/usage", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    assert_eq!(
        l,
        json!({ "success": true, "total": 3, "data": [
            { "day": "2026-11-02", "sku": "api.call", "units": 1, "events": 1, "assets": 1 },
            { "day": "2026-11-01", "sku": "api.call", "units": 7, "events": 2, "assets": 2 },
            { "day": "2026-11-01", "sku": "storage.gb", "units": 10, "events": 1, "assets": 1 },
        ] })
    );
    let (_, l) = app.get("/api/meter/usage?sku=api.call&from=2026-11-01&to=2026-11-01", Some(a)).await;
    assert_eq!((l["total"].as_i64(), l["data"][0]["units"].as_i64()), (Some(1), Some(7)));
    let (_, l) = app.get("/api/meter/usage?limit=1&offset=1", Some(a)).await;
    assert_eq!((l["total"].as_i64(), l["data"][0]["units"].as_i64(), l["data"].as_array().unwrap().len()), (Some(3), Some(7), 1));
    let (_, l) = app.get("/api/meter/usage?from=2026-12-01", Some(a)).await;
    assert_eq!(l["total"], 0);
    let bad = assert_error(app.get("/api/meter/usage?from=2026-11-5&to=yesterday&sku=a%20b", Some(a)).await, 400, "ValidationError");
    assert_eq!(bad["details"], json!(["from must be a day, YYYY-MM-DD", "to must be a day, YYYY-MM-DD", "sku must be 1 to 128 letters, digits or . _ : / -"]));
    let bad = assert_error(app.get("/api/meter/usage?from=2026-11-05&to=2026-11-01", Some(a)).await, 400, "ValidationError");
    assert_eq!(bad["details"], json!(["from must be on or before to"]));

    // Caps: none yet; then each with this month's usage and what is left.
    let (_, caps) = app.get("/api/meter/hardcaps", Some(a)).await;
    assert_eq!(caps, json!({ "success": true, "data": [], "total": 0 }));
    let month = this_month();
    let now = format!("{month}-01T00:00:00Z");
    assert_eq!(usage(&app, a, event(&one, "sms", 4, &now, "s1")).await.0, StatusCode::CREATED);
    hub_billing::meter::set_hardcap(db, tenant_a, "sms", 10, "op-1").await.unwrap();
    hub_billing::meter::set_hardcap(db, tenant_a, "fax", 0, "op-1").await.unwrap();
    hub_billing::meter::set_hardcap(db, t.b["tenant_id"].as_str().unwrap(), "sms", 1, "op-1").await.unwrap();
    assert_error(usage(&app, a, event(&one, "fax", 1, &now, "f1")).await, 429, "HardCapReached");
    let (s, caps) = app.get("/api/meter/hardcaps", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{caps}");
    assert_eq!(caps["total"], 2);
    let fax = &caps["data"][0];
    assert_eq!(
        (fax["sku"].as_str(), fax["monthly_units"].as_i64(), fax["used"].as_i64(), fax["remaining"].as_i64(), fax["period"].as_str()),
        (Some("fax"), Some(0), Some(0), Some(0), Some(month.as_str()))
    );
    assert!(fax["cap_reached_at"].is_string() && fax["overridden_until"].is_null(), "{fax}");
    let sms = &caps["data"][1];
    assert_eq!((sms["sku"].as_str(), sms["used"].as_i64(), sms["remaining"].as_i64()), (Some("sms"), Some(4), Some(6)));
    assert!(sms["cap_reached_at"].is_null(), "{sms}");
    // An override running names its end.
    let until = hub_kernel::db::format_time(chrono::Utc::now() + chrono::Duration::hours(1));
    let o = hub_billing::meter::NewOverride { tenant_id: tenant_a, sku: "sms", until: &until, operator_id: "op-1", reason: "r", trace_id: None };
    hub_billing::meter::override_hardcap(db, "op-1", o).await.unwrap();
    let (_, caps) = app.get("/api/meter/hardcaps?sku=sms", Some(a)).await;
    assert_eq!((caps["total"].as_i64(), caps["data"][0]["overridden_until"].as_str()), (Some(1), Some(until.as_str())));
    let (_, caps) = app.get("/api/meter/hardcaps", Some(b)).await;
    assert_eq!((caps["total"].as_i64(), caps["data"][0]["monthly_units"].as_i64()), (Some(1), Some(1)), "another tenant sees its own");
    let bad = assert_error(app.get("/api/meter/hardcaps?sku=a%20b", Some(a)).await, 400, "ValidationError");
    assert_eq!(bad["details"], json!(["sku must be 1 to 128 letters, digits or . _ : / -"]));
}
db_test!(a_tenant_reads_its_caps_and_its_usage_across_assets);
