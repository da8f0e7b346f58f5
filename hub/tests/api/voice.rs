//! connector-<provider>-voice: call legs arrive as signed inbound webhooks
//! of kind `voice`, one row per (tenant, provider, leg): a repeat updates
//! the leg's status.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

fn leg(leg_id: &str, direction: &str, status: &str, started_at: &str) -> Value {
    json!({ "call_id": "call-1", "leg_id": leg_id, "direction": direction, "status": status,
            "from_number": "+31612345678", "to_number": "+31201234567", "started_at": started_at })
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

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |ty: &str| events.iter().filter(|e| *e == ty).count();
    assert_eq!((count("crm.call.logged.v1"), count("crm.call.missed.v1")), (3, 1), "the voicemail is a missed inbound call");
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
