//! The QUIC command stream, driven by the edge agent's client: order,
//! acks on the same connection, reports, resumption after a reconnect,
//! refusals, and delivery across hub replicas on PostgreSQL.

use std::time::{Duration, Instant};

use edge_agent::client::{self, OpenError, Session};
use protocol::command::{Ack, AgentFrame, HubFrame, Reading};
use reqwest::StatusCode;
use serde_json::json;

use crate::{assets::robot, db_test, helpers::*};

async fn connect(app: &TestApp, asset: &str, cred: &str) -> Result<Session, OpenError> {
    let ep = client::endpoint(&app._dir.path().join("quic-cert.pem")).unwrap();
    let addr = app.server.as_ref().unwrap().quic_addr.expect("QUIC enabled");
    client::open(&ep, addr, "localhost", asset, cred).await
}

async fn next(s: &mut Session) -> HubFrame {
    tokio::time::timeout(Duration::from_secs(5), s.receiver.recv()).await.expect("a frame in time").unwrap().expect("stream open")
}

async fn create(app: &TestApp, token: &str, asset: &str, kind: &str) -> String {
    let (s, c) = app.post("/api/commands", Some(token), json!({ "type": kind, "risk_class": "low", "target_asset_id": asset })).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    c["data"]["command_id"].as_str().unwrap().to_string()
}

async fn the_quic_stream_delivers_in_order_takes_acks_and_resumes_after_a_reconnect(app: TestApp) {
    let t = app.signup("quic@example.com", "quic").await;
    let token = t["token"].as_str().unwrap();
    let (asset, cred) = robot(&app, token, json!({ "display_name": "R" })).await;
    let c1 = create(&app, token, &asset, "one").await;
    let c2 = create(&app, token, &asset, "two").await;
    let mut s = connect(&app, &asset, &cred).await.unwrap();
    let HubFrame::Command(f1) = next(&mut s).await else { panic!("expected a command") };
    let HubFrame::Command(f2) = next(&mut s).await else { panic!("expected a command") };
    assert_eq!((f1.command_id.as_str(), f1.seq, f1.kind.as_str()), (c1.as_str(), 1, "one"));
    assert_eq!((f2.command_id.as_str(), f2.seq), (c2.as_str(), 2));

    let ack = Ack { command_id: c1.clone(), ok: true, code: None, message: None, data: Some(json!({ "done": true })) };
    s.sender.send(&AgentFrame::Ack(ack.clone())).await.unwrap();
    assert_eq!(next(&mut s).await, HubFrame::AckResult { command_id: c1.clone(), status: "acknowledged_ok".into(), accepted: true, message: None });
    // The same ack again is accepted and changes nothing.
    s.sender.send(&AgentFrame::Ack(ack)).await.unwrap();
    assert_eq!(next(&mut s).await, HubFrame::AckResult { command_id: c1.clone(), status: "acknowledged_ok".into(), accepted: true, message: None });
    let (_, seen) = app.get(&format!("/api/commands/{c1}"), Some(token)).await;
    assert_eq!(seen["data"]["ack"]["data"], json!({ "done": true }));

    // A command created while connected is pushed at once.
    let c3 = create(&app, token, &asset, "three").await;
    let HubFrame::Command(f3) = next(&mut s).await else { panic!("expected a command") };
    assert_eq!((f3.command_id.as_str(), f3.seq), (c3.as_str(), 3));

    // Reports travel on the same stream.
    s.sender.send(&AgentFrame::ReportState { report_id: "r1".into(), state: json!({ "battery": 71 }) }).await.unwrap();
    assert_eq!(next(&mut s).await, HubFrame::Reported { report_id: "r1".into() });
    let readings = vec![Reading { sensor_id: "temp".into(), value: 21.5, recorded_at: None }];
    s.sender.send(&AgentFrame::Readings { report_id: "r2".into(), readings }).await.unwrap();
    assert_eq!(next(&mut s).await, HubFrame::Reported { report_id: "r2".into() });
    let (_, twin) = app.get(&format!("/api/assets/{asset}/twin"), Some(token)).await;
    assert_eq!(twin["data"]["reported"], json!({ "battery": 71 }));
    let (_, r) = app.get(&format!("/api/assets/{asset}/readings?bucket=day"), Some(token)).await;
    assert_eq!((r["data"][0]["count"].as_i64(), r["data"][0]["avg"].as_f64()), (Some(1), Some(21.5)));

    // After a reconnect every command not yet acknowledged comes again, in order.
    s.connection.close(0u32.into(), b"bye");
    let mut s = connect(&app, &asset, &cred).await.unwrap();
    let HubFrame::Command(a) = next(&mut s).await else { panic!("expected a command") };
    let HubFrame::Command(b) = next(&mut s).await else { panic!("expected a command") };
    assert_eq!((a.command_id, b.command_id), (c2.clone(), c3.clone()));
    let start = Instant::now();
    loop {
        let (_, seen) = app.get(&format!("/api/commands/{c2}"), Some(token)).await;
        if seen["data"]["status"] == "delivered" {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(2), "{seen}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
db_test!(the_quic_stream_delivers_in_order_takes_acks_and_resumes_after_a_reconnect);

async fn the_quic_stream_refuses_wrong_foreign_and_expired_credentials(app: TestApp) {
    let t = app.signup("qr@example.com", "qr").await;
    let token = t["token"].as_str().unwrap();
    let (asset, _) = robot(&app, token, json!({ "display_name": "R" })).await;
    let (_, other) = robot(&app, token, json!({ "display_name": "R2" })).await;
    let code = |r: Result<Session, OpenError>| match r {
        Err(OpenError::Refused { code, .. }) => code,
        Err(e) => panic!("expected a refusal, got {e}"),
        Ok(_) => panic!("expected a refusal, got a session"),
    };
    assert_eq!(code(connect(&app, &asset, "rc_wrong").await), "unauthorized");
    assert_eq!(code(connect(&app, &asset, &other).await), "not_found");
    let expires = hub_kernel::db::format_time(chrono::Utc::now() + chrono::Duration::milliseconds(1500));
    let (_, c) = app.post(&format!("/api/assets/{asset}/credentials"), Some(token), json!({ "expires_at": expires })).await;
    let short = c["data"]["credential"].as_str().unwrap();
    assert!(connect(&app, &asset, short).await.is_ok());
    tokio::time::sleep(Duration::from_millis(1600)).await;
    assert_eq!(code(connect(&app, &asset, short).await), "unauthorized");
    // rate_limit_rpm counts connection attempts.
    let (_, c) = app.post(&format!("/api/assets/{asset}/credentials"), Some(token), json!({ "rate_limit_rpm": 1 })).await;
    let slow = c["data"]["credential"].as_str().unwrap();
    within_one_minute(3).await;
    assert!(connect(&app, &asset, slow).await.is_ok());
    assert_eq!(code(connect(&app, &asset, slow).await), "rate_limited");
}
db_test!(the_quic_stream_refuses_wrong_foreign_and_expired_credentials);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_created_through_one_hub_reaches_an_agent_on_another_at_once() {
    let Some(a) = TestApp::spawn_postgres().await else { return };
    let b = a.replica().await;
    let t = a.signup("fan@example.com", "fan").await;
    let token = t["token"].as_str().unwrap();
    let (asset, cred) = robot(&a, token, json!({ "display_name": "R" })).await;
    let mut s = connect(&b, &asset, &cred).await.unwrap();
    // Give B's stream a moment to subscribe, then create through A.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let id = create(&a, token, &asset, "fan-out").await;
    let HubFrame::Command(c) = next(&mut s).await else { panic!("expected a command") };
    let took = started.elapsed();
    assert_eq!(c.command_id, id);
    // The safety recheck runs every 30 s: arriving well within a second
    // proves the database notification carried it.
    assert!(took < Duration::from_secs(1), "took {took:?}");
    // A high-risk command is announced when it is approved, not before.
    let (status, c) = a.post("/api/commands", Some(token), json!({ "type": "risky", "risk_class": "high", "target_asset_id": asset })).await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let risky = c["data"]["command_id"].as_str().unwrap().to_string();
    assert!(tokio::time::timeout(Duration::from_millis(300), s.receiver.recv()).await.is_err(), "delivered before its approval");
    let started = Instant::now();
    let (status, d) = a.post(&format!("/api/commands/{risky}/decision"), Some(token), json!({ "approved": true })).await;
    assert_eq!(status, StatusCode::OK, "{d}");
    let HubFrame::Command(c) = next(&mut s).await else { panic!("expected a command") };
    assert_eq!(c.command_id, risky);
    assert!(started.elapsed() < Duration::from_secs(1), "took {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_development_mode_the_quic_certificate_comes_from_settings() {
    let certs = tempfile::tempdir().unwrap();
    let rcgen::CertifiedKey { cert, signing_key } = rcgen::generate_simple_self_signed(vec!["robots.example".to_string()]).unwrap();
    let (cert_path, key_path) = (certs.path().join("cert.pem"), certs.path().join("key.pem"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, signing_key.serialize_pem()).unwrap();

    // Without a certificate a production hub refuses to start its QUIC endpoint.
    let data = tempfile::tempdir().unwrap();
    let mut config = hub_kernel::config::Config::for_tests(data.path().to_path_buf(), None);
    config.dev = false;
    let refused = hub::start(hub::prepare(config).await.unwrap()).await;
    let Err(e) = refused else { panic!("a production hub started QUIC without a certificate") };
    assert!(e.to_string().contains("HUB_QUIC_CERT"), "{e}");

    let (c, k) = (cert_path.clone(), key_path.clone());
    let app = TestApp::spawn_with(Backend::Sqlite, None, move |config| {
        config.dev = false;
        config.quic_cert = Some(c);
        config.quic_key = Some(k);
    })
    .await;
    assert!(!app._dir.path().join("quic-cert.pem").exists(), "no development certificate outside development mode");
    let t = app.signup("prod@example.com", "prod").await;
    let (asset, cred) = robot(&app, t["token"].as_str().unwrap(), json!({ "display_name": "R" })).await;
    let ep = client::endpoint(&cert_path).unwrap();
    let addr = app.server.as_ref().unwrap().quic_addr.unwrap();
    assert!(client::open(&ep, addr, "robots.example", &asset, &cred).await.is_ok());
    // The certificate names robots.example, not localhost: TLS refuses the mismatch.
    assert!(matches!(client::open(&ep, addr, "localhost", &asset, &cred).await, Err(OpenError::Transport(_))));
}

async fn robot_credentials_are_listed_and_a_revocation_ends_open_streams_at_once(app: TestApp) {
    let t = app.signup("rev@example.com", "rev").await;
    let token = t["token"].as_str().unwrap();
    let (asset, cred) = robot(&app, token, json!({ "display_name": "R" })).await;
    let (s, spare) = app.post(&format!("/api/assets/{asset}/credentials"), Some(token), json!({ "rate_limit_rpm": 600 })).await;
    assert_eq!(s, StatusCode::CREATED, "{spare}");
    let spare_secret = spare["data"]["credential"].as_str().unwrap();

    // The list shows every credential, newest first, never a secret or hash.
    let (s, list) = app.get(&format!("/api/assets/{asset}/credentials?limit=1"), Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{list}");
    assert_eq!(list["total"], 2);
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
    let (_, list) = app.get(&format!("/api/assets/{asset}/credentials"), Some(token)).await;
    let first = &list["data"][1];
    assert_eq!(list["data"][0]["credential_id"], spare["data"]["credential_id"]);
    assert_eq!(list["data"][0]["rate_limit_rpm"], 600);
    assert_eq!(first["status"], "active");
    assert_eq!(first["revoked_at"], serde_json::Value::Null);
    assert_eq!(first["last4"].as_str().unwrap(), &cred[cred.len() - 4..]);
    assert!(first.get("credential").is_none() && first.get("secret_hash").is_none(), "{first}");
    let credential_id = first["credential_id"].as_str().unwrap().to_string();

    // Open one stream of each kind on the credential, then revoke it.
    let mut quic = connect(&app, &asset, &cred).await.unwrap();
    let mut sse = app.client.get(format!("{}/api/commands/stream/{asset}", app.base)).bearer_auth(&cred).send().await.unwrap();
    assert_eq!(sse.status(), StatusCode::OK);
    let revoke = format!("/api/assets/{asset}/credentials/{credential_id}/revoke");
    let (s, r) = app.post(&revoke, Some(token), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["data"]["status"], "revoked");
    assert!(r["data"]["revoked_at"].is_string(), "{r}");
    let revoked_at = r["data"]["revoked_at"].clone();

    // Both streams end at once, not at the next safety re-check.
    let quic_end = tokio::time::timeout(Duration::from_secs(3), quic.receiver.recv()).await.expect("the QUIC stream ends at once");
    assert!(matches!(&quic_end, Ok(None) | Err(_) | Ok(Some(HubFrame::Refused { .. }))), "expected the stream to end, got {quic_end:?}");
    let sse_end = tokio::time::timeout(Duration::from_secs(3), async {
        loop {
            match sse.chunk().await {
                Ok(Some(_)) => continue,
                other => return other.map(|_| ()),
            }
        }
    })
    .await;
    assert!(sse_end.is_ok(), "the SSE stream ends at once");

    // The credential opens nothing any more; the other one still works.
    assert_error(app.get(&format!("/api/commands/stream/{asset}"), Some(&cred)).await, 401, "Unauthorized");
    assert!(matches!(connect(&app, &asset, &cred).await, Err(OpenError::Refused { .. })));
    assert!(connect(&app, &asset, spare_secret).await.is_ok());

    // Revoking again answers the same and records no second event.
    let (s, again) = app.post(&revoke, Some(token), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{again}");
    assert_eq!(again["data"]["revoked_at"], revoked_at);
    let events: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM audit_entry WHERE event_type = 'asset.credential.revoked.v1'").fetch_one(&app.state().db.read).await.unwrap();
    assert_eq!(events, 1);
    assert_error(
        app.post(&format!("/api/assets/{asset}/credentials/0190a000-0000-7000-8000-000000000000/revoke"), Some(token), json!({})).await,
        404,
        "NotFound",
    );
    assert_error(app.post(&format!("/api/assets/{asset}/credentials/not-a-uuid/revoke"), Some(token), json!({})).await, 404, "NotFound");
}
db_test!(robot_credentials_are_listed_and_a_revocation_ends_open_streams_at_once);
