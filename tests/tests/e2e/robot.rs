//! The robot command path end to end: HTTP in, QUIC to a real edge-agent
//! process, the handler program, acks back; crashes and restarts of either
//! side; refused credentials; readings and twin reports.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{Agent, Hub, runs};

/// Runs a story on SQLite and, when `HUB_TEST_POSTGRES_URL` is set, on PostgreSQL.
macro_rules! e2e {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name(None).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                if let Some(url) = crate::harness::fresh_postgres_url().await {
                    super::$name(Some(url)).await
                }
            }
        }
    };
}

const WAIT: Duration = Duration::from_secs(20);

async fn a_command_created_over_http_runs_the_handler_and_its_ack_is_visible(db: Option<String>) {
    let hub = Hub::start(db).await;
    let token = hub.owner("e2e@example.com").await;
    let (asset, cred) = hub.robot(&token, json!({})).await;
    let dir = tempfile::tempdir().unwrap();
    let _agent = Agent::start(&hub, dir.path(), &asset, &cred);
    let ok = hub.command(&token, &asset, "wave", "low").await;
    let done = hub.wait_status(&token, &ok, "acknowledged_ok", WAIT).await;
    assert_eq!(done["ack"]["ok"], true);
    assert_eq!(done["ack"]["data"], json!({ "handled": "wave" }));
    let failed = hub.command(&token, &asset, "fail", "medium").await;
    let done = hub.wait_status(&token, &failed, "acknowledged_failed", WAIT).await;
    assert_eq!(done["ack"]["code"], "exit_3");
    assert_eq!(done["ack"]["message"], "jammed at joint 2");
    assert_eq!(runs(dir.path()).get(&ok), Some(&1));
}
e2e!(a_command_created_over_http_runs_the_handler_and_its_ack_is_visible);

async fn a_high_risk_command_waits_for_approval(db: Option<String>) {
    let hub = Hub::start(db).await;
    let token = hub.owner("appr@example.com").await;
    let (asset, cred) = hub.robot(&token, json!({})).await;
    let dir = tempfile::tempdir().unwrap();
    let _agent = Agent::start(&hub, dir.path(), &asset, &cred);
    let high = hub.command(&token, &asset, "cut", "high").await;
    let rejected = hub.command(&token, &asset, "burn", "critical").await;
    // A low-risk command created after them overtakes them: it runs, they wait.
    let low = hub.command(&token, &asset, "beep", "low").await;
    hub.wait_status(&token, &low, "acknowledged_ok", WAIT).await;
    let (_, c) = hub.get(&format!("/api/commands/{high}"), &token).await;
    assert_eq!(c["data"]["status"], "awaiting_approval");
    assert!(!runs(dir.path()).contains_key(&high));
    let (s, _) = hub.post(&format!("/api/commands/{rejected}/decision"), &token, json!({ "approved": false })).await;
    assert_eq!(s, 200);
    let (s, d) = hub.post(&format!("/api/commands/{high}/decision"), &token, json!({ "approved": true, "reason": "ok" })).await;
    assert_eq!(s, 200, "{d}");
    hub.wait_status(&token, &high, "acknowledged_ok", WAIT).await;
    let (_, c) = hub.get(&format!("/api/commands/{rejected}"), &token).await;
    assert_eq!(c["data"]["status"], "rejected");
    assert!(!runs(dir.path()).contains_key(&rejected), "a rejected command never reaches the robot");
}
e2e!(a_high_risk_command_waits_for_approval);

async fn commands_created_while_the_agent_is_down_run_exactly_once_after_it_restarts(db: Option<String>) {
    let hub = Hub::start(db).await;
    let token = hub.owner("crash@example.com").await;
    let (asset, cred) = hub.robot(&token, json!({})).await;
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Agent::start(&hub, dir.path(), &asset, &cred);
    let first = hub.command(&token, &asset, "first", "low").await;
    hub.wait_status(&token, &first, "acknowledged_ok", WAIT).await;
    agent.kill();
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(hub.command(&token, &asset, &format!("while-down-{i}"), "low").await);
    }
    let mut agent = Agent::start(&hub, dir.path(), &asset, &cred);
    for id in &ids {
        hub.wait_status(&token, id, "acknowledged_ok", WAIT).await;
    }
    // A second crash and restart runs nothing again.
    agent.kill();
    let _agent = Agent::start(&hub, dir.path(), &asset, &cred);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let counted = runs(dir.path());
    for id in ids.iter().chain([&first]) {
        assert_eq!(counted.get(id), Some(&1), "{id} ran {:?} times", counted.get(id));
    }
    assert_eq!(counted.len(), 4);
}
e2e!(commands_created_while_the_agent_is_down_run_exactly_once_after_it_restarts);

async fn restarting_the_hub_mid_stream_loses_nothing(db: Option<String>) {
    let mut hub = Hub::start(db).await;
    let token = hub.owner("restart@example.com").await;
    let (asset, cred) = hub.robot(&token, json!({})).await;
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(&hub, dir.path(), &asset, &cred);
    // A slow command is running when the hub goes away: its ack cannot be
    // sent on the old connection and must arrive after the reconnect,
    // without the handler running twice.
    let slow = hub.command(&token, &asset, "slow", "low").await;
    let queued_behind = hub.command(&token, &asset, "behind", "low").await;
    let start = Instant::now();
    while !runs(dir.path()).contains_key(&slow) {
        assert!(start.elapsed() < WAIT, "the slow command never started: {}", agent.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    hub.restart().await;
    let after = hub.command(&token, &asset, "after", "low").await;
    for id in [&slow, &queued_behind, &after] {
        hub.wait_status(&token, id, "acknowledged_ok", Duration::from_secs(40)).await;
    }
    let counted = runs(dir.path());
    for id in [&slow, &queued_behind, &after] {
        assert_eq!(counted.get(id), Some(&1), "{id}: {counted:?}\nagent log:\n{}", agent.log());
    }
    assert!(agent.log().contains("reconnecting"), "{}", agent.log());
    // The slow command's ack could not leave on the old connection: the
    // journal sent it again after the reconnect.
    assert!(agent.log().contains("sending an unconfirmed ack again"), "{}", agent.log());
}
e2e!(restarting_the_hub_mid_stream_loses_nothing);

async fn a_wrong_or_expired_credential_is_refused(db: Option<String>) {
    let hub = Hub::start(db).await;
    let token = hub.owner("refuse@example.com").await;
    let expires = chrono::Utc::now() + chrono::Duration::seconds(2);
    let (asset, short) = hub.robot(&token, json!({ "expires_at": expires.to_rfc3339() })).await;
    let cmd = hub.command(&token, &asset, "never", "low").await;
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let wrong_dir = tempfile::tempdir().unwrap();
    let wrong = Agent::start(&hub, wrong_dir.path(), &asset, "rc_not-a-real-credential");
    let expired_dir = tempfile::tempdir().unwrap();
    let expired = Agent::start(&hub, expired_dir.path(), &asset, &short);
    let start = Instant::now();
    while !(wrong.log().contains("refused") && expired.log().contains("refused")) {
        assert!(start.elapsed() < WAIT, "no refusal logged:\n{}\n{}", wrong.log(), expired.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(wrong.log().contains("unauthorized") && expired.log().contains("unauthorized"));
    let (_, c) = hub.get(&format!("/api/commands/{cmd}"), &token).await;
    assert_eq!(c["data"]["status"], "queued");
    assert!(runs(wrong_dir.path()).is_empty() && runs(expired_dir.path()).is_empty());
    // The HTTP side refuses the same way.
    let (s, _) = hub.call(reqwest::Method::POST, &format!("/api/commands/{cmd}/ack"), Some(&short), Some(json!({ "ok": true }))).await;
    assert_eq!(s, 401);
}
e2e!(a_wrong_or_expired_credential_is_refused);

async fn readings_and_state_sent_by_the_agent_come_back_aggregated(db: Option<String>) {
    let hub = Hub::start(db).await;
    let token = hub.owner("read@example.com").await;
    let (asset, cred) = hub.robot(&token, json!({})).await;
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(&hub, dir.path(), &asset, &cred);
    agent.report(&["--reading", "temp=10", "--reading", "temp=30", "--reading", "volt=12.5"]);
    agent.report(&["--state", r#"{"battery": 50, "mode": "idle"}"#]);
    let start = Instant::now();
    loop {
        let (_, r) = hub.get(&format!("/api/assets/{asset}/readings?bucket=hour"), &token).await;
        let (_, t) = hub.get(&format!("/api/assets/{asset}/twin"), &token).await;
        let rows = r["data"].as_array().cloned().unwrap_or_default();
        if rows.len() == 2 && t["data"]["reported"]["battery"] == 50 {
            let temp = rows.iter().find(|b| b["sensor_id"] == "temp").unwrap();
            assert_eq!(
                (temp["count"].as_i64(), temp["min"].as_f64(), temp["max"].as_f64(), temp["avg"].as_f64()),
                (Some(2), Some(10.0), Some(30.0), Some(20.0))
            );
            assert_eq!(t["data"]["reported"], json!({ "battery": 50, "mode": "idle" }));
            break;
        }
        assert!(start.elapsed() < WAIT, "reports did not arrive: {r} {t}\n{}", agent.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Confirmed reports leave the outbox.
    let start = Instant::now();
    while std::fs::read_dir(dir.path().join("state/outbox")).unwrap().filter_map(|e| e.ok()).any(|e| e.file_name().to_string_lossy().ends_with(".json")) {
        assert!(start.elapsed() < WAIT, "the outbox was not emptied");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
e2e!(readings_and_state_sent_by_the_agent_come_back_aggregated);

/// Two hub processes on one PostgreSQL database: a command created through
/// hub A reaches the agent connected to hub B at once (LISTEN/NOTIFY; the
/// streams' safety recheck runs only every 30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_created_through_hub_a_reaches_an_agent_on_hub_b_at_once() {
    let Some(url) = crate::harness::fresh_postgres_url().await else { return };
    let key = "11".repeat(32);
    let a = Hub::start_with(Some(url.clone()), Some(key.clone())).await;
    let b = Hub::start_with(Some(url), Some(key)).await;
    let token = a.owner("ab@example.com").await;
    let (asset, cred) = a.robot(&token, json!({})).await;
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(&b, dir.path(), &asset, &cred);
    let start = Instant::now();
    while !agent.log().contains("connected to the hub") {
        assert!(start.elapsed() < WAIT, "{}", agent.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let id = a.command(&token, &asset, "fan-out", "low").await;
    b.wait_status(&token, &id, "acknowledged_ok", Duration::from_secs(5)).await;
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    assert!(agent.log().contains(&id));
}
