//! The project's gateway benchmark, driven from outside the hub: the
//! release `hub` binary runs as its own process and `wrk` (a C load
//! generator, one thread) sends the requests, so the client neither shares
//! the hub's runtime nor costs more than the routes it measures. SQLite
//! runs one hub; PostgreSQL (when `--postgres-url` or
//! `HUB_TEST_POSTGRES_URL` is set) runs two replicas on one fresh database,
//! each driven by its own `wrk` with half the connections, and adds them up.
//!
//! Scenarios, interleaved in rounds so background load affects them alike:
//! `GET /health`, `GET /api/me` with an API key, with a rate-limited API
//! key, and with an ES256 JWT, and a feature-flag evaluation (API key);
//! then client-credentials grants/s and password logins/s. Each is given
//! as a share of `/health` in the same run.
//!
//! `tests/bench/gateway.sh` installs `wrk` when missing, builds and runs it:
//! `cargo build --release -p hub -p tests && target/release/bench --seconds 10`

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, bail, ensure};
use clap::Parser;
use serde_json::{Value, json};

#[derive(Parser, Clone)]
#[command(about = "Load benchmark of the hub's gateway and credential paths, from outside the hub's process")]
struct Args {
    /// Seconds each scenario runs per round.
    #[arg(long, default_value_t = 4)]
    seconds: u64,
    /// Open connections (split between the replicas on PostgreSQL).
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Connections for password logins (argon2id is CPU-bound).
    #[arg(long, default_value_t = 4)]
    login_connections: usize,
    /// The gateway scenarios run interleaved in this many rounds.
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// The hub binary (default: `hub` beside this one).
    #[arg(long)]
    hub: Option<PathBuf>,
    /// A PostgreSQL server (`postgres://…`, any database): the benchmark
    /// creates a fresh database there and drops it after. Defaults to
    /// `HUB_TEST_POSTGRES_URL`.
    #[arg(long, env = "HUB_TEST_POSTGRES_URL")]
    postgres_url: Option<String>,
    /// Skip SQLite (only PostgreSQL).
    #[arg(long)]
    no_sqlite: bool,
    /// Also run every gateway scenario with the hub's metrics recorder off
    /// (`HUB_METRICS=false`) and compare.
    #[arg(long)]
    compare_metrics: bool,
}

/// One hub process.
struct Hub {
    child: Child,
    base: String,
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Starts `hub serve` and waits until it is ready (`/ready`: migrations done).
async fn start_hub(bin: &Path, data: &Path, database_url: Option<&str>, extra: &[(&str, &str)]) -> anyhow::Result<Hub> {
    let port = free_port()?;
    std::fs::create_dir_all(data)?;
    let log = std::fs::File::create(data.join("hub.log"))?;
    let mut cmd = Command::new(bin);
    cmd.arg("serve")
        .env("HUB_LISTEN", format!("127.0.0.1:{port}"))
        .env("HUB_DATA_DIR", data)
        .env("HUB_DEV", "true")
        .env("HUB_MASTER_KEY", "11".repeat(32))
        .env("HUB_PUBLIC_URL", "http://bench.local")
        .env("HUB_QUIC_LISTEN", "off")
        .env("HUB_LOG", "warn")
        .env_remove("DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(log);
    if let Some(url) = database_url {
        cmd.env("DATABASE_URL", url);
    }
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let child = cmd.spawn().with_context(|| format!("starting {}", bin.display()))?;
    let hub = Hub { child, base: format!("http://127.0.0.1:{port}") };
    let client = reqwest::Client::new();
    let started = Instant::now();
    loop {
        if let Ok(r) = client.get(format!("{}/ready", hub.base)).send().await
            && r.status() == 200
        {
            return Ok(hub);
        }
        ensure!(started.elapsed() < Duration::from_secs(60), "the hub did not get ready; see {}", data.join("hub.log").display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What one `wrk` run measured.
#[derive(Clone, Copy, Default)]
struct Measured {
    rate: f64,
    p50_ms: f64,
    p99_ms: f64,
    errors: u64,
}

/// A scenario as `wrk` sends it.
#[derive(Clone)]
struct Scenario {
    name: &'static str,
    method: &'static str,
    path: &'static str,
    bearer: Option<String>,
    body: Option<String>,
}

impl Scenario {
    fn lua(&self) -> String {
        let quote = |s: &str| format!("{s:?}");
        let mut lua = format!("wrk.method = {}\n", quote(self.method));
        if let Some(b) = &self.bearer {
            lua += &format!("wrk.headers[\"Authorization\"] = {}\n", quote(&format!("Bearer {b}")));
        }
        if let Some(body) = &self.body {
            lua += "wrk.headers[\"Content-Type\"] = \"application/json\"\n";
            lua += &format!("wrk.body = {}\n", quote(body));
        }
        lua
    }
}

fn duration_ms(text: &str) -> anyhow::Result<f64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic()).context("a unit")?;
    let (n, unit) = text.split_at(split);
    let n: f64 = n.parse()?;
    Ok(match unit {
        "us" => n / 1000.0,
        "ms" => n,
        "s" => n * 1000.0,
        "m" => n * 60_000.0,
        _ => bail!("unknown unit {unit}"),
    })
}

/// Reads `wrk --latency` output.
fn parse_wrk(out: &str) -> anyhow::Result<Measured> {
    let mut m = Measured::default();
    for line in out.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Requests/sec:", r] => m.rate = r.parse()?,
            ["50.000%" | "50%", t] => m.p50_ms = duration_ms(t)?,
            ["99.000%" | "99%", t] => m.p99_ms = duration_ms(t)?,
            ["Non-2xx", "or", "3xx", "responses:", n] => m.errors += n.parse::<u64>()?,
            ["Socket", "errors:", rest @ ..] => {
                m.errors += rest.iter().filter_map(|w| w.trim_end_matches(',').parse::<u64>().ok()).sum::<u64>();
            }
            _ => {}
        }
    }
    ensure!(m.rate > 0.0, "no rate in wrk's output:\n{out}");
    Ok(m)
}

/// Runs the scenario against every replica at once (connections split
/// between them) and adds the rates up (latencies: the worst replica's).
async fn drive(dir: &Path, bases: &[String], s: &Scenario, connections: usize, seconds: u64) -> anyhow::Result<Measured> {
    let script = dir.join(format!("{}.lua", s.name.replace(|c: char| !c.is_ascii_alphanumeric(), "_")));
    std::fs::write(&script, s.lua())?;
    let per = (connections / bases.len()).max(1);
    let runs: Vec<_> = bases
        .iter()
        .map(|base| {
            tokio::process::Command::new("wrk")
                .args(["-t1", &format!("-c{per}"), &format!("-d{seconds}s"), "--latency", "-s"])
                .arg(&script)
                .arg(format!("{base}{}", s.path))
                .output()
        })
        .collect();
    let mut total = Measured::default();
    for run in runs {
        let out = run.await.context("running wrk (install it: apt-get install wrk)")?;
        ensure!(out.status.success(), "wrk: {}", String::from_utf8_lossy(&out.stderr));
        let m = parse_wrk(&String::from_utf8_lossy(&out.stdout))?;
        total.rate += m.rate;
        total.p50_ms = total.p50_ms.max(m.p50_ms);
        total.p99_ms = total.p99_ms.max(m.p99_ms);
        total.errors += m.errors;
    }
    Ok(total)
}

async fn post(client: &reqwest::Client, url: String, token: Option<&str>, body: Value) -> anyhow::Result<Value> {
    let mut req = client.post(&url).json(&body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let res = req.send().await?;
    let status = res.status();
    let body: Value = res.json().await.unwrap_or(Value::Null);
    ensure!(status.is_success(), "{url}: {status}: {body}");
    Ok(body)
}

/// A tenant with an API key, a rate-limited one, a JWT and a flag.
async fn scenarios(base: &str) -> anyhow::Result<(Vec<Scenario>, Vec<Scenario>)> {
    let client = &reqwest::Client::new();
    let url = |p: &str| format!("{base}{p}");
    let signup = post(
        client,
        url("/api/auth/signup-tenant"),
        None,
        json!({ "email": "bench@example.com", "password": "bench password", "org_name": "Bench", "app_id": "bench", "display_name": "Bench", "region": "eu-west-1" }),
    )
    .await?;
    let jwt = signup["data"]["token"].as_str().context("signup token")?.to_string();
    let app = post(client, url("/api/applications"), Some(&jwt), json!({ "name": "bench", "slug": "bench", "environment": "live" })).await?;
    let app_id = app["data"]["application_id"].as_str().context("application")?.to_string();
    let key = post(client, url(&format!("/api/applications/{app_id}/keys")), Some(&jwt), json!({ "name": "bench", "scopes": ["*"] })).await?;
    let api_key = key["data"]["api_key"].as_str().context("api key")?.to_string();
    // Limited, but far above what the run sends: every request is counted.
    let limited = post(
        client,
        url(&format!("/api/applications/{app_id}/keys")),
        Some(&jwt),
        json!({ "name": "limited", "scopes": ["*"], "rate_limit_rpm": 1_000_000_000 }),
    )
    .await?;
    let limited = limited["data"]["api_key"].as_str().context("limited key")?.to_string();
    // A flag with a rollout whose predicate fails and a 50% rollout
    // behind it, so an evaluation walks constraints and a bucket.
    post(client, url("/api/feature-flags"), Some(&jwt), json!({ "flag_key": "bench-flag", "default_value": "control" })).await?;
    for rollout in [
        json!({ "priority": 1, "predicate": [{ "context_name": "attributes.plan", "operator": "in", "values": ["enterprise"] }], "value": "enterprise" }),
        json!({ "priority": 2, "percentage": 50, "predicate": [{ "context_name": "bu_id", "operator": "in", "values": ["bu-1", "bu-2"] }], "value": "treatment" }),
    ] {
        post(client, url("/api/feature-flags/bench-flag/rollouts"), Some(&jwt), rollout).await?;
    }
    let get = |name, bearer: Option<&String>| Scenario { name, method: "GET", path: "/api/me", bearer: bearer.cloned(), body: None };
    let gateway = vec![
        Scenario { name: "GET /health", method: "GET", path: "/health", bearer: None, body: None },
        get("GET /api/me (API key)", Some(&api_key)),
        get("GET /api/me (rate-limited key)", Some(&limited)),
        get("GET /api/me (ES256 JWT)", Some(&jwt)),
        Scenario {
            name: "POST …/feature-flags/…/evaluate",
            method: "POST",
            path: "/api/feature-flags/bench-flag/evaluate",
            bearer: Some(api_key.clone()),
            body: Some(json!({ "persona_id": "user-42", "bu_id": "bu-1", "attributes": { "plan": "pro", "seats": 12 } }).to_string()),
        },
    ];
    let credentials = vec![
        Scenario {
            name: "POST /api/auth/token (grant)",
            method: "POST",
            path: "/api/auth/token",
            bearer: None,
            body: Some(json!({ "grant_type": "client_credentials", "client_secret": api_key }).to_string()),
        },
        Scenario {
            name: "POST /api/auth/login (argon2id)",
            method: "POST",
            path: "/api/auth/login",
            bearer: None,
            body: Some(json!({ "email": "bench@example.com", "password": "bench password" }).to_string()),
        },
    ];
    Ok((gateway, credentials))
}

/// The hubs of one metrics setting, with the scenarios made on them.
struct Variant {
    name: &'static str,
    /// Held for their lifetime: the hub processes end when dropped.
    _hubs: Vec<Hub>,
    bases: Vec<String>,
    gateway: Vec<Scenario>,
    credentials: Vec<Scenario>,
    /// PostgreSQL: the fresh database's name, dropped at the end.
    database: Option<String>,
    /// Per gateway scenario: the mean rate, the worst p50 and p99, errors.
    totals: Vec<(f64, f64, f64, u64)>,
}

const GATEWAY_NAMES: [&str; 5] = ["GET /health", "GET /api/me (API key)", "GET /api/me (rate-limited key)", "GET /api/me (ES256 JWT)", "POST …/evaluate"];

/// One backend: the hubs of each metrics setting (a fresh database for
/// each), all started before the first round; every scenario, the table.
/// With `--compare-metrics` the settings take turns within each round, so
/// drift over the run (disk, caches, the machine's other work) falls on
/// both alike instead of on whichever ran second.
async fn bench(args: &Args, bin: &Path, label: &str, server: Option<&str>) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let replicas = if server.is_some() { 2 } else { 1 };
    let mut settings: Vec<(&'static str, Vec<(&str, &str)>)> = vec![("metrics on", vec![])];
    if args.compare_metrics {
        settings.push(("metrics off", vec![("HUB_METRICS", "false")]));
    }
    let mut variants = Vec::new();
    for (name, env) in &settings {
        let (database_url, database) = match server {
            Some(server) => {
                let (url, name) = tests::fresh_postgres(server, "hubbench").await?;
                (Some(url), Some(name))
            }
            None => (None, None),
        };
        let mut hubs = Vec::new();
        for i in 0..replicas {
            let data = dir.path().join(format!("hub-{}-{i}", env.len()));
            let _ = std::fs::remove_dir_all(&data);
            hubs.push(start_hub(bin, &data, database_url.as_deref(), env).await?);
        }
        let bases: Vec<String> = hubs.iter().map(|h| h.base.clone()).collect();
        let (gateway, credentials) = scenarios(&bases[0]).await?;
        let totals = vec![(0.0, 0.0, 0.0, 0); gateway.len()];
        variants.push(Variant { name, _hubs: hubs, bases, gateway, credentials, database, totals });
    }
    let outcome = run_rounds(args, dir.path(), &mut variants).await;
    let mut gateway_rates = Vec::new();
    if outcome.is_ok() {
        for (n, v) in variants.iter().enumerate() {
            println!(
                "\n{label}, {}: {replicas} hub process(es), wrk -t1 -c{} ({}), {} rounds of {} s per scenario",
                v.name,
                args.connections,
                if replicas > 1 { "split between the replicas" } else { "one hub" },
                args.rounds,
                args.seconds
            );
            let extra = if n == 0 { outcome.as_ref().map(Vec::as_slice).unwrap_or_default() } else { &[] };
            table(v, extra);
            gateway_rates.push(v.totals.iter().map(|t| t.0).collect::<Vec<f64>>());
        }
    }
    let databases: Vec<String> = variants.iter_mut().filter_map(|v| v.database.take()).collect();
    drop(variants);
    if let Some(server) = server {
        for name in databases {
            tests::drop_postgres(server, &name).await?;
        }
    }
    outcome?;
    if let [on, off] = gateway_rates.as_slice() {
        println!("\n{label}: metrics on against off, rounds interleaved (target: within 3%)");
        for (i, s) in GATEWAY_NAMES.iter().enumerate() {
            println!("  {s:<34} {:+.1}%", 100.0 * (on[i] - off[i]) / off[i]);
        }
    }
    Ok(())
}

/// Warms every variant up, then runs the rounds: each gateway scenario on
/// each variant in turn. Then the credential scenarios on the first
/// variant, whose rows it answers.
async fn run_rounds(args: &Args, dir: &Path, variants: &mut [Variant]) -> anyhow::Result<Vec<(&'static str, Measured)>> {
    for v in variants.iter() {
        for s in &v.gateway {
            drive(dir, &v.bases, s, args.connections, 1).await?;
        }
    }
    for _ in 0..args.rounds {
        for i in 0..GATEWAY_NAMES.len() {
            for v in variants.iter_mut() {
                let m = drive(dir, &v.bases, &v.gateway[i], args.connections, args.seconds).await?;
                let t = &mut v.totals[i];
                t.0 += m.rate / f64::from(args.rounds);
                t.1 = t.1.max(m.p50_ms);
                t.2 = t.2.max(m.p99_ms);
                t.3 += m.errors;
            }
        }
    }
    let v = &variants[0];
    let grant = drive(dir, &v.bases, &v.credentials[0], args.connections, args.seconds).await?;
    let login = drive(dir, &v.bases, &v.credentials[1], args.login_connections.max(v.bases.len()), args.seconds).await?;
    Ok(vec![(v.credentials[0].name, grant), (v.credentials[1].name, login)])
}

/// One variant's table: each scenario's rate as a share of `/health`.
fn table(v: &Variant, extra: &[(&str, Measured)]) {
    let mut rows: Vec<(&str, f64, f64, f64, u64)> = v.gateway.iter().zip(&v.totals).map(|(s, t)| (s.name, t.0, t.1, t.2, t.3)).collect();
    rows.extend(extra.iter().map(|(name, m)| (*name, m.rate, m.p50_ms, m.p99_ms, m.errors)));
    println!("{:<36} {:>12} {:>10} {:>9} {:>9} {:>8}", "scenario", "requests/s", "of /health", "p50 ms", "p99 ms", "errors");
    let health = v.totals[0].0;
    for (name, rate, p50, p99, errors) in &rows {
        println!("{name:<36} {rate:>12.0} {:>9.1}% {p50:>9.2} {p99:>9.2} {errors:>8}", 100.0 * rate / health);
    }
    let share = |i: usize| 100.0 * v.totals[i].0 / health;
    println!("authenticated routes: API key {:.1}%, JWT {:.1}%, flag evaluation {:.1}% of /health (target: at least 75%)", share(1), share(3), share(4));
    println!("rate-limited key: {:.1}% of the same route with an unlimited key (target: at least 90%)", 100.0 * v.totals[2].0 / v.totals[1].0);
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let bin = match &args.hub {
        Some(b) => b.clone(),
        None => std::env::current_exe()?.with_file_name("hub"),
    };
    ensure!(bin.exists(), "no hub binary at {} (cargo build --release -p hub)", bin.display());
    let wrk = Command::new("wrk").arg("--version").output();
    ensure!(wrk.is_ok(), "wrk is not installed (apt-get install wrk, or run tests/bench/gateway.sh)");
    if !args.no_sqlite {
        bench(&args, &bin, "SQLite", None).await?;
    }
    if let Some(server) = &args.postgres_url {
        bench(&args, &bin, "PostgreSQL", Some(server)).await?;
    }
    Ok(())
}
