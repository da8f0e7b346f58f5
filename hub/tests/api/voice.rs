//! connector-<provider>-voice: call legs arrive as signed inbound webhooks
//! of kind `voice`, one row per (tenant, provider, leg): a later report
//! moves the leg forward; the one that ends it logs the call, once.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

fn leg(leg_id: &str, direction: &str, status: &str, started_at: &str) -> Value {
    json!({ "call_id": "call-1", "leg_id": leg_id, "direction": direction, "status": status,
            "from_number": "+31612345678", "to_number": "+31201234567", "started_at": started_at })
}

/// The tenant's `crm.call.*` audit entries, oldest first: (type, actor,
/// payload).
async fn call_events(app: &TestApp, tenant_id: &str) -> Vec<(String, String, Value)> {
    let rows: Vec<(String, String, String)> =
        sqlx::query_as("SELECT event_type, actor_id, payload FROM audit_entry WHERE tenant_id = $1 AND event_type LIKE 'crm.call.%' ORDER BY pool_index, seq")
            .bind(tenant_id)
            .fetch_all(&app.state().db.read)
            .await
            .unwrap();
    rows.into_iter().map(|(ty, actor, payload)| (ty, actor, serde_json::from_str(&payload).unwrap())).collect()
}

/// Posts `body` signed with `secret` (Standard Webhooks) as `webhook_id`
/// to `base` + `path`.
async fn post_signed(client: &reqwest::Client, base: &str, path: &str, secret: &str, webhook_id: &str, body: &str) -> (StatusCode, Value) {
    let at = chrono::Utc::now().timestamp();
    let signature = standardwebhooks::Webhook::new(secret).unwrap().sign(webhook_id, at, body.as_bytes()).unwrap();
    let res = client
        .post(format!("{base}{path}"))
        .header("webhook-id", webhook_id)
        .header("webhook-timestamp", at.to_string())
        .header("webhook-signature", signature)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("request");
    (res.status(), res.json().await.unwrap_or(Value::Null))
}

fn statuses(list: &Value) -> Vec<(String, String)> {
    list["data"].as_array().unwrap().iter().map(|l| (l["leg_id"].as_str().unwrap().to_string(), l["status"].as_str().unwrap().to_string())).collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

async fn call_legs_are_recorded_updated_and_listed(app: TestApp) {
    let t = app.two_tenants("voice").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].as_str().unwrap().to_string());
    let sender = app.inbound_sender(a, &t.a["tenant_id"], "voice", "callco").await;

    let (s, first) = sender.send("v1", leg("leg-1", "inbound", "ringing", "2026-05-01T10:00:00Z")).await;
    assert_eq!((s, first["data"]["result"]["updated"].as_bool()), (StatusCode::OK, Some(false)), "{first}");
    // The same leg again: its status and ending change, the row stays one.
    let mut done = leg("leg-1", "inbound", "completed", "2026-05-01T10:00:00Z");
    done["ended_at"] = json!("2026-05-01T10:03:00Z");
    done["duration_seconds"] = json!(180);
    let (s, again) = sender.send("v2", done).await;
    assert_eq!((s, again["data"]["result"]["updated"].as_bool()), (StatusCode::OK, Some(true)));
    assert_eq!(again["data"]["result"]["call_leg_id"], first["data"]["result"]["call_leg_id"]);
    let mut vm = leg("leg-2", "inbound", "answered", "2026-05-01T11:00:00Z");
    vm["is_voicemail"] = json!(true);
    assert_eq!(sender.send("v3", vm).await.0, StatusCode::OK);
    assert_eq!(sender.send("v4", leg("leg-3", "outbound", "no_answer", "2026-05-01T12:00:00Z")).await.0, StatusCode::OK);

    let (s, r) = sender.send("v5", json!({ "leg_id": "x", "direction": "sideways", "status": "lost", "started_at": "noon", "duration_seconds": -1 })).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(
        r["details"],
        json!([
            "call_id is required",
            "direction must be one of: inbound, outbound",
            "status must be one of: ringing, answered, completed, no_answer, busy, failed",
            "from_number is required",
            "to_number is required",
            "started_at must be an RFC 3339 timestamp",
            "duration_seconds must be 0 to 86400"
        ])
    );
    let mut backwards = leg("leg-4", "inbound", "completed", "2026-05-01T10:00:00Z");
    backwards["ended_at"] = json!("2026-05-01T09:00:00Z");
    let (s, r) = sender.send("v6", backwards).await;
    assert_eq!((s, r["details"].clone()), (StatusCode::BAD_REQUEST, json!(["ended_at must not be before started_at"])));
    let (s, _) = sender.send("v7", json!({ "call_id": "c", "is_voicemail": "yes" })).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);

    let list = format!("/api/voice/call-legs?tenant_id={tenant}");
    let (s, all) = app.get(&list, Some(a)).await;
    assert_eq!((s, all["total"].as_i64()), (StatusCode::OK, Some(3)), "{all}");
    assert_eq!(statuses(&all), pairs(&[("leg-3", "no_answer"), ("leg-2", "answered"), ("leg-1", "completed")]));
    let one = &all["data"][2];
    assert_eq!(
        (one["ended_at"].as_str(), one["duration_seconds"].as_i64(), one["is_voicemail"].as_bool(), one["provider"].as_str(), one["from_number"].as_str()),
        (Some("2026-05-01T10:03:00.000000Z"), Some(180), Some(false), Some("callco"), Some("+31612345678"))
    );
    let (_, vms) = app.get(&format!("{list}&is_voicemail=true"), Some(a)).await;
    assert_eq!(statuses(&vms), pairs(&[("leg-2", "answered")]));
    let (_, not_vm) = app.get(&format!("{list}&is_voicemail=false&direction=inbound"), Some(a)).await;
    assert_eq!(statuses(&not_vm), pairs(&[("leg-1", "completed")]));
    let (_, missed) = app.get(&format!("{list}&status=no_answer&direction=outbound"), Some(a)).await;
    assert_eq!(statuses(&missed), pairs(&[("leg-3", "no_answer")]));
    let (_, page) = app.get(&format!("{list}&limit=1&offset=1"), Some(a)).await;
    assert_eq!((page["total"].as_i64(), statuses(&page)), (Some(3), pairs(&[("leg-2", "answered")])));
    let b = assert_error(app.get(&format!("{list}&is_voicemail=yes&direction=up&status=gone"), Some(a)).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!([
            "status must be one of: ringing, answered, completed, no_answer, busy, failed",
            "direction must be one of: inbound, outbound",
            "is_voicemail must be true or false"
        ])
    );
    assert_error(app.get("/api/voice/call-legs?status=busy", Some(a)).await, 400, "ValidationError");
    let (s, other) = app.get(&format!("/api/voice/call-legs?tenant_id={}", t.b["tenant_id"].as_str().unwrap()), Some(&t.b_token)).await;
    assert_eq!((s, other["total"].as_i64()), (StatusCode::OK, Some(0)));
    assert_error(app.get(&list, Some(&t.b_token)).await, 403, "TenantMismatch");

    // Logged: leg-1 when it completed (not while ringing), leg-3 that
    // ended no_answer (missed as well); leg-2 is still answered.
    let leg1 = first["data"]["result"]["call_leg_id"].clone();
    let events = call_events(&app, &tenant).await;
    assert_eq!(events.iter().map(|(ty, _, _)| ty.as_str()).collect::<Vec<_>>(), ["crm.call.logged.v1", "crm.call.logged.v1", "crm.call.missed.v1"]);
    assert_eq!(
        events[0].2,
        json!({ "call_id": null, "contact_id": null, "lead_id": null, "recording_consent": null, "call_leg_id": leg1, "provider": "callco", "provider_call_id": "call-1", "direction": "inbound", "status": "completed",
                "disposition": "answered", "is_voicemail": false, "duration_seconds": 180, "occurred_at": "2026-05-01T10:00:00.000000Z",
                "ended_at": "2026-05-01T10:03:00.000000Z" })
    );
    assert_eq!((events[1].2["disposition"].as_str(), events[1].2["direction"].as_str()), (Some("no_answer"), Some("outbound")));
    assert_eq!(events[1].2, events[2].2, "the missed call's payload is the logged one's");
    assert!(events.iter().all(|(_, actor, _)| actor == "voice:callco"));
}
db_test!(call_legs_are_recorded_updated_and_listed);

async fn a_call_leg_is_read_by_id_and_legs_filtered_by_call(app: TestApp) {
    let t = app.two_tenants("voice-one").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].as_str().unwrap().to_string());
    let sender = app.inbound_sender(a, &t.a["tenant_id"], "voice", "callco").await;
    let (s, first) = sender.send("o1", leg("leg-1", "inbound", "answered", "2026-05-01T10:00:00Z")).await;
    assert_eq!(s, StatusCode::OK, "{first}");
    let mut other_call = leg("leg-2", "outbound", "busy", "2026-05-01T11:00:00Z");
    other_call["call_id"] = json!("call-2");
    assert_eq!(sender.send("o2", other_call).await.0, StatusCode::OK);
    assert_eq!(sender.send("o3", leg("leg-3", "outbound", "completed", "2026-05-01T12:00:00Z")).await.0, StatusCode::OK);
    let id = first["data"]["result"]["call_leg_id"].as_str().unwrap().to_string();

    let (s, one) = app.get(&format!("/api/voice/call-legs/{id}"), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{one}");
    assert_eq!(
        (one["data"]["call_leg_id"].as_str(), one["data"]["leg_id"].as_str(), one["data"]["call_id"].as_str(), one["data"]["status"].as_str()),
        (Some(id.as_str()), Some("leg-1"), Some("call-1"), Some("answered"))
    );
    assert_eq!(one["data"]["is_voicemail"], false);
    assert_error(app.get(&format!("/api/voice/call-legs/{}", uuid::Uuid::now_v7()), Some(a)).await, 404, "NotFound");
    assert_error(app.get("/api/voice/call-legs/leg-1", Some(a)).await, 404, "NotFound");
    assert_error(app.get(&format!("/api/voice/call-legs/{id}"), Some(&t.b_token)).await, 404, "NotFound");

    let (_, call1) = app.get(&format!("/api/voice/call-legs?tenant_id={tenant}&call_id=call-1"), Some(a)).await;
    assert_eq!(call1["total"], 2);
    assert_eq!(statuses(&call1), pairs(&[("leg-3", "completed"), ("leg-1", "answered")]));
    let (_, call1_out) = app.get(&format!("/api/voice/call-legs?tenant_id={tenant}&call_id=call-1&direction=outbound"), Some(a)).await;
    assert_eq!(statuses(&call1_out), pairs(&[("leg-3", "completed")]));
    let (_, none) = app.get(&format!("/api/voice/call-legs?tenant_id={tenant}&call_id=call-9"), Some(a)).await;
    assert_eq!(none["total"], 0);
    let long = "c".repeat(257);
    assert_error(app.get(&format!("/api/voice/call-legs?tenant_id={tenant}&call_id={long}"), Some(a)).await, 400, "ValidationError");
}
db_test!(a_call_leg_is_read_by_id_and_legs_filtered_by_call);

/// A leg rings, is answered and completes: one `crm.call.logged.v1`, on
/// completion; a leg ending `no_answer`, `busy` or `failed` also records
/// `crm.call.missed.v1`; a repeated end, an older report or a resent
/// webhook records nothing more.
async fn a_leg_logs_its_call_once_when_it_ends(app: TestApp) {
    let t = app.two_tenants("voice-end").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].as_str().unwrap().to_string());
    let sender = app.inbound_sender(a, &t.a["tenant_id"], "voice", "callco").await;
    let result = |(s, r): (StatusCode, Value)| {
        assert_eq!(s, StatusCode::OK, "{r}");
        r["data"]["result"].clone()
    };

    let r = result(sender.send("e1", leg("leg-1", "outbound", "ringing", "2026-05-01T10:00:00Z")).await);
    let id = r["call_leg_id"].clone();
    assert_eq!(r, json!({ "recorded": true, "call_leg_id": id, "updated": false, "status": "ringing" }));
    let r = result(sender.send("e2", leg("leg-1", "outbound", "answered", "2026-05-01T10:00:00Z")).await);
    assert_eq!(r, json!({ "recorded": true, "call_leg_id": id, "updated": true, "status": "answered" }));
    assert!(call_events(&app, &tenant).await.is_empty(), "a leg ringing or answered is no logged call yet");
    let mut done = leg("leg-1", "outbound", "completed", "2026-05-01T10:00:00Z");
    done["ended_at"] = json!("2026-05-01T10:02:00Z");
    let r = result(sender.send("e3", done.clone()).await);
    assert_eq!(r, json!({ "recorded": true, "call_leg_id": id, "updated": true, "status": "completed" }));
    // The webhook resent: its first answer, nothing applied again.
    let (s, resent) = sender.send("e3", done.clone()).await;
    assert_eq!((s, resent["data"]["result"].clone(), resent["data"]["webhook_id"].clone()), (StatusCode::OK, r.clone(), json!("e3")));
    // The end reported again under another id, now with its duration: the
    // leg gains it, and is not logged twice.
    done["duration_seconds"] = json!(120);
    assert_eq!(result(sender.send("e4", done).await)["status"], "completed");
    // An older report arriving late does not reopen the leg.
    let r = result(sender.send("e5", leg("leg-1", "outbound", "answered", "2026-05-01T10:00:00Z")).await);
    assert_eq!(r, json!({ "recorded": true, "call_leg_id": id, "updated": true, "status": "completed" }));
    // An end before the leg's stored start is refused (400), even when the
    // report's own started_at is earlier still; nothing changes.
    let mut before = leg("leg-1", "outbound", "completed", "2026-05-01T09:00:00Z");
    before["ended_at"] = json!("2026-05-01T09:30:00Z");
    let b = assert_error(sender.send("e6", before).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["ended_at must not be before the leg's stored started_at"]));
    let (_, one) = app.get(&format!("/api/voice/call-legs/{}", id.as_str().unwrap()), Some(a)).await;
    assert_eq!(
        (one["data"]["status"].as_str(), one["data"]["ended_at"].as_str(), one["data"]["duration_seconds"].as_i64()),
        (Some("completed"), Some("2026-05-01T10:02:00.000000Z"), Some(120))
    );
    let events = call_events(&app, &tenant).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!((events[0].0.as_str(), events[0].1.as_str()), ("crm.call.logged.v1", "voice:callco"));
    assert_eq!(
        events[0].2,
        json!({ "call_id": null, "contact_id": null, "lead_id": null, "recording_consent": null, "call_leg_id": id, "provider": "callco", "provider_call_id": "call-1", "direction": "outbound", "status": "completed",
                "disposition": "answered", "is_voicemail": false, "duration_seconds": null, "occurred_at": "2026-05-01T10:00:00.000000Z",
                "ended_at": "2026-05-01T10:02:00.000000Z" }),
        "the payload of the end as it was recorded"
    );

    // Each way of reaching nobody: logged and missed, with its disposition;
    // a completed call that reached voicemail is logged, not missed.
    let mut ids = Vec::new();
    for (n, status) in ["no_answer", "busy", "failed"].into_iter().enumerate() {
        let leg_id = format!("leg-m{n}");
        result(sender.send(&format!("m{n}a"), leg(&leg_id, "inbound", "ringing", "2026-05-01T11:00:00Z")).await);
        let r = result(sender.send(&format!("m{n}b"), leg(&leg_id, "inbound", status, "2026-05-01T11:00:00Z")).await);
        assert_eq!(r["status"], status);
        // Once ended, another end changes nothing.
        assert_eq!(result(sender.send(&format!("m{n}c"), leg(&leg_id, "inbound", "completed", "2026-05-01T11:00:00Z")).await)["status"], status);
        ids.push(r["call_leg_id"].clone());
    }
    let mut vm = leg("leg-vm", "inbound", "completed", "2026-05-01T12:00:00Z");
    vm["is_voicemail"] = json!(true);
    vm["duration_seconds"] = json!(30);
    let vm_id = result(sender.send("vm", vm).await)["call_leg_id"].clone();
    // Its end again without the flag: the flag stays, the duration is the
    // newer one, nothing more is recorded.
    let mut vm_again = leg("leg-vm", "inbound", "completed", "2026-05-01T12:00:00Z");
    vm_again["duration_seconds"] = json!(31);
    assert_eq!(result(sender.send("vm2", vm_again).await)["status"], "completed");
    // Nor does an end saying it was no voicemail: the flag decided the
    // logged disposition, and is frozen once the leg ended.
    let mut vm_not = leg("leg-vm", "inbound", "completed", "2026-05-01T12:00:00Z");
    vm_not["is_voicemail"] = json!(false);
    vm_not["duration_seconds"] = json!(31);
    assert_eq!(result(sender.send("vm3", vm_not).await)["status"], "completed");
    let (_, one) = app.get(&format!("/api/voice/call-legs/{}", vm_id.as_str().unwrap()), Some(a)).await;
    assert_eq!((one["data"]["is_voicemail"].as_bool(), one["data"]["duration_seconds"].as_i64()), (Some(true), Some(31)));
    let events = call_events(&app, &tenant).await;
    let kinds: Vec<(&str, &str)> = events[1..].iter().map(|(ty, _, p)| (ty.as_str(), p["disposition"].as_str().unwrap())).collect();
    assert_eq!(
        kinds,
        [
            ("crm.call.logged.v1", "no_answer"),
            ("crm.call.missed.v1", "no_answer"),
            ("crm.call.logged.v1", "busy"),
            ("crm.call.missed.v1", "busy"),
            ("crm.call.logged.v1", "failed"),
            ("crm.call.missed.v1", "failed"),
            ("crm.call.logged.v1", "voicemail"),
        ]
    );
    for (n, id) in ids.iter().enumerate() {
        assert_eq!(events[1 + 2 * n].2["call_leg_id"], *id);
        assert_eq!(events[1 + 2 * n].2, events[2 + 2 * n].2);
    }
    assert_eq!(
        events[7].2,
        json!({ "call_id": null, "contact_id": null, "lead_id": null, "recording_consent": null, "call_leg_id": vm_id, "provider": "callco", "provider_call_id": "call-1", "direction": "inbound", "status": "completed",
                "disposition": "voicemail", "is_voicemail": true, "duration_seconds": 30, "occurred_at": "2026-05-01T12:00:00.000000Z",
                "ended_at": null })
    );

    // A refused payload is not remembered: its webhook-id sent again with a
    // payload that fits is handled.
    let (s, _) = sender.send("fix", json!({ "leg_id": "leg-x" })).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(result(sender.send("fix", leg("leg-x", "inbound", "busy", "2026-05-01T13:00:00Z")).await)["status"], "busy");
    // A reused webhook-id with another payload is not a resend.
    let b = assert_error(sender.send("e1", leg("leg-y", "inbound", "busy", "2026-05-01T13:00:00Z")).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["webhook-id e1 was received already with a different body"]));
    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |ty: &str| events.iter().filter(|e| *e == ty).count();
    assert_eq!(
        (count("crm.call.logged.v1"), count("crm.call.missed.v1"), count("webhook.inbound.received.v1")),
        (6, 4, 5 + 9 + 3 + 1),
        "e1 to e5 once each (e6 refused), three reports of each missed leg, three of the voicemail, leg-x"
    );
}
db_test!(a_leg_logs_its_call_once_when_it_ends);

/// Eight identical deliveries at once (a sender's resends racing), split
/// over two replicas on PostgreSQL: all 200 with one answer, the leg ended
/// once, one receipt, one logged call. Then eight reports of one leg's end
/// under eight webhook-ids at once: one logged call, one missed.
async fn concurrent_deliveries_apply_once(app: TestApp) {
    // SQLite is one hub process per database file.
    let replica = if app.backend == Backend::Postgres { Some(app.replica().await) } else { None };
    let bases = [app.base.clone(), replica.as_ref().map_or(app.base.clone(), |r| r.base.clone())];
    let t = app.two_tenants("voice-race").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].as_str().unwrap().to_string());
    let secret = format!("whsec_{}", "E".repeat(32));
    let (s, set) = app.post("/api/webhooks/inbound-secrets", Some(a), json!({ "kind": "voice", "provider": "callco", "secret": secret })).await;
    assert_eq!(s, StatusCode::CREATED, "{set}");
    let path = format!("/api/webhooks/inbound/voice/callco?tenant_id={tenant}");
    let ringing = leg("leg-r1", "inbound", "ringing", "2026-05-01T10:00:00Z").to_string();
    assert_eq!(post_signed(&app.client, &app.base, &path, &secret, "r0", &ringing).await.0, StatusCode::OK);

    let done = leg("leg-r1", "inbound", "completed", "2026-05-01T10:00:00Z").to_string();
    let answers = futures_util::future::join_all((0..8).map(|i| post_signed(&app.client, &bases[i % 2], &path, &secret, "r1", &done))).await;
    for (s, body) in &answers {
        assert_eq!(*s, StatusCode::OK, "{body}");
        assert_eq!(*body, answers[0].1, "every resend answers the first delivery's receipt");
    }
    assert_eq!(answers[0].1["data"]["result"]["status"], "completed");
    let events = call_events(&app, &tenant).await;
    assert_eq!(events.iter().map(|(ty, _, _)| ty.as_str()).collect::<Vec<_>>(), ["crm.call.logged.v1"]);
    assert_eq!(events[0].2["call_leg_id"], answers[0].1["data"]["result"]["call_leg_id"]);

    let busy = leg("leg-r2", "outbound", "busy", "2026-05-01T11:00:00Z").to_string();
    let ids: Vec<String> = (0..8).map(|i| format!("r2-{i}")).collect();
    let answers =
        futures_util::future::join_all(ids.iter().enumerate().map(|(i, id)| post_signed(&app.client, &bases[i % 2], &path, &secret, id, &busy))).await;
    let leg2 = answers[0].1["data"]["result"]["call_leg_id"].clone();
    for (s, body) in &answers {
        assert_eq!(
            (*s, body["data"]["result"]["call_leg_id"].clone(), body["data"]["result"]["status"].clone()),
            (StatusCode::OK, leg2.clone(), json!("busy")),
            "{body}"
        );
    }
    assert_eq!(answers.iter().filter(|(_, b)| b["data"]["result"]["updated"] == false).count(), 1, "one report inserted the leg");
    let events = call_events(&app, &tenant).await;
    assert_eq!(events.iter().map(|(ty, _, _)| ty.as_str()).collect::<Vec<_>>(), ["crm.call.logged.v1", "crm.call.logged.v1", "crm.call.missed.v1"]);
    assert!(events[1..].iter().all(|(_, _, p)| p["call_leg_id"] == leg2 && p["disposition"] == "busy"));
    let all = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(all.iter().filter(|e| *e == "webhook.inbound.received.v1").count(), 1 + 1 + 8, "r0, r1 once, the eight r2");
    let (_, list) = app.get(&format!("/api/voice/call-legs?tenant_id={tenant}"), Some(a)).await;
    assert_eq!((list["total"].as_i64(), statuses(&list)), (Some(2), pairs(&[("leg-r2", "busy"), ("leg-r1", "completed")])));
}
db_test!(concurrent_deliveries_apply_once);
