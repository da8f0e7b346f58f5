//! Shared code of the end-to-end tests and the benchmarks (see `src/bin`).

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::Context;

/// A `hub` binary serving as its own process for a benchmark, in a data
/// directory of its own, killed when dropped.
pub struct HubProcess {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    _dir: tempfile::TempDir,
}

impl HubProcess {
    /// Starts `hub serve` in development mode on a free loopback port, with
    /// `quic_listen` (an address or `off`) and the database (a fresh SQLite
    /// file when `None`), logging to `hub.log` in its data directory, and
    /// waits until its health route answers.
    pub async fn start(hub_bin: &Path, quic_listen: &str, database_url: Option<&str>) -> anyhow::Result<HubProcess> {
        HubProcess::start_with_env(hub_bin, quic_listen, database_url, &[]).await
    }

    /// [`HubProcess::start`] with more settings in the hub's environment.
    pub async fn start_with_env(hub_bin: &Path, quic_listen: &str, database_url: Option<&str>, env: &[(&str, String)]) -> anyhow::Result<HubProcess> {
        let dir = tempfile::tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let log = std::fs::File::create(dir.path().join("hub.log"))?;
        let mut cmd = Command::new(hub_bin);
        cmd.arg("serve")
            .env("HUB_LISTEN", format!("127.0.0.1:{port}"))
            .env("HUB_QUIC_LISTEN", quic_listen)
            .env("HUB_DATA_DIR", dir.path())
            .env("HUB_DEV", "1")
            .env("HUB_LOG", "warn")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log));
        match database_url {
            Some(u) => cmd.env("DATABASE_URL", u),
            None => cmd.env_remove("DATABASE_URL"),
        };
        let child = cmd.spawn().with_context(|| format!("starting {}", hub_bin.display()))?;
        let hub = HubProcess { child, base: format!("http://127.0.0.1:{port}"), _dir: dir };
        let http = reqwest::Client::new();
        let start = Instant::now();
        // Ready: /health answers already while the migrations run.
        while !http.get(format!("{}/ready", hub.base)).send().await.is_ok_and(|r| r.status() == 200) {
            anyhow::ensure!(start.elapsed() < Duration::from_secs(30), "the hub did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(hub)
    }

    /// The hub's data directory (its development QUIC certificate is there).
    pub fn data_dir(&self) -> &Path {
        self._dir.path()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The hub's resident memory, in KiB.
    pub fn rss_kib(&self) -> anyhow::Result<u64> {
        rss_kib_of(self.child.id())
    }
}

/// A process's resident memory, in KiB (for a sampler that runs apart from
/// the [`HubProcess`]).
pub fn rss_kib_of(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).context("no VmRSS")?;
    Ok(line.split_whitespace().nth(1).context("VmRSS value")?.parse()?)
}

/// A duration in milliseconds, for reports.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl Drop for HubProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The hub a tool starts, as every tool's flags name it: its binary and
/// its database.
#[derive(clap::Args)]
pub struct HubTarget {
    /// Database of the hub (default: a fresh SQLite file).
    #[arg(long)]
    pub database_url: Option<String>,
    /// The hub binary (default: `hub` beside this program).
    #[arg(long)]
    pub hub: Option<PathBuf>,
}

impl HubTarget {
    pub fn binary(&self) -> anyhow::Result<PathBuf> {
        hub_binary(self.hub.clone())
    }

    pub fn database(&self) -> Option<&str> {
        self.database_url.as_deref()
    }

    /// The backend's name, for a report.
    pub fn backend(&self) -> &'static str {
        if self.database_url.is_some() { "PostgreSQL" } else { "SQLite" }
    }
}

/// The `hub` binary to benchmark: the one given, else the one beside this
/// program (so a release benchmark measures a release hub).
pub fn hub_binary(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match given {
        Some(p) => Ok(p),
        None => Ok(std::env::current_exe()?.parent().context("exe dir")?.join("hub")),
    }
}

/// The CPU time a process has used so far (user and system), in clock
/// ticks of 10 ms (the kernel's `USER_HZ`, 100 on every Linux ABI), from
/// `/proc/<pid>/stat`.
pub fn process_ticks(pid: u32) -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').context("a /proc stat line")? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    Ok(fields.get(11).context("utime")?.parse::<u64>()? + fields.get(12).context("stime")?.parse::<u64>()?)
}

/// Milliseconds per clock tick of `process_ticks`.
pub const MS_PER_TICK: f64 = 10.0;

/// The machine's CPU time so far in clock ticks (`/proc/stat`): all of
/// it, and the part stolen by the hypervisor for other guests. A benchmark
/// reports the stolen share of its run: the time its processes were ready
/// to run and could not, which makes throughput figures noisy.
#[derive(Clone, Copy)]
pub struct MachineTicks {
    total: u64,
    stolen: u64,
}

impl MachineTicks {
    pub fn now() -> anyhow::Result<MachineTicks> {
        let stat = std::fs::read_to_string("/proc/stat")?;
        let line = stat.lines().next().context("/proc/stat")?;
        let n: Vec<u64> = line.split_whitespace().skip(1).map(str::parse).collect::<Result<_, _>>()?;
        // user nice system idle iowait irq softirq steal (guest time is inside user).
        Ok(MachineTicks { total: n.iter().take(8).sum(), stolen: n.get(7).copied().unwrap_or(0) })
    }

    /// The share of the machine's CPU time stolen since `earlier`, in %.
    pub fn stolen_percent_since(&self, earlier: &MachineTicks) -> f64 {
        100.0 * (self.stolen - earlier.stolen) as f64 / (self.total - earlier.total).max(1) as f64
    }
}

/// The median (NaN of nothing).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The `p` quantile of sorted durations (zero when there are none).
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Creates a fresh database `<prefix>_<uuid>` on the PostgreSQL server
/// `server` (a `postgres://` URL of any of its databases): its URL and
/// name. Drop it with `drop_postgres`.
pub async fn fresh_postgres(server: &str, prefix: &str) -> anyhow::Result<(String, String)> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(server).await.context("connecting to the PostgreSQL server")?;
    let name = format!("{prefix}_{}", uuid::Uuid::now_v7().simple());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await?;
    let mut url = reqwest::Url::parse(server)?;
    url.set_path(&name);
    Ok((url.to_string(), name))
}

/// Drops a database `fresh_postgres` made.
pub async fn drop_postgres(server: &str, name: &str) -> anyhow::Result<()> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(server).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))).execute(&mut conn).await?;
    Ok(())
}

/// A request of the gateway benchmarks (`bench` over HTTP, `observe-bench`
/// into the router).
#[derive(Clone)]
pub struct Scenario {
    pub name: &'static str,
    pub method: &'static str,
    pub path: &'static str,
    pub bearer: Option<String>,
    pub body: Option<String>,
}

/// The gateway benchmarks' tenant on a fresh hub, made with `post(path,
/// bearer, body)` (one request, the body of its 2xx answer): the owner's
/// ES256 JWT, an API key with every scope, a rate-limited one (limited far
/// above what a run sends, so every request is counted), and a flag with a
/// rollout whose predicate fails and a 50% rollout behind it, so an
/// evaluation walks constraints and a bucket. Answers the gateway
/// scenarios (`/health`, `GET /api/me` with the API key, the rate-limited
/// key and the JWT, a flag evaluation), and the API key.
pub async fn gateway_tenant(
    post: impl AsyncFn(&str, Option<&str>, serde_json::Value) -> anyhow::Result<serde_json::Value>,
) -> anyhow::Result<(Vec<Scenario>, String)> {
    use serde_json::json;
    let signup = json!({ "email": "bench@example.com", "password": "bench password", "org_name": "Bench", "app_id": "bench", "display_name": "Bench", "region": "eu-west-1" });
    let signup = post("/api/auth/signup-tenant", None, signup).await?;
    let jwt = signup["data"]["token"].as_str().context("signup token")?.to_string();
    let auth = Some(jwt.as_str());
    let app = post("/api/applications", auth, json!({ "name": "bench", "slug": "bench", "environment": "live" })).await?;
    let keys = format!("/api/applications/{}/keys", app["data"]["application_id"].as_str().context("application")?);
    let key = post(&keys, auth, json!({ "name": "bench", "scopes": ["*"] })).await?;
    let api_key = key["data"]["api_key"].as_str().context("api key")?.to_string();
    let limited = post(&keys, auth, json!({ "name": "limited", "scopes": ["*"], "rate_limit_rpm": 1_000_000_000 })).await?;
    let limited = limited["data"]["api_key"].as_str().context("limited key")?.to_string();
    post("/api/feature-flags", auth, json!({ "flag_key": "bench-flag", "default_value": "control" })).await?;
    for rollout in [
        json!({ "priority": 1, "predicate": [{ "context_name": "attributes.plan", "operator": "in", "values": ["enterprise"] }], "value": "enterprise" }),
        json!({ "priority": 2, "percentage": 50, "predicate": [{ "context_name": "bu_id", "operator": "in", "values": ["bu-1", "bu-2"] }], "value": "treatment" }),
    ] {
        post("/api/feature-flags/bench-flag/rollouts", auth, rollout).await?;
    }
    let me = |name, bearer: &String| Scenario { name, method: "GET", path: "/api/me", bearer: Some(bearer.clone()), body: None };
    let scenarios = vec![
        Scenario { name: "GET /health", method: "GET", path: "/health", bearer: None, body: None },
        me("GET /api/me (API key)", &api_key),
        me("GET /api/me (rate-limited key)", &limited),
        me("GET /api/me (ES256 JWT)", &jwt),
        Scenario {
            name: "POST …/feature-flags/…/evaluate",
            method: "POST",
            path: "/api/feature-flags/bench-flag/evaluate",
            bearer: Some(api_key.clone()),
            body: Some(json!({ "persona_id": "user-42", "bu_id": "bu-1", "attributes": { "plan": "pro", "seats": 12 } }).to_string()),
        },
    ];
    Ok((scenarios, api_key))
}
