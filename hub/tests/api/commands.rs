//! sdk-command over HTTP: risk classes and approval, states, time to live,
//! idempotent acks with the per-robot credential, and the SSE stream.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{assets::robot, db_test, helpers::*};

async fn command(app: &TestApp, token: &str, body: Value) -> Value {
    let (s, c) = app.post("/api/commands", Some(token), body).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    c["data"].clone()
}

async fn low_risk_commands_are_queued_at_once_and_acks_are_idempotent(app: TestApp) {
    let t = app.signup("low@example.com", "low").await;
    let token = t["token"].as_str().unwrap();
    let (asset, cred) = robot(&app, token, json!({ "display_name": "R", "components": ["arm"] })).await;
    let (other_asset, other_cred) = robot(&app, token, json!({ "display_name": "R2" })).await;
    let c = command(
        &app,
        token,
        json!({
            "type": "move", "params": { "x": 1 }, "risk_class": "low", "target_asset_id": asset,
            "target_component_id": "arm", "tenant_id": t["tenant_id"], "ttl_seconds": 600,
        }),
    )
    .await;
    assert_eq!(c["status"], "queued");
    assert_eq!(c["seq"], 1);
    assert_eq!(c["type"], "move");
    assert_eq!(c["params"], json!({ "x": 1 }));
    assert_eq!(c["target_component_id"], "arm");
    assert_eq!(c["ttl_seconds"], 600);
    assert_eq!(c["decision"], Value::Null);
    assert_eq!(c["ack"], Value::Null);
    let id = c["command_id"].as_str().unwrap();
    let medium = command(&app, token, json!({ "type": "beep", "risk_class": "medium", "target_asset_id": asset })).await;
    assert_eq!((medium["status"].as_str(), medium["seq"].as_i64()), (Some("queued"), Some(2)));

    let ack_path = format!("/api/commands/{id}/ack");
    // The ack route takes the robot credential of the command's asset only.
    assert_error(app.post(&ack_path, None, json!({ "ok": true })).await, 401, "Unauthorized");
    assert_error(app.post(&ack_path, Some("rc_wrong"), json!({ "ok": true })).await, 401, "Unauthorized");
    assert_error(app.post(&ack_path, Some(token), json!({ "ok": true })).await, 401, "Unauthorized");
    assert_error(app.post(&ack_path, Some(&other_cred), json!({ "ok": true })).await, 404, "NotFound");
    let body = assert_error(app.post(&ack_path, Some(&cred), json!({ "ok": "yes", "code": 5 })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["ok must be true or false", "code must be a string"]));

    let (s, first) = app.post(&ack_path, Some(&cred), json!({ "ok": true, "data": { "moved": 1 } })).await;
    assert_eq!(s, StatusCode::OK, "{first}");
    assert_eq!(first["data"]["status"], "acknowledged_ok");
    assert_eq!(first["data"]["ack"]["ok"], true);
    assert_eq!(first["data"]["ack"]["data"], json!({ "moved": 1 }));
    let (s, again) = app.post(&ack_path, Some(&cred), json!({ "ok": true, "data": { "moved": 1 } })).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(again, first, "the same ack twice answers the same");
    assert_error(app.post(&ack_path, Some(&cred), json!({ "ok": false, "code": "E" })).await, 409, "Conflict");
    let (_, seen) = app.get(&format!("/api/commands/{id}"), Some(token)).await;
    assert_eq!(seen["data"], first["data"]);

    let (s, fail) = app
        .post(
            &format!("/api/commands/{}/ack", medium["command_id"].as_str().unwrap()),
            Some(&cred),
            json!({ "ok": false, "code": "exit_3", "message": "jammed" }),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(fail["data"]["status"], "acknowledged_failed");
    assert_eq!(fail["data"]["ack"], json!({ "ok": false, "code": "exit_3", "message": "jammed", "data": null, "acked_at": fail["data"]["ack"]["acked_at"] }));

    let (s, list) = app.get(&format!("/api/assets/{asset}/commands"), Some(token)).await;
    assert_eq!(s, StatusCode::OK);
    let ids: Vec<&str> = list["data"].as_array().unwrap().iter().map(|c| c["command_id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec![medium["command_id"].as_str().unwrap(), id], "newest first");
    let (_, filtered) = app.get(&format!("/api/assets/{asset}/commands?status=acknowledged_ok"), Some(token)).await;
    assert_eq!(filtered["data"].as_array().unwrap().len(), 1);
    assert_error(app.get(&format!("/api/assets/{asset}/commands?status=done"), Some(token)).await, 400, "ValidationError");
    assert_error(app.get(&format!("/api/assets/{asset}/commands?limit=x"), Some(token)).await, 400, "ValidationError");
    let (_, empty) = app.get(&format!("/api/assets/{other_asset}/commands"), Some(token)).await;
    assert_eq!(empty["data"], json!([]));
}
db_test!(low_risk_commands_are_queued_at_once_and_acks_are_idempotent);

async fn command_requests_are_validated(app: TestApp) {
    let t = app.signup("cv@example.com", "cv").await;
    let token = t["token"].as_str().unwrap();
    let (asset, _) = robot(&app, token, json!({ "display_name": "R", "components": ["arm"] })).await;
    let body = assert_error(app.post("/api/commands", Some(token), json!({ "params": [1] })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["type is required", "risk_class is required", "target_asset_id is required", "params must be a JSON object"]));
    let body = assert_error(
        app.post("/api/commands", Some(token), json!({ "type": "x", "risk_class": "extreme", "target_asset_id": "nope", "ttl_seconds": 0 })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        body["details"],
        json!(["risk_class must be one of: low, medium, high, critical", "target_asset_id must be a UUID", "ttl_seconds must be an integer from 1 to 604800",])
    );
    let body = assert_error(
        app.post("/api/commands", Some(token), json!({ "type": "x", "risk_class": "low", "target_asset_id": asset, "target_component_id": "leg" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["target_component_id must be one of the asset's components: arm"]));
    assert_error(
        app.post(
            "/api/commands",
            Some(token),
            json!({ "type": "x", "risk_class": "low", "target_asset_id": asset, "tenant_id": "0190a000-0000-7000-8000-000000000000" }),
        )
        .await,
        403,
        "TenantMismatch",
    );
}
db_test!(command_requests_are_validated);

async fn high_and_critical_commands_wait_for_a_human_with_the_approve_grant(app: TestApp) {
    let t = app.signup("hi@example.com", "hi").await;
    let owner = t["token"].as_str().unwrap();
    let (asset, cred) = robot(&app, owner, json!({ "display_name": "R" })).await;
    let high = command(&app, owner, json!({ "type": "cut", "risk_class": "high", "target_asset_id": asset })).await;
    assert_eq!(high["status"], "awaiting_approval");
    assert_eq!(high["seq"], Value::Null);
    let id = high["command_id"].as_str().unwrap();
    let decide = format!("/api/commands/{id}/decision");
    // Not deliverable, not ackable, until approved.
    assert!(hub_platform::command::pending(app.state(), &asset, 0, 10).await.unwrap().is_empty());
    assert_error(app.post(&format!("/api/commands/{id}/ack"), Some(&cred), json!({ "ok": true })).await, 409, "Conflict");

    // A key with every scope is not a person.
    let (_, key) = app.key(owner, "hi", json!(["*"])).await;
    let body = assert_error(app.post(&decide, key["api_key"].as_str(), json!({ "approved": true })).await, 403, "Forbidden");
    assert!(body["details"][0].as_str().unwrap().contains("human"), "{body}");
    // A person whose roles lack command.command.approve is refused...
    let (member_token, member_persona) = app.member(owner, &t["tenant_id"], "m@example.com").await;
    let (_, tpl) = app
        .post("/api/role-templates", Some(owner), json!({ "name": "operator", "permissions": { "command.command.write": true, "command.command.read": true } }))
        .await;
    let (s, _) =
        app.post("/api/role-assignments", Some(owner), json!({ "persona_id": member_persona, "role_template_id": tpl["data"]["role_template_id"] })).await;
    assert_eq!(s, StatusCode::CREATED);
    assert_error(app.post(&decide, Some(&member_token), json!({ "approved": true })).await, 403, "Forbidden");
    // ...until a role grants it.
    let (_, approver) = app.post("/api/role-templates", Some(owner), json!({ "name": "approver", "permissions": { "command.command.*": true } })).await;
    app.post("/api/role-assignments", Some(owner), json!({ "persona_id": member_persona, "role_template_id": approver["data"]["role_template_id"] })).await;
    let body = assert_error(app.post(&decide, Some(&member_token), json!({ "approved": "yes" })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["approved must be true or false"]));
    let (s, d) = app.post(&decide, Some(&member_token), json!({ "approved": true, "reason": "checked the site" })).await;
    assert_eq!(s, StatusCode::OK, "{d}");
    assert_eq!(d["data"]["status"], "queued");
    assert_eq!(d["data"]["seq"], 1);
    assert_eq!(d["data"]["decision"]["approved"], true);
    assert_eq!(d["data"]["decision"]["reason"], "checked the site");
    assert_eq!(d["data"]["decision"]["decided_by"], member_persona);
    assert_eq!(hub_platform::command::pending(app.state(), &asset, 0, 10).await.unwrap()[0].command_id, id);
    assert_error(app.post(&decide, Some(owner), json!({ "approved": false })).await, 409, "Conflict");

    // A rejected critical command never reaches the robot.
    let critical = command(&app, owner, json!({ "type": "self-destruct", "risk_class": "critical", "target_asset_id": asset })).await;
    let cid = critical["command_id"].as_str().unwrap();
    let (s, r) = app.post(&format!("/api/commands/{cid}/decision"), Some(owner), json!({ "approved": false, "reason": "no" })).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["data"]["status"], "rejected");
    let pending: Vec<String> = hub_platform::command::pending(app.state(), &asset, 0, 10).await.unwrap().into_iter().map(|c| c.command_id).collect();
    assert_eq!(pending, vec![id.to_string()]);
    assert_error(app.post(&format!("/api/commands/{cid}/ack"), Some(&cred), json!({ "ok": true })).await, 409, "Conflict");
    // Low risk needs no decision.
    let low = command(&app, owner, json!({ "type": "beep", "risk_class": "low", "target_asset_id": asset })).await;
    let body = assert_error(
        app.post(&format!("/api/commands/{}/decision", low["command_id"].as_str().unwrap()), Some(owner), json!({ "approved": true })).await,
        409,
        "Conflict",
    );
    assert_eq!(body["details"], json!(["a low-risk command needs no decision"]));
}
db_test!(high_and_critical_commands_wait_for_a_human_with_the_approve_grant);

async fn an_expired_command_is_never_delivered(app: TestApp) {
    let t = app.signup("ttl@example.com", "ttl").await;
    let token = t["token"].as_str().unwrap();
    let (asset, cred) = robot(&app, token, json!({ "display_name": "R" })).await;
    let queued = command(&app, token, json!({ "type": "x", "risk_class": "low", "target_asset_id": asset, "ttl_seconds": 1 })).await;
    let waiting = command(&app, token, json!({ "type": "y", "risk_class": "high", "target_asset_id": asset, "ttl_seconds": 1 })).await;
    assert_eq!(hub_platform::command::pending(app.state(), &asset, 0, 10).await.unwrap().len(), 1);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(hub_platform::command::pending(app.state(), &asset, 0, 10).await.unwrap().is_empty());
    for c in [&queued, &waiting] {
        let (_, seen) = app.get(&format!("/api/commands/{}", c["command_id"].as_str().unwrap()), Some(token)).await;
        assert_eq!(seen["data"]["status"], "expired");
    }
    let body = assert_error(
        app.post(&format!("/api/commands/{}/decision", waiting["command_id"].as_str().unwrap()), Some(token), json!({ "approved": true })).await,
        409,
        "Conflict",
    );
    assert_eq!(body["details"], json!(["the command expired before a decision"]));
    // The sweeper writes the state down within a couple of seconds.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_error(app.post(&format!("/api/commands/{}/ack", queued["command_id"].as_str().unwrap()), Some(&cred), json!({ "ok": true })).await, 409, "Conflict");
    let (_, listed) = app.get(&format!("/api/assets/{asset}/commands?status=expired"), Some(token)).await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 2);
}
db_test!(an_expired_command_is_never_delivered);

async fn commands_are_listed_tenant_wide_and_cancelled_before_delivery(app: TestApp) {
    let t = app.signup("cancel@example.com", "cancel").await;
    let token = t["token"].as_str().unwrap();
    let (asset, cred) = robot(&app, token, json!({ "display_name": "R" })).await;
    let (other, _) = robot(&app, token, json!({ "display_name": "R2" })).await;
    let queued = command(&app, token, json!({ "type": "a", "risk_class": "low", "target_asset_id": asset })).await;
    let waiting = command(&app, token, json!({ "type": "b", "risk_class": "high", "target_asset_id": asset })).await;
    let elsewhere = command(&app, token, json!({ "type": "c", "risk_class": "critical", "target_asset_id": other })).await;
    let delivered = command(&app, token, json!({ "type": "d", "risk_class": "medium", "target_asset_id": other })).await;
    hub_platform::command::mark_delivered(app.state(), &other, delivered["seq"].as_i64().unwrap()).await.unwrap();
    let id = |c: &Value| c["command_id"].as_str().unwrap().to_string();
    let ids = |v: &Value| v["data"].as_array().unwrap().iter().map(|c| c["command_id"].as_str().unwrap().to_string()).collect::<Vec<_>>();

    let (s, all) = app.get("/api/commands", Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{all}");
    assert_eq!((ids(&all), all["total"].as_i64()), (vec![id(&delivered), id(&elsewhere), id(&waiting), id(&queued)], Some(4)), "newest first");
    for (query, expected) in [
        ("status=awaiting_approval".to_string(), vec![id(&elsewhere), id(&waiting)]),
        (format!("asset_id={asset}"), vec![id(&waiting), id(&queued)]),
        (format!("asset_id={}&status=delivered", other.to_uppercase()), vec![id(&delivered)]),
        ("risk_class=critical".to_string(), vec![id(&elsewhere)]),
        ("status=cancelled".to_string(), vec![]),
    ] {
        let (s, page) = app.get(&format!("/api/commands?{query}"), Some(token)).await;
        assert_eq!(s, StatusCode::OK, "{page}");
        assert_eq!((ids(&page), page["total"].as_i64()), (expected.clone(), Some(expected.len() as i64)), "{query}");
    }
    let (_, paged) = app.get("/api/commands?limit=2&offset=1", Some(token)).await;
    assert_eq!((ids(&paged), paged["total"].as_i64()), (vec![id(&elsewhere), id(&waiting)], Some(4)));
    let body = assert_error(app.get("/api/commands?status=done&asset_id=nope&risk_class=extreme", Some(token)).await, 400, "ValidationError");
    assert_eq!(
        body["details"],
        json!([
            "status must be one of: awaiting_approval, queued, delivered, acknowledged_ok, acknowledged_failed, rejected, expired, cancelled",
            "asset_id must be a UUID",
            "risk_class must be one of: low, medium, high, critical",
        ])
    );

    // A queued command is withdrawn: never delivered, its ack refused.
    let (s, c) = app.post(&format!("/api/commands/{}/cancel", id(&queued)), Some(token), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{c}");
    assert_eq!(c["data"]["status"], "cancelled");
    assert!(hub_platform::command::pending(app.state(), &asset, 0, 10).await.unwrap().is_empty());
    let body = assert_error(app.post(&format!("/api/commands/{}/ack", id(&queued)), Some(&cred), json!({ "ok": true })).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the command is cancelled and cannot be acknowledged"]));
    let (s, again) = app.post(&format!("/api/commands/{}/cancel", id(&queued)), Some(token), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(again["data"], c["data"], "cancelling again answers the same");
    // So is one awaiting approval: no decision can take it up again.
    let (s, w) = app.post(&format!("/api/commands/{}/cancel", id(&waiting)), Some(token), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{w}");
    assert_eq!(w["data"]["status"], "cancelled");
    let body = assert_error(app.post(&format!("/api/commands/{}/decision", id(&waiting)), Some(token), json!({ "approved": true })).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the command is cancelled: only a command awaiting approval can be decided"]));
    // A delivered command is the robot's now.
    let body = assert_error(app.post(&format!("/api/commands/{}/cancel", id(&delivered)), Some(token), json!({})).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the command is delivered: only a command awaiting approval or delivery can be cancelled"]));
    let (_, page) = app.get("/api/commands?status=cancelled", Some(token)).await;
    assert_eq!((ids(&page), page["total"].as_i64()), (vec![id(&waiting), id(&queued)], Some(2)));
    assert_error(app.post("/api/commands/0190a000-0000-7000-8000-000000000000/cancel", Some(token), json!({})).await, 404, "NotFound");
    assert_error(app.post("/api/commands/nope/cancel", Some(token), json!({})).await, 404, "NotFound");
    let events = app.events_of(&t["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "command.command.cancelled.v1").count(), 2);
}
db_test!(commands_are_listed_tenant_wide_and_cancelled_before_delivery);

async fn a_command_past_its_time_to_live_is_expired_not_cancelled(app: TestApp) {
    let t = app.signup("late@example.com", "late").await;
    let token = t["token"].as_str().unwrap();
    let (asset, _) = robot(&app, token, json!({ "display_name": "R" })).await;
    let c = command(&app, token, json!({ "type": "x", "risk_class": "high", "target_asset_id": asset, "ttl_seconds": 1 })).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let body = assert_error(app.post(&format!("/api/commands/{}/cancel", c["command_id"].as_str().unwrap()), Some(token), json!({})).await, 409, "Conflict");
    let details = body["details"][0].as_str().unwrap();
    assert!(details.starts_with("the command is expired"), "{body}");
    let (_, seen) = app.get(&format!("/api/commands/{}", c["command_id"].as_str().unwrap()), Some(token)).await;
    assert_eq!(seen["data"]["status"], "expired");
    assert!(!app.events_of(&t["tenant_id"]).await.contains(&"command.command.cancelled.v1".to_string()));
}
db_test!(a_command_past_its_time_to_live_is_expired_not_cancelled);

/// Reads SSE events (`id`, `data` JSON) until `n` arrived.
pub async fn sse_events(res: &mut reqwest::Response, n: usize) -> Vec<(i64, Value)> {
    let mut buf = String::new();
    let mut out = Vec::new();
    while out.len() < n {
        let chunk = tokio::time::timeout(Duration::from_secs(5), res.chunk()).await.expect("an SSE event in time").unwrap().expect("stream open");
        buf.push_str(std::str::from_utf8(&chunk).unwrap());
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            let mut id = None;
            let mut data = None;
            for line in event.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = v.trim().parse().ok();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data = serde_json::from_str(v.trim()).ok();
                }
            }
            if let (Some(id), Some(data)) = (id, data) {
                out.push((id, data));
            }
        }
    }
    out
}

async fn the_sse_stream_requires_the_assets_credential_and_resumes_after_last_event_id(mut app: TestApp) {
    let t = app.signup("sse@example.com", "sse").await;
    let token = t["token"].as_str().unwrap();
    let (asset, cred) = robot(&app, token, json!({ "display_name": "R" })).await;
    let (_, other_cred) = robot(&app, token, json!({ "display_name": "R2" })).await;
    let url = format!("{}/api/commands/stream/{asset}", app.base);
    assert_error(app.get(&format!("/api/commands/stream/{asset}"), None).await, 401, "Unauthorized");
    assert_error(app.get(&format!("/api/commands/stream/{asset}"), Some("rc_nope")).await, 401, "Unauthorized");
    assert_error(app.get(&format!("/api/commands/stream/{asset}"), Some(token)).await, 401, "Unauthorized");
    assert_error(app.get(&format!("/api/commands/stream/{asset}"), Some(&other_cred)).await, 404, "NotFound");

    let first = command(&app, token, json!({ "type": "a", "risk_class": "low", "target_asset_id": asset })).await;
    let mut res = app.client.get(&url).bearer_auth(&cred).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    let got = sse_events(&mut res, 1).await;
    assert_eq!(got[0].0, 1);
    assert_eq!(got[0].1["command_id"], first["command_id"]);
    assert_eq!(got[0].1["type"], "a");
    // A command created while connected arrives at once.
    let second = command(&app, token, json!({ "type": "b", "risk_class": "low", "target_asset_id": asset, "params": { "k": "v" } })).await;
    let got = sse_events(&mut res, 1).await;
    assert_eq!((got[0].0, &got[0].1["command_id"], &got[0].1["params"]), (2, &second["command_id"], &json!({ "k": "v" })));
    drop(res);
    // The stream marks what it sent as delivered just after sending it.
    let start = std::time::Instant::now();
    loop {
        let (_, seen) = app.get(&format!("/api/commands/{}", second["command_id"].as_str().unwrap()), Some(token)).await;
        if seen["data"]["status"] == "delivered" {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(2), "{seen}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Resuming after event 1 starts at 2; without Last-Event-ID every
    // unacknowledged command comes again.
    let mut res = app.client.get(&url).bearer_auth(&cred).header("Last-Event-ID", "1").send().await.unwrap();
    assert_eq!(sse_events(&mut res, 1).await[0].0, 2);
    drop(res);
    app.post(&format!("/api/commands/{}/ack", first["command_id"].as_str().unwrap()), Some(&cred), json!({ "ok": true })).await;
    let mut res = app.client.get(&url).bearer_auth(&cred).send().await.unwrap();
    let got = sse_events(&mut res, 1).await;
    assert_eq!(got[0].1["command_id"], second["command_id"], "the acknowledged command is not sent again");
    drop(res);
    let bad = app.client.get(&url).bearer_auth(&cred).header("Last-Event-ID", "x").send().await.unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);

    // An open stream does not hold up a graceful stop.
    let mut res = app.client.get(&url).bearer_auth(&cred).send().await.unwrap();
    assert_eq!(sse_events(&mut res, 1).await.len(), 1);
    let server = app.server.take().unwrap();
    tokio::time::timeout(Duration::from_secs(5), server.stop()).await.expect("stop must not wait for SSE clients").unwrap();
}
db_test!(the_sse_stream_requires_the_assets_credential_and_resumes_after_last_event_id);

/// Reads observer events (`event: command`, the command as JSON data; no
/// `id`) until one satisfies `done`; answers every command read.
pub async fn watch_until(res: &mut reqwest::Response, buf: &mut String, done: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            let mut name = None;
            let mut data = None;
            for line in event.lines() {
                assert!(!line.starts_with("id:"), "observer events carry no id: {event}");
                if let Some(v) = line.strip_prefix("event:") {
                    name = Some(v.trim().to_string());
                } else if let Some(v) = line.strip_prefix("data:") {
                    data = serde_json::from_str::<Value>(v.trim()).ok();
                }
            }
            if let Some(data) = data {
                assert_eq!(name.as_deref(), Some("command"), "{event}");
                let last = done(&data);
                out.push(data);
                if last {
                    return out;
                }
            }
        }
        let chunk = tokio::time::timeout(Duration::from_secs(5), res.chunk()).await.expect("an observer event in time").unwrap().expect("stream open");
        buf.push_str(std::str::from_utf8(&chunk).unwrap());
    }
}

async fn an_observer_watches_the_tenants_commands_without_changing_them(app: TestApp) {
    let t = app.signup("watch@example.com", "watch").await;
    let token = t["token"].as_str().unwrap();
    let other = app.signup("watch-b@example.com", "watchb").await;
    let (asset, cred) = robot(&app, token, json!({ "display_name": "R" })).await;
    let (other_asset, _) = robot(&app, token, json!({ "display_name": "R2" })).await;
    let (b_asset, _) = robot(&app, other["token"].as_str().unwrap(), json!({ "display_name": "B" })).await;

    // The gate and the filter: 401, 403 naming the scope, 404 for another
    // tenant's (or no) asset, 400 for a malformed one.
    assert_error(app.get("/api/commands/watch", None).await, 401, "Unauthorized");
    assert_error(app.get("/api/commands/watch", Some(&cred)).await, 401, "Unauthorized");
    let (_, narrow) = app.key(token, "watch-narrow", json!(["command.command.write"])).await;
    let b = assert_error(app.get("/api/commands/watch", narrow["api_key"].as_str()).await, 403, "Forbidden");
    assert_eq!(b["required_scopes"], json!(["command.watch.read"]), "{b}");
    assert_error(app.get(&format!("/api/commands/watch?asset_id={b_asset}"), Some(token)).await, 404, "NotFound");
    assert_error(app.get("/api/commands/watch?asset_id=0190a000-0000-7000-8000-000000000000", Some(token)).await, 404, "NotFound");
    let b = assert_error(app.get("/api/commands/watch?asset_id=nope", Some(token)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["asset_id must be a UUID"]), "{b}");

    // A command waiting for approval before the observer connects comes first.
    let waiting = command(&app, token, json!({ "type": "unlock", "risk_class": "high", "target_asset_id": asset })).await;
    command(&app, token, json!({ "type": "elsewhere", "risk_class": "high", "target_asset_id": other_asset })).await;
    let url = format!("{}/api/commands/watch?asset_id={asset}", app.base);
    let mut res = app.client.get(&url).bearer_auth(token).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    let mut buf = String::new();
    let got = watch_until(&mut res, &mut buf, |_| true).await;
    let (_, listed) = app.get(&format!("/api/commands/{}", waiting["command_id"].as_str().unwrap()), Some(token)).await;
    assert_eq!(got, vec![listed["data"].clone()], "the snapshot: the command as the API answers it");
    assert_eq!(got[0]["status"], "awaiting_approval");

    // A new command arrives queued, and watching it delivers nothing.
    let moved = command(&app, token, json!({ "type": "move", "risk_class": "low", "target_asset_id": asset })).await;
    let id = moved["command_id"].as_str().unwrap().to_string();
    let got = watch_until(&mut res, &mut buf, |c| c["command_id"] == id.as_str()).await;
    assert_eq!(got.len(), 1, "only the new command: {got:?}");
    assert_eq!((got[0]["status"].as_str(), got[0]["seq"].as_i64(), got[0]["type"].as_str()), (Some("queued"), Some(1), Some("move")));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, seen) = app.get(&format!("/api/commands/{id}"), Some(token)).await;
    assert_eq!(seen["data"]["status"], "queued", "an observer marks nothing delivered");
    assert_eq!(seen["data"]["delivered_at"], Value::Null);

    // The robot's own stream still delivers it; the observer sees each step.
    let mut robot_res = app.client.get(format!("{}/api/commands/stream/{asset}", app.base)).bearer_auth(&cred).send().await.unwrap();
    let delivered = sse_events(&mut robot_res, 1).await;
    assert_eq!((delivered[0].0, delivered[0].1["command_id"].as_str()), (1, Some(id.as_str())));
    let got = watch_until(&mut res, &mut buf, |c| c["status"] == "delivered").await;
    assert_eq!(got.last().unwrap()["command_id"], id.as_str());
    assert!(got.last().unwrap()["delivered_at"].is_string(), "{got:?}");
    let (s, acked) = app.post(&format!("/api/commands/{id}/ack"), Some(&cred), json!({ "ok": true, "code": "done" })).await;
    assert_eq!(s, StatusCode::OK, "{acked}");
    let got = watch_until(&mut res, &mut buf, |c| c["status"] == "acknowledged_ok").await;
    assert_eq!(got, vec![acked["data"].clone()], "the acknowledged command as the ack answered it");

    // A cancellation (and a command of another asset is filtered out).
    command(&app, token, json!({ "type": "other", "risk_class": "low", "target_asset_id": other_asset })).await;
    let (s, cancelled) = app.post(&format!("/api/commands/{}/cancel", waiting["command_id"].as_str().unwrap()), Some(token), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{cancelled}");
    let got = watch_until(&mut res, &mut buf, |c| c["status"] == "cancelled").await;
    assert_eq!(got, vec![cancelled["data"].clone()]);
    drop(robot_res);
    drop(res);

    // Without a filter, every asset of the tenant; a key with the scope may watch.
    let (_, reader) = app.key(token, "watch-reader", json!(["command.watch.read"])).await;
    let reader = reader["api_key"].as_str().unwrap().to_string();
    let mut res = app.client.get(format!("{}/api/commands/watch", app.base)).bearer_auth(&reader).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let mut buf = String::new();
    let got = watch_until(&mut res, &mut buf, |c| c["type"] == "other").await;
    let kinds: Vec<&str> = got.iter().map(|c| c["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["elsewhere", "other"], "the open commands, oldest first");
    // Another tenant's observer hears nothing of these.
    let mut theirs = app.client.get(format!("{}/api/commands/watch", app.base)).bearer_auth(other["token"].as_str().unwrap()).send().await.unwrap();
    command(&app, token, json!({ "type": "late", "risk_class": "low", "target_asset_id": asset })).await;
    watch_until(&mut res, &mut buf, |c| c["type"] == "late").await;
    let quiet = tokio::time::timeout(Duration::from_millis(500), theirs.chunk()).await;
    assert!(quiet.is_err(), "another tenant's observer is sent nothing: {quiet:?}");

    // A credential holds at most HUB_MAX_SSE_PER_CREDENTIAL (4 here) open.
    let mut open = vec![res];
    for _ in 0..3 {
        let more = app.client.get(format!("{}/api/commands/watch", app.base)).bearer_auth(&reader).send().await.unwrap();
        assert_eq!(more.status(), StatusCode::OK);
        open.push(more);
    }
    let refused = app.client.get(format!("{}/api/commands/watch", app.base)).bearer_auth(&reader).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body, json!({ "success": false, "error": "TooManyStreams", "details": ["at most 4 command watch streams may be open at once per credential"] }));
    // The robot's own streams are counted apart.
    let robot_res = app.client.get(format!("{}/api/commands/stream/{asset}", app.base)).bearer_auth(&cred).send().await.unwrap();
    assert_eq!(robot_res.status(), StatusCode::OK);
    drop(open);
    let start = std::time::Instant::now();
    loop {
        let again = app.client.get(format!("{}/api/commands/watch", app.base)).bearer_auth(&reader).send().await.unwrap();
        if again.status() == StatusCode::OK {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(3), "a closed stream gives its slot back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
db_test!(an_observer_watches_the_tenants_commands_without_changing_them);

/// An approval, a rejection and an expiry reach the observer too.
async fn an_observer_sees_decisions_and_expiry(app: TestApp) {
    let t = app.signup("watch-d@example.com", "watchd").await;
    let token = t["token"].as_str().unwrap();
    let (asset, _) = robot(&app, token, json!({ "display_name": "R" })).await;
    let mut res = app.client.get(format!("{}/api/commands/watch", app.base)).bearer_auth(token).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let mut buf = String::new();
    let yes = command(&app, token, json!({ "type": "yes", "risk_class": "critical", "target_asset_id": asset })).await;
    let got = watch_until(&mut res, &mut buf, |c| c["type"] == "yes").await;
    assert_eq!(got.last().unwrap()["status"], "awaiting_approval");
    let (s, approved) = app.post(&format!("/api/commands/{}/decision", yes["command_id"].as_str().unwrap()), Some(token), json!({ "approved": true })).await;
    assert_eq!(s, StatusCode::OK, "{approved}");
    let got = watch_until(&mut res, &mut buf, |c| c["type"] == "yes" && c["status"] == "queued").await;
    assert_eq!(got.last().unwrap()["decision"]["approved"], true);
    let no = command(&app, token, json!({ "type": "no", "risk_class": "high", "target_asset_id": asset })).await;
    app.post(&format!("/api/commands/{}/decision", no["command_id"].as_str().unwrap()), Some(token), json!({ "approved": false, "reason": "not now" })).await;
    let got = watch_until(&mut res, &mut buf, |c| c["type"] == "no" && c["status"] == "rejected").await;
    assert_eq!(
        got.last().unwrap()["decision"],
        json!({ "approved": false, "reason": "not now", "decided_by": got.last().unwrap()["decision"]["decided_by"], "decided_at": got.last().unwrap()["decision"]["decided_at"] })
    );
    command(&app, token, json!({ "type": "brief", "risk_class": "high", "target_asset_id": asset, "ttl_seconds": 1 })).await;
    let got = watch_until(&mut res, &mut buf, |c| c["type"] == "brief" && c["status"] == "expired").await;
    assert_eq!(got.last().unwrap()["status"], "expired", "the sweeper's expiry is a change too");
}
db_test!(an_observer_sees_decisions_and_expiry);

/// On PostgreSQL with two hubs, an observer on one sees the changes made
/// on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_on_one_replica_sees_changes_made_on_another() {
    let Some(a) = TestApp::spawn_postgres().await else { return };
    let b = a.replica().await;
    let t = a.signup("watch-r@example.com", "watchr").await;
    let token = t["token"].as_str().unwrap();
    let (asset, cred) = robot(&a, token, json!({ "display_name": "R" })).await;
    let mut res = a.client.get(format!("{}/api/commands/watch", a.base)).bearer_auth(token).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let mut buf = String::new();
    let c = command(&b, token, json!({ "type": "far", "risk_class": "low", "target_asset_id": asset })).await;
    let id = c["command_id"].as_str().unwrap().to_string();
    // Within the two seconds a wake-up takes at most, well before the safety re-check.
    let started = std::time::Instant::now();
    watch_until(&mut res, &mut buf, |c| c["command_id"] == id.as_str() && c["status"] == "queued").await;
    b.post(&format!("/api/commands/{id}/ack"), Some(&cred), json!({ "ok": false })).await;
    watch_until(&mut res, &mut buf, |c| c["command_id"] == id.as_str() && c["status"] == "acknowledged_failed").await;
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
}
