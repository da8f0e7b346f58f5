//! Process harness: builds the `hub` and `edge-agent` binaries once (they
//! belong to other packages, so `CARGO_BIN_EXE_*` cannot name them), runs
//! them on free loopback ports, and offers an HTTP client.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::OnceLock,
    time::{Duration, Instant},
};

use serde_json::{Value, json};

/// The target directory this test binary was built into.
fn target_profile_dir() -> PathBuf {
    // .../target/debug/deps/e2e-<hash>
    let exe = std::env::current_exe().expect("current exe");
    exe.parent().and_then(Path::parent).expect("target/<profile>").to_path_buf()
}

/// Path of a workspace binary, built (or confirmed up to date) on first use.
pub fn binary(name: &str) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    let dir = target_profile_dir();
    BUILT.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
        let target = dir.parent().expect("target dir");
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--bin", "hub", "--bin", "edge-agent", "--manifest-path"]).arg(&manifest).env("CARGO_TARGET_DIR", target);
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("running cargo build");
        assert!(status.success(), "building the hub and edge-agent binaries failed");
    });
    let path = dir.join(name);
    assert!(path.exists(), "{} missing", path.display());
    path
}

pub fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn log_file(path: &Path) -> (Stdio, Stdio) {
    let f = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
    (Stdio::from(f.try_clone().unwrap()), Stdio::from(f))
}

/// Sends SIGTERM (graceful stop) and waits.
pub fn terminate(child: &mut Child) {
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(15) {
        if child.try_wait().ok().flatten().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A fresh PostgreSQL database when `HUB_TEST_POSTGRES_URL` is set.
pub async fn fresh_postgres_url() -> Option<String> {
    let admin = std::env::var("HUB_TEST_POSTGRES_URL").ok().filter(|s| !s.is_empty())?;
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(&admin).await.expect("connect HUB_TEST_POSTGRES_URL");
    let name = format!("hube2e_{}", uuid::Uuid::now_v7().simple());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await.expect("create database");
    let (base, query) = match admin.split_once('?') {
        Some((b, q)) => (b.to_string(), format!("?{q}")),
        None => (admin.clone(), String::new()),
    };
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let root = match base[scheme_end..].find('/') {
        Some(i) => base[..scheme_end + i].to_string(),
        None => base.clone(),
    };
    Some(format!("{root}/{name}{query}"))
}

/// A hub process with its own data dir and ports, restartable in place.
pub struct Hub {
    pub dir: tempfile::TempDir,
    pub http_port: u16,
    pub quic_port: u16,
    pub database_url: Option<String>,
    /// Replicas on one database must share the master key.
    pub master_key: Option<String>,
    child: Option<Child>,
    pub client: reqwest::Client,
}

impl Hub {
    pub async fn start(database_url: Option<String>) -> Hub {
        Self::start_with(database_url, None).await
    }

    pub async fn start_with(database_url: Option<String>, master_key: Option<String>) -> Hub {
        let mut hub = Hub {
            dir: tempfile::tempdir().unwrap(),
            http_port: free_tcp_port(),
            quic_port: free_udp_port(),
            database_url,
            master_key,
            child: None,
            client: reqwest::Client::new(),
        };
        hub.spawn().await;
        hub
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    pub fn quic(&self) -> String {
        format!("127.0.0.1:{}", self.quic_port)
    }

    pub fn cert(&self) -> PathBuf {
        self.dir.path().join("quic-cert.pem")
    }

    async fn spawn(&mut self) {
        let (out, err) = log_file(&self.dir.path().join("hub.log"));
        let mut cmd = Command::new(binary("hub"));
        cmd.arg("serve")
            .env("HUB_LISTEN", format!("127.0.0.1:{}", self.http_port))
            .env("HUB_QUIC_LISTEN", self.quic())
            .env("HUB_DATA_DIR", self.dir.path())
            .env("HUB_DEV", "1")
            .env("HUB_LOG", "info,sqlx=warn")
            .env_remove("AUTH_GATE_MODE")
            .stdout(out)
            .stderr(err);
        match &self.database_url {
            Some(url) => cmd.env("DATABASE_URL", url),
            None => cmd.env_remove("DATABASE_URL"),
        };
        match &self.master_key {
            Some(k) => cmd.env("HUB_MASTER_KEY", k),
            None => cmd.env_remove("HUB_MASTER_KEY"),
        };
        self.child = Some(cmd.spawn().expect("spawning the hub"));
        let start = Instant::now();
        loop {
            if self.client.get(format!("{}/ready", self.base())).send().await.is_ok_and(|r| r.status() == 200) {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "hub did not start: {}", self.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the hub gracefully and starts it again on the same ports,
    /// data dir and database.
    pub async fn restart(&mut self) {
        if let Some(mut c) = self.child.take() {
            terminate(&mut c);
        }
        self.spawn().await;
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("hub.log")).unwrap_or_default()
    }

    pub async fn call(&self, method: reqwest::Method, path: &str, token: Option<&str>, body: Option<Value>) -> (u16, Value) {
        let mut req = self.client.request(method, format!("{}{}", self.base(), path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.expect("request");
        let status = res.status().as_u16();
        let text = res.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    pub async fn get(&self, path: &str, token: &str) -> (u16, Value) {
        self.call(reqwest::Method::GET, path, Some(token), None).await
    }

    pub async fn post(&self, path: &str, token: &str, body: Value) -> (u16, Value) {
        self.call(reqwest::Method::POST, path, Some(token), Some(body)).await
    }

    /// Signs up a tenant; returns its owner's token.
    pub async fn owner(&self, email: &str) -> String {
        let (s, b) = self
            .call(
                reqwest::Method::POST,
                "/api/auth/signup-tenant",
                None,
                Some(json!({
                    "email": email, "password": "correct horse battery", "org_name": "Org", "app_id": "robots",
                    "display_name": "Owner", "region": "eu-west-1",
                })),
            )
            .await;
        assert_eq!(s, 201, "{b}");
        b["data"]["token"].as_str().unwrap().to_string()
    }

    /// Creates an asset and a credential; returns (asset_id, credential).
    pub async fn robot(&self, token: &str, credential: Value) -> (String, String) {
        let (s, a) = self.post("/api/assets", token, json!({ "display_name": "rover" })).await;
        assert_eq!(s, 201, "{a}");
        let id = a["data"]["asset_id"].as_str().unwrap().to_string();
        let (s, c) = self.post(&format!("/api/assets/{id}/credentials"), token, credential).await;
        assert_eq!(s, 201, "{c}");
        (id, c["data"]["credential"].as_str().unwrap().to_string())
    }

    pub async fn command(&self, token: &str, asset: &str, kind: &str, risk: &str) -> String {
        let (s, c) = self.post("/api/commands", token, json!({ "type": kind, "risk_class": risk, "target_asset_id": asset, "params": { "n": 1 } })).await;
        assert_eq!(s, 201, "{c}");
        c["data"]["command_id"].as_str().unwrap().to_string()
    }

    /// Waits until the command reaches `status`; returns the command.
    pub async fn wait_status(&self, token: &str, command: &str, status: &str, within: Duration) -> Value {
        let start = Instant::now();
        loop {
            let (_, c) = self.get(&format!("/api/commands/{command}"), token).await;
            if c["data"]["status"] == status {
                return c["data"].clone();
            }
            assert!(start.elapsed() < within, "command {command} is {} not {status}; hub log:\n{}", c["data"]["status"], self.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The handler the agents run: a small shell script (the agent runs it
/// directly, without a shell of its own). It records every run in
/// `runs.log`, answers JSON, fails for type `fail` and sleeps for `slow`.
pub fn handler_script(dir: &Path) -> PathBuf {
    let path = dir.join("handler.sh");
    let runs = dir.join("runs.log");
    let script = format!(
        r#"#!/bin/sh
input=$(cat)
id=$(printf '%s' "$input" | sed -n 's/.*"command_id":"\([^"]*\)".*/\1/p')
kind=$(printf '%s' "$input" | sed -n 's/.*"type":"\([^"]*\)".*/\1/p')
echo "$id" >> "{runs}"
case "$kind" in
  fail) echo "jammed at joint 2" >&2; exit 3 ;;
  slow) sleep 2 ;;
esac
printf '{{"handled":"%s"}}' "$kind"
"#,
        runs = runs.display()
    );
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// How many times the handler ran each command.
pub fn runs(dir: &Path) -> std::collections::BTreeMap<String, usize> {
    let mut out = std::collections::BTreeMap::new();
    for line in std::fs::read_to_string(dir.join("runs.log")).unwrap_or_default().lines() {
        *out.entry(line.trim().to_string()).or_insert(0) += 1;
    }
    out
}

/// An edge-agent process.
pub struct Agent {
    pub dir: PathBuf,
    child: Option<Child>,
}

impl Agent {
    /// Starts `edge-agent run` for an asset; state and logs live in `dir`.
    pub fn start(hub: &Hub, dir: &Path, asset: &str, credential: &str) -> Agent {
        std::fs::create_dir_all(dir).unwrap();
        let cred_file = dir.join("credential");
        std::fs::write(&cred_file, credential).unwrap();
        let handler = handler_script(dir);
        let (out, err) = log_file(&dir.join("agent.log"));
        let child = Command::new(binary("edge-agent"))
            .arg("run")
            .env("EDGE_HUB_QUIC", hub.quic())
            .env("EDGE_SERVER_NAME", "localhost")
            .env("EDGE_CA_FILE", hub.cert())
            .env("EDGE_ASSET_ID", asset)
            .env("EDGE_CREDENTIAL_FILE", &cred_file)
            .env("EDGE_STATE_DIR", dir.join("state"))
            .env("EDGE_HANDLER", &handler)
            .env("EDGE_LOG", "info")
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("spawning the edge agent");
        Agent { dir: dir.to_path_buf(), child: Some(child) }
    }

    /// Kills the agent at once (no chance to clean up), like a crash.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("agent.log")).unwrap_or_default()
    }

    /// `edge-agent report` into this agent's outbox.
    pub fn report(&self, args: &[&str]) {
        let out = Command::new(binary("edge-agent")).arg("report").arg("--state-dir").arg(self.dir.join("state")).args(args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.kill();
    }
}
