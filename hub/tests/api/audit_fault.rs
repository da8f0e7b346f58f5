//! Fault test: the real `hub` binary takes appends from several clients,
//! is killed with SIGKILL mid-load and restarted; every append it answered
//! 201 is there and every chain verifies.

use std::{
    path::Path,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::helpers::fresh_postgres_url;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts the hub binary and waits for it to be ready; the caller owns
/// the child (and kills and waits for it), so clippy's path analysis,
/// which cannot see that, is told.
#[allow(clippy::zombie_processes)]
async fn spawn_hub(dir: &Path, port: u16, database_url: Option<&str>, log: &str) -> Child {
    let log_file = std::fs::File::options().append(true).create(true).open(dir.join(log)).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hub"));
    cmd.arg("serve")
        // Not the default UDP port: other tests run hubs at the same time.
        .env("HUB_QUIC_LISTEN", "127.0.0.1:0")
        .env("HUB_LISTEN", format!("127.0.0.1:{port}"))
        .env("HUB_DATA_DIR", dir)
        .env("HUB_DEV", "1")
        .env("HUB_MASTER_KEY", "11".repeat(32))
        .env("ADMIN_OPS_TOKEN", "test-ops-token")
        .env_remove("AUTH_GATE_MODE")
        // Logs go to a file: an unread pipe would fill up and block the hub.
        .stdout(Stdio::from(log_file.try_clone().unwrap()))
        .stderr(Stdio::from(log_file));
    match database_url {
        Some(url) => cmd.env("DATABASE_URL", url),
        None => cmd.env_remove("DATABASE_URL"),
    };
    let mut child = cmd.spawn().unwrap();
    let client = reqwest::Client::new();
    let start = Instant::now();
    loop {
        if client.get(format!("http://127.0.0.1:{port}/ready")).send().await.is_ok_and(|r| r.status() == 200) {
            return child;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("hub did not start: {}", std::fs::read_to_string(dir.join(log)).unwrap_or_default());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// (tenant_id, pool_index, seq, entry_id) of an append answered 201.
type Answered = (String, i64, i64, String);

async fn appends_answered_201_survive_a_sigkill(database_url: Option<String>) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut hub = spawn_hub(dir.path(), port, database_url.as_deref(), "hub.log").await;
    let client = reqwest::Client::new();
    let mut tenants = Vec::new();
    for n in 0..2 {
        let signup: Value = client
            .post(format!("{base}/api/auth/signup-tenant"))
            .json(&json!({ "email": format!("f{n}@example.com"), "password": "fault password", "org_name": "F", "app_id": format!("fault-{n}"), "display_name": "F", "region": "r" }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        tenants.push((signup["data"]["tenant_id"].as_str().unwrap().to_string(), signup["data"]["token"].as_str().unwrap().to_string()));
    }

    let answered: Arc<Mutex<Vec<Answered>>> = Arc::default();
    let mut clients = Vec::new();
    for c in 0..6 {
        let (tenant, token) = tenants[c % 2].clone();
        let (answered, base, client) = (answered.clone(), base.clone(), client.clone());
        clients.push(tokio::spawn(async move {
            let mut i = 0;
            loop {
                i += 1;
                let pool = (c % 3) as i64;
                let res = client
                    .post(format!("{base}/api/audit/append"))
                    .bearer_auth(&token)
                    .json(&json!({ "pool_index": pool, "event_type": "crm.call.logged.v1", "payload": { "client": c, "i": i } }))
                    .send()
                    .await;
                let Ok(res) = res else { return };
                if res.status() != 201 {
                    return;
                }
                let Ok(body) = res.json::<Value>().await else { return };
                let d = &body["data"];
                answered.lock().unwrap().push((tenant.clone(), pool, d["seq"].as_i64().unwrap(), d["entry_id"].as_str().unwrap().to_string()));
            }
        }));
    }
    // Let the load run, then kill the hub without warning.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    hub.kill().unwrap();
    hub.wait().unwrap();
    for c in clients {
        c.await.unwrap();
    }
    let answered = answered.lock().unwrap().clone();
    assert!(answered.len() > 50, "the load was real: {} appends answered", answered.len());

    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut hub = spawn_hub(dir.path(), port, database_url.as_deref(), "hub-restarted.log").await;
    for (tenant, pool, seq, entry_id) in &answered {
        let res = client.get(format!("{base}/admin/audit/entries/{entry_id}")).header("x-admin-ops-token", "test-ops-token").send().await.unwrap();
        assert_eq!(res.status(), 200, "answered entry {entry_id} is missing after the crash");
        let e: Value = res.json().await.unwrap();
        assert_eq!(
            (e["data"]["tenant_id"].as_str().unwrap(), e["data"]["pool_index"].as_i64().unwrap(), e["data"]["seq"].as_i64().unwrap()),
            (tenant.as_str(), *pool, *seq)
        );
    }
    for (tenant, token) in &tenants {
        let v: Value = client
            .post(format!("{base}/admin/audit/verify?tenant_id={tenant}"))
            .header("x-admin-ops-token", "test-ops-token")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(v["data"]["verified"], true, "{v}");
        let mine = answered.iter().filter(|a| &a.0 == tenant).count() as i64;
        assert!(v["data"]["entry_count"].as_i64().unwrap() > mine, "{v}");
        // The chain goes on after the restart.
        let res = client
            .post(format!("{base}/api/audit/append"))
            .bearer_auth(token)
            .json(&json!({ "pool_index": 0, "event_type": "crm.call.logged.v1", "payload": {} }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);
        let v: Value =
            client.post(format!("{base}/api/audit/verify")).bearer_auth(token).json(&json!({ "pool_index": 0 })).send().await.unwrap().json().await.unwrap();
        assert_eq!(v["data"]["ok"], true, "{v}");
    }
    hub.kill().unwrap();
    hub.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_appends_answered_201_survive_a_sigkill_and_every_chain_verifies() {
    appends_answered_201_survive_a_sigkill(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_appends_answered_201_survive_a_sigkill_and_every_chain_verifies() {
    if let Some(url) = fresh_postgres_url().await {
        appends_answered_201_survive_a_sigkill(Some(url)).await;
    }
}
