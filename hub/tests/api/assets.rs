//! sdk-asset over HTTP: assets, twins, readings per bucket, per-robot
//! credentials, tenant isolation and scopes of every asset and command route.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

/// Creates an asset and a per-robot credential; returns (asset_id, credential).
pub async fn robot(app: &TestApp, token: &str, body: Value) -> (String, String) {
    let (s, a) = app.post("/api/assets", Some(token), body).await;
    assert_eq!(s, StatusCode::CREATED, "{a}");
    let id = a["data"]["asset_id"].as_str().unwrap().to_string();
    let (s, c) = app.post(&format!("/api/assets/{id}/credentials"), Some(token), json!({})).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    (id, c["data"]["credential"].as_str().unwrap().to_string())
}

async fn assets_are_created_with_a_twin_the_agent_reports_into(app: TestApp) {
    let t = app.signup("asset@example.com", "asset").await;
    let token = t["token"].as_str().unwrap();
    let (s, a) = app
        .post(
            "/api/assets",
            Some(token),
            json!({
                "display_name": "Rover 1", "model": "R-2", "device_uuid": "0190a000-0000-7000-8000-0000000000d1", "bu_id": "bu-9",
                "components": ["arm", { "component_id": "wheel" }], "tenant_id": t["tenant_id"],
                "desired_state": { "speed": 2 },
            }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{a}");
    let asset = &a["data"];
    assert_eq!(asset["display_name"], "Rover 1");
    assert_eq!(asset["model"], "R-2");
    assert_eq!(asset["device_uuid"], "0190a000-0000-7000-8000-0000000000d1");
    assert_eq!(asset["bu_id"], "bu-9");
    assert_eq!(asset["tenant_id"], t["tenant_id"]);
    assert_eq!(asset["components"], json!(["arm", { "component_id": "wheel" }]));
    let id = asset["asset_id"].as_str().unwrap();

    let (s, twin) = app.get(&format!("/api/assets/{id}/twin"), Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{twin}");
    assert_eq!(twin["data"]["desired"], json!({ "speed": 2 }));
    assert_eq!(twin["data"]["reported"], json!({}));
    assert_eq!(twin["data"]["reported_at"], Value::Null);

    // The agent's reports replace each other: the hub keeps the latest.
    hub_platform::asset::record_state(app.state(), id, &json!({ "speed": 1, "battery": 80 })).await.unwrap();
    hub_platform::asset::record_state(app.state(), id, &json!({ "speed": 2 })).await.unwrap();
    let (_, twin) = app.get(&format!("/api/assets/{id}/twin"), Some(token)).await;
    assert_eq!(twin["data"]["reported"], json!({ "speed": 2 }));
    assert!(twin["data"]["reported_at"].is_string());

    let (s, d) = app.call(Method::PUT, &format!("/api/assets/{id}/twin"), Some(token), Some(json!({ "desired": { "speed": 3 } }))).await;
    assert_eq!(s, StatusCode::OK, "{d}");
    assert_eq!(d["data"]["desired"], json!({ "speed": 3 }));
    assert_eq!(d["data"]["reported"], json!({ "speed": 2 }));

    let body = assert_error(app.post("/api/assets", Some(token), json!({ "components": "arm" })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["display_name is required", "components must be an array"]));
    let body = assert_error(
        app.post(
            "/api/assets",
            Some(token),
            json!({ "display_name": "x", "device_uuid": "nope", "desired_state": [1], "components": [{ "component_id": 1 }] }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["device_uuid must be a UUID", "desired_state must be a JSON object"]));
    let body =
        assert_error(app.post("/api/assets", Some(token), json!({ "display_name": "x", "components": [{ "component_id": 1 }] })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["components must be an array of component ids or of objects with a string component_id"]));
    let body = assert_error(app.call(Method::PUT, &format!("/api/assets/{id}/twin"), Some(token), Some(json!({ "desired": 3 }))).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["desired must be a JSON object"]));
    let body = assert_error(app.call(Method::PUT, &format!("/api/assets/{id}/twin"), Some(token), Some(json!({}))).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["desired is required"]));
    assert_error(
        app.post("/api/assets", Some(token), json!({ "display_name": "x", "tenant_id": "0190a000-0000-7000-8000-000000000000" })).await,
        403,
        "TenantMismatch",
    );
}
db_test!(assets_are_created_with_a_twin_the_agent_reports_into);

async fn readings_come_back_aggregated_per_bucket(app: TestApp) {
    use hub_platform::asset::record_readings;
    use protocol::command::Reading;
    let t = app.signup("read@example.com", "read").await;
    let token = t["token"].as_str().unwrap();
    let (id, _) = robot(&app, token, json!({ "display_name": "R" })).await;
    let r = |s: &str, v: f64, at: &str| Reading { sensor_id: s.into(), value: v, recorded_at: Some(at.into()) };
    record_readings(
        app.state(),
        &id,
        &[
            r("temp", 10.0, "2026-01-01T10:00:01.500Z"),
            r("temp", 20.0, "2026-01-01T10:00:01.900Z"),
            r("temp", 30.0, "2026-01-01T10:00:59Z"),
            r("temp", 40.0, "2026-01-01T10:01:00Z"),
            r("temp", 50.0, "2026-01-01T11:30:00Z"),
            r("volt", -1.5, "2026-01-01T10:00:01Z"),
        ],
    )
    .await
    .unwrap();
    let agg = |v: &Value| -> Vec<(String, String, i64, f64, f64, f64)> {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                (
                    b["sensor_id"].as_str().unwrap().to_string(),
                    b["bucket_start"].as_str().unwrap().to_string(),
                    b["count"].as_i64().unwrap(),
                    b["min"].as_f64().unwrap(),
                    b["max"].as_f64().unwrap(),
                    b["avg"].as_f64().unwrap(),
                )
            })
            .collect()
    };
    let path = |b: &str| format!("/api/assets/{id}/readings?bucket={b}");
    let (s, minute) = app.get(&path("minute"), Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{minute}");
    assert_eq!(
        agg(&minute),
        vec![
            ("temp".into(), "2026-01-01T10:00:00Z".into(), 3, 10.0, 30.0, 20.0),
            ("temp".into(), "2026-01-01T10:01:00Z".into(), 1, 40.0, 40.0, 40.0),
            ("temp".into(), "2026-01-01T11:30:00Z".into(), 1, 50.0, 50.0, 50.0),
            ("volt".into(), "2026-01-01T10:00:00Z".into(), 1, -1.5, -1.5, -1.5),
        ]
    );
    assert_eq!(minute["data"][0]["bucket"], "minute");
    let (_, second) = app.get(&path("second"), Some(token)).await;
    assert_eq!(agg(&second)[0], ("temp".into(), "2026-01-01T10:00:01Z".into(), 2, 10.0, 20.0, 15.0));
    let (_, hour) = app.get(&path("hour"), Some(token)).await;
    assert_eq!(
        agg(&hour)[..2],
        [("temp".into(), "2026-01-01T10:00:00Z".into(), 4, 10.0, 40.0, 25.0), ("temp".into(), "2026-01-01T11:00:00Z".into(), 1, 50.0, 50.0, 50.0),]
    );
    let (_, day) = app.get(&path("day"), Some(token)).await;
    assert_eq!(
        agg(&day),
        vec![("temp".into(), "2026-01-01T00:00:00Z".into(), 5, 10.0, 50.0, 30.0), ("volt".into(), "2026-01-01T00:00:00Z".into(), 1, -1.5, -1.5, -1.5),]
    );
    let (_, only) = app.get(&format!("/api/assets/{id}/readings?bucket=day&sensor_id=volt"), Some(token)).await;
    assert_eq!(only["data"].as_array().unwrap().len(), 1);
    let body = assert_error(app.get(&path("week"), Some(token)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["bucket must be one of: second, minute, hour, day"]));
    let body = assert_error(app.get(&format!("/api/assets/{id}/readings"), Some(token)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["bucket is required"]));
    // Readings the agent cannot have meant are refused as a whole.
    let bad = record_readings(app.state(), &id, &[Reading { sensor_id: " ".into(), value: f64::NAN, recorded_at: Some("yesterday".into()) }]).await;
    assert!(matches!(bad, Err(hub_kernel::error::ApiError::Validation(ref d)) if d.len() == 3), "{bad:?}");
}
db_test!(readings_come_back_aggregated_per_bucket);

async fn robot_credentials_are_shown_once_and_stored_hashed(app: TestApp) {
    let t = app.signup("cred@example.com", "cred").await;
    let token = t["token"].as_str().unwrap();
    let (id, _) = robot(&app, token, json!({ "display_name": "R" })).await;
    let (s, c) = app.post(&format!("/api/assets/{id}/credentials"), Some(token), json!({ "rate_limit_rpm": 30, "expires_at": "2999-01-01T00:00:00Z" })).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let secret = c["data"]["credential"].as_str().unwrap();
    assert!(secret.starts_with("rc_") && secret.len() >= 3 + 43, "{secret}");
    assert_eq!(c["data"]["asset_id"], id);
    assert_eq!(c["data"]["rate_limit_rpm"], 30);
    assert_eq!(c["data"]["expires_at"], "2999-01-01T00:00:00.000000Z");
    let stored: Vec<String> = sqlx::query_scalar("SELECT secret_hash FROM asset_credential").fetch_all(&app.state().db.read).await.unwrap();
    assert_eq!(stored.len(), 2);
    assert!(stored.iter().all(|h| h.len() == 64 && h != secret));
    let body = assert_error(
        app.post(&format!("/api/assets/{id}/credentials"), Some(token), json!({ "rate_limit_rpm": 0, "expires_at": "2001-01-01T00:00:00Z" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["rate_limit_rpm must be an integer of at least 1"]));
    let body = assert_error(
        app.post(&format!("/api/assets/{id}/credentials"), Some(token), json!({ "rate_limit_rpm": 1, "expires_at": "2001-01-01T00:00:00Z" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["expires_at must be in the future"]));
    let body = assert_error(app.post(&format!("/api/assets/{id}/credentials"), Some(token), json!({ "expires_at": "soon" })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["expires_at must be an RFC 3339 timestamp"]));
}
db_test!(robot_credentials_are_shown_once_and_stored_hashed);

async fn assets_are_listed_changed_and_retired(app: TestApp) {
    let t = app.signup("fleet@example.com", "fleet").await;
    let token = t["token"].as_str().unwrap();
    let device = "0190a000-0000-7000-8000-0000000000d2";
    let (first, _) = robot(&app, token, json!({ "display_name": "One", "model": "R-2", "bu_id": "bu-1", "device_uuid": device })).await;
    let (second, cred) = robot(&app, token, json!({ "display_name": "Two", "model": "R-3", "bu_id": "bu-2" })).await;
    let (third, _) = robot(&app, token, json!({ "display_name": "Three" })).await;
    let ids = |v: &Value| v["data"].as_array().unwrap().iter().map(|a| a["asset_id"].as_str().unwrap().to_string()).collect::<Vec<_>>();

    let (s, all) = app.get("/api/assets", Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{all}");
    assert_eq!((ids(&all), all["total"].as_i64()), (vec![third.clone(), second.clone(), first.clone()], Some(3)), "newest first");
    assert_eq!(all["data"][2]["status"], "active");
    assert_eq!(all["data"][2]["retired_at"], Value::Null);
    for (query, expected) in [
        ("model=R-2", vec![first.clone()]),
        (&format!("device_uuid={}", device.to_uppercase()) as &str, vec![first.clone()]),
        ("bu_id=bu-2", vec![second.clone()]),
        ("status=active&model=R-3", vec![second.clone()]),
        ("status=retired", vec![]),
    ] {
        let (s, page) = app.get(&format!("/api/assets?{query}"), Some(token)).await;
        assert_eq!(s, StatusCode::OK, "{page}");
        assert_eq!(page["total"].as_i64(), Some(expected.len() as i64), "{query}");
        assert_eq!(ids(&page), expected, "{query}");
    }
    let (_, paged) = app.get("/api/assets?limit=1&offset=1", Some(token)).await;
    assert_eq!((ids(&paged), paged["total"].as_i64()), (vec![second.clone()], Some(3)));
    let body = assert_error(app.get("/api/assets?status=gone&device_uuid=nope", Some(token)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["device_uuid must be a UUID", "status must be one of: active, retired"]));

    // A change keeps what it does not name.
    let path = format!("/api/assets/{second}");
    let (s, changed) = app.call(Method::PATCH, &path, Some(token), Some(json!({ "display_name": " Two b ", "components": ["arm"] }))).await;
    assert_eq!(s, StatusCode::OK, "{changed}");
    assert_eq!(changed["data"]["display_name"], "Two b");
    assert_eq!(changed["data"]["components"], json!(["arm"]));
    assert_eq!(changed["data"]["model"], "R-3");
    assert_eq!(changed["data"]["bu_id"], "bu-2");
    let (s, changed) = app.call(Method::PATCH, &path, Some(token), Some(json!({ "model": "R-4", "device_uuid": device }))).await;
    assert_eq!(s, StatusCode::OK, "{changed}");
    assert_eq!((changed["data"]["model"].as_str(), changed["data"]["device_uuid"].as_str()), (Some("R-4"), Some(device)));
    let (_, read) = app.get(&path, Some(token)).await;
    assert_eq!(read["data"], changed["data"]);
    let body = assert_error(app.call(Method::PATCH, &path, Some(token), Some(json!({}))).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["give at least one of display_name, model, bu_id, device_uuid, components"]));
    let body = assert_error(
        app.call(Method::PATCH, &path, Some(token), Some(json!({ "display_name": " ", "components": [{ "component_id": 1 }] }))).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        body["details"],
        json!(["display_name must not be blank", "components must be an array of component ids or of objects with a string component_id"])
    );
    let body = assert_error(app.call(Method::PATCH, &path, Some(token), Some(json!({ "device_uuid": "nope", "model": 3 }))).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["model must be a string", "device_uuid must be a UUID"]));

    // Retiring revokes its credentials and cancels what waits, in one go.
    let (s, queued) = app.post("/api/commands", Some(token), json!({ "type": "move", "risk_class": "low", "target_asset_id": second })).await;
    assert_eq!(s, StatusCode::CREATED, "{queued}");
    let (s, waiting) = app.post("/api/commands", Some(token), json!({ "type": "unlock", "risk_class": "high", "target_asset_id": second })).await;
    assert_eq!(s, StatusCode::CREATED, "{waiting}");
    let (s, retired) = app.post(&format!("{path}/retire"), Some(token), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{retired}");
    assert_eq!(retired["data"]["status"], "retired");
    assert!(retired["data"]["retired_at"].is_string());
    assert_eq!(retired["data"]["display_name"], "Two b");
    let (_, creds) = app.get(&format!("{path}/credentials"), Some(token)).await;
    assert_eq!(creds["data"][0]["status"], "revoked");
    assert!(creds["data"][0]["revoked_at"].is_string());
    assert_error(
        app.post(&format!("/api/commands/{}/ack", queued["data"]["command_id"].as_str().unwrap()), Some(&cred), json!({ "ok": true })).await,
        401,
        "Unauthorized",
    );
    let (_, commands) = app.get(&format!("{path}/commands"), Some(token)).await;
    let states: Vec<&str> = commands["data"].as_array().unwrap().iter().map(|c| c["status"].as_str().unwrap()).collect();
    assert_eq!(states, vec!["cancelled", "cancelled"]);
    let (s, again) = app.post(&format!("{path}/retire"), Some(token), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(again["data"], retired["data"], "retiring again answers the same");
    let body = assert_error(app.post(&format!("{path}/credentials"), Some(token), json!({})).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the asset is retired: it takes no new credential"]));
    let body = assert_error(app.call(Method::PATCH, &path, Some(token), Some(json!({ "model": "R-5" }))).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the asset is retired: only an active asset can be changed"]));
    let body =
        assert_error(app.post("/api/commands", Some(token), json!({ "type": "x", "risk_class": "low", "target_asset_id": second })).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the asset is retired: it takes no new command"]));
    let body = assert_error(
        app.post("/api/commands", Some(token), json!({ "type": "x", "risk_class": "critical", "target_asset_id": second })).await,
        409,
        "Conflict",
    );
    assert_eq!(body["details"], json!(["the asset is retired: it takes no new command"]));
    // A decision on a command the retirement cancelled finds it cancelled.
    let body = assert_error(
        app.post(&format!("/api/commands/{}/decision", waiting["data"]["command_id"].as_str().unwrap()), Some(token), json!({ "approved": true })).await,
        409,
        "Conflict",
    );
    assert_eq!(body["details"], json!(["the command is cancelled: only a command awaiting approval can be decided"]));
    let (_, page) = app.get("/api/assets?status=retired", Some(token)).await;
    assert_eq!((ids(&page), page["total"].as_i64()), (vec![second.clone()], Some(1)));

    assert_error(app.post(&format!("/api/assets/{ID}/retire"), Some(token), json!({})).await, 404, "NotFound");
    assert_error(app.call(Method::PATCH, &format!("/api/assets/{ID}"), Some(token), Some(json!({ "model": "x" }))).await, 404, "NotFound");
    let events = app.events_of(&t["tenant_id"]).await;
    let count = |e: &str| events.iter().filter(|x| *x == e).count();
    assert_eq!(count("asset.asset.retired.v1"), 1);
    assert_eq!(count("command.command.cancelled.v1"), 2);
    assert_eq!(count("asset.credential.revoked.v1"), 1);
    // Two twin-less changes, no change of a refused one.
    assert_eq!(count("asset.asset.updated.v1"), 2);
}
db_test!(assets_are_listed_changed_and_retired);

const ID: &str = "0190a000-0000-7000-8000-000000000000";

/// Every tenant route of sdk-asset and sdk-command, with its derived scope.
fn tenant_routes(asset: &str, command: &str) -> Vec<(Method, String, &'static str)> {
    vec![
        (Method::POST, "/api/assets".into(), "asset.asset.write"),
        (Method::GET, "/api/assets".into(), "asset.asset.read"),
        (Method::GET, format!("/api/assets/{asset}"), "asset.asset.read"),
        (Method::PATCH, format!("/api/assets/{asset}"), "asset.asset.write"),
        (Method::POST, format!("/api/assets/{asset}/retire"), "asset.asset.write"),
        (Method::GET, format!("/api/assets/{asset}/twin"), "asset.asset.read"),
        (Method::PUT, format!("/api/assets/{asset}/twin"), "asset.asset.write"),
        (Method::GET, format!("/api/assets/{asset}/readings?bucket=hour"), "asset.asset.read"),
        (Method::POST, format!("/api/assets/{asset}/credentials"), "asset.asset.write"),
        (Method::GET, format!("/api/assets/{asset}/credentials"), "asset.asset.read"),
        (Method::POST, format!("/api/assets/{asset}/credentials/{command}/revoke"), "asset.asset.write"),
        (Method::GET, format!("/api/assets/{asset}/commands"), "asset.asset.read"),
        (Method::POST, "/api/commands".into(), "command.command.write"),
        (Method::GET, format!("/api/commands/{command}"), "command.command.read"),
        (Method::POST, format!("/api/commands/{command}/decision"), "command.command.write"),
        (Method::GET, "/api/commands".into(), "command.command.read"),
        (Method::POST, format!("/api/commands/{command}/cancel"), "command.command.write"),
    ]
}

async fn a_key_lacking_the_scope_is_refused_on_every_asset_and_command_route(app: TestApp) {
    let t = app.signup("rs@example.com", "rs").await;
    let (_, key) = app.key(t["token"].as_str().unwrap(), "rs", json!(["crm.*"])).await;
    let secret = key["api_key"].as_str().unwrap();
    for (method, path, scope) in tenant_routes(ID, ID) {
        let body = if method == Method::GET { None } else { Some(json!({})) };
        let b = assert_error(app.call(method.clone(), &path, Some(secret), body).await, 403, "Forbidden");
        assert_eq!(b["required_scopes"], json!([scope]), "{method} {path}");
        assert_eq!(b["granted_scopes"], json!(["crm.*"]), "{method} {path}");
    }
}
db_test!(a_key_lacking_the_scope_is_refused_on_every_asset_and_command_route);

async fn another_tenants_assets_and_commands_are_not_found(app: TestApp) {
    let a = app.signup("a@example.com", "ta").await;
    let b = app.signup("b@example.com", "tb").await;
    let owner_a = a["token"].as_str().unwrap();
    let (asset, _) = robot(&app, owner_a, json!({ "display_name": "A's" })).await;
    let (s, c) = app.post("/api/commands", Some(owner_a), json!({ "type": "x", "risk_class": "high", "target_asset_id": asset })).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let command = c["data"]["command_id"].as_str().unwrap();
    // B's owner token and B's key with every scope both see nothing of A.
    let (_, key_b) = app.key(b["token"].as_str().unwrap(), "tb", json!(["*"])).await;
    for token in [b["token"].as_str().unwrap(), key_b["api_key"].as_str().unwrap()] {
        for (method, path, _) in tenant_routes(&asset, command).into_iter().filter(|(_, p, _)| p != "/api/assets" && p != "/api/commands") {
            let body = match (method.as_str(), path.ends_with("/decision"), path.ends_with("/twin")) {
                ("GET", _, _) => None,
                (_, true, _) => Some(json!({ "approved": true })),
                (_, _, true) => Some(json!({ "desired": {} })),
                _ => Some(json!({})),
            };
            assert_error(app.call(method.clone(), &path, Some(token), body).await, 404, "NotFound");
        }
        // A body reference to another tenant's asset is a bad field, not a leak.
        let body = assert_error(
            app.post("/api/commands", Some(token), json!({ "type": "x", "risk_class": "low", "target_asset_id": asset })).await,
            400,
            "ValidationError",
        );
        assert_eq!(body["details"], json!(["target_asset_id does not name an asset of this tenant"]));
    }
    // Identifiers that cannot exist are not found either.
    assert_error(app.get("/api/assets/not-a-uuid/twin", Some(owner_a)).await, 404, "NotFound");
    assert_error(app.get("/api/commands/not-a-uuid", Some(owner_a)).await, 404, "NotFound");
    // A's command is untouched.
    let (_, still) = app.get(&format!("/api/commands/{command}"), Some(owner_a)).await;
    assert_eq!(still["data"]["status"], "awaiting_approval");
}
db_test!(another_tenants_assets_and_commands_are_not_found);
