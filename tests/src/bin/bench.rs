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
use tests::{MachineTicks, Scenario, median};

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
    /// With `--compare-metrics`: leave metrics on in the second setting
    /// too, so that the comparison shows its own noise (two alike
    /// settings measured the same way).
    #[arg(long)]
    noise_floor: bool,
    /// With `--compare-metrics`: start the second setting's hubs first and
    /// list it first. A difference that changes sign with this belongs to
    /// the hub processes (two with the same setting can differ by several
    /// percent), not to the setting.
    #[arg(long)]
    swap: bool,
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
    /// Requests completed.
    requests: u64,
    /// The hub processes' CPU time (user and system) per request, in µs:
    /// the route's cost, which time stolen by the hypervisor does not
    /// inflate as it does the rate.
    cpu_us: f64,
    /// The machine's CPU time stolen by the hypervisor during the run, in %.
    steal: f64,
}

/// A scenario as `wrk` sends it.
fn lua(s: &Scenario) -> String {
    let quote = |s: &str| format!("{s:?}");
    let mut lua = format!("wrk.method = {}\n", quote(s.method));
    if let Some(b) = &s.bearer {
        lua += &format!("wrk.headers[\"Authorization\"] = {}\n", quote(&format!("Bearer {b}")));
    }
    if let Some(body) = &s.body {
        lua += "wrk.headers[\"Content-Type\"] = \"application/json\"\n";
        lua += &format!("wrk.body = {}\n", quote(body));
    }
    lua
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
            [n, "requests", "in", ..] => m.requests = n.parse()?,
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
/// between them) and adds the rates up (latencies: the worst replica's),
/// with the hubs' CPU time per request and the machine's stolen time.
async fn drive(dir: &Path, hubs: &[Hub], s: &Scenario, connections: usize, seconds: u64) -> anyhow::Result<Measured> {
    let script = dir.join(format!("{}.lua", s.name.replace(|c: char| !c.is_ascii_alphanumeric(), "_")));
    std::fs::write(&script, lua(s))?;
    let per = (connections / hubs.len()).max(1);
    let cpu = || hubs.iter().map(|h| tests::process_ticks(h.child.id())).sum::<anyhow::Result<u64>>();
    let (cpu_before, machine_before) = (cpu()?, MachineTicks::now()?);
    let runs: Vec<_> = hubs
        .iter()
        .map(|Hub { base, .. }| {
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
        total.requests += m.requests;
    }
    let cpu_after = cpu()?;
    total.cpu_us = (cpu_after - cpu_before) as f64 * tests::MS_PER_TICK * 1000.0 / total.requests.max(1) as f64;
    total.steal = MachineTicks::now()?.stolen_percent_since(&machine_before);
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

/// The gateway scenarios on the benchmarks' tenant (see
/// `tests::gateway_tenant`), and the credential ones.
async fn scenarios(base: &str) -> anyhow::Result<(Vec<Scenario>, Vec<Scenario>)> {
    let client = &reqwest::Client::new();
    let (gateway, api_key) =
        tests::gateway_tenant(async |path: &str, token: Option<&str>, body: Value| post(client, format!("{base}{path}"), token, body).await).await?;
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
    /// The hub processes, which end when dropped.
    hubs: Vec<Hub>,
    gateway: Vec<Scenario>,
    credentials: Vec<Scenario>,
    /// PostgreSQL: the fresh database's name, dropped at the end.
    database: Option<String>,
    /// Per gateway scenario, what each round measured.
    runs: Vec<Vec<Measured>>,
}

const GATEWAY_NAMES: [&str; 5] = ["GET /health", "GET /api/me (API key)", "GET /api/me (rate-limited key)", "GET /api/me (ES256 JWT)", "POST …/evaluate"];

/// The median over the rounds of `f(a) / f(b)`, each round's `a` against
/// the same round's `b`: two figures measured minutes apart on a shared
/// machine differ by more than two measured seconds apart, so each ratio
/// is taken within its round, and one disturbed round moves the median
/// little where it would move a mean.
fn paired(a: &[Measured], b: &[Measured], f: impl Fn(&Measured) -> f64) -> f64 {
    median(a.iter().zip(b).map(|(x, y)| f(x) / f(y)).collect())
}

/// One backend: the hubs of each metrics setting (a fresh database for
/// each), all started before the first round; every scenario, the table.
/// With `--compare-metrics` the settings take turns within each round,
/// the first one every other round, so drift over the run (disk, caches,
/// the machine's other work) falls on both alike.
async fn bench(args: &Args, bin: &Path, label: &str, server: Option<&str>) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let replicas = if server.is_some() { 2 } else { 1 };
    let mut settings: Vec<(&'static str, Vec<(&str, &str)>)> = vec![("metrics on", vec![])];
    if args.compare_metrics {
        settings.push(match args.noise_floor {
            true => ("metrics on (again)", vec![("HUB_METRICS", "true")]),
            false => ("metrics off", vec![("HUB_METRICS", "false")]),
        });
    }
    if args.swap {
        settings.reverse();
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
        let (gateway, credentials) = scenarios(&hubs[0].base).await?;
        let runs = vec![Vec::new(); gateway.len()];
        variants.push(Variant { name, hubs, gateway, credentials, database, runs });
    }
    let outcome = run_rounds(args, dir.path(), &mut variants).await;
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
        }
    }
    if let (Ok(_), [on, off]) = (&outcome, variants.as_slice()) {
        println!("\n{label}: {} against {}, the median over the rounds of each round's ratio (target: within 3%)", on.name, off.name);
        println!("  {:<34} {:>11} {:>19} {:>13}", "scenario", "requests/s", "(rounds, min..max)", "CPU/request");
        for (i, s) in GATEWAY_NAMES.iter().enumerate() {
            let each: Vec<f64> = on.runs[i].iter().zip(&off.runs[i]).map(|(a, b)| 100.0 * (a.rate / b.rate - 1.0)).collect();
            let (lo, hi) = each.iter().fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
            let rate = 100.0 * (paired(&on.runs[i], &off.runs[i], |m| m.rate) - 1.0);
            let cpu = 100.0 * (paired(&on.runs[i], &off.runs[i], |m| m.cpu_us) - 1.0);
            println!("  {s:<34} {rate:>+10.1}% {:>19} {cpu:>+12.1}%", format!("({lo:+.1}..{hi:+.1}%)"));
        }
    }
    let databases: Vec<String> = variants.iter_mut().filter_map(|v| v.database.take()).collect();
    drop(variants);
    if let Some(server) = server {
        for name in databases {
            tests::drop_postgres(server, &name).await?;
        }
    }
    outcome.map(drop)
}

/// Warms every variant up, then runs the rounds: each gateway scenario on
/// each variant in turn (in reverse order every other round). Then the
/// credential scenarios on the first variant, whose rows it answers.
async fn run_rounds(args: &Args, dir: &Path, variants: &mut [Variant]) -> anyhow::Result<Vec<(&'static str, Measured)>> {
    for v in variants.iter() {
        for s in &v.gateway {
            drive(dir, &v.hubs, s, args.connections, 1).await?;
        }
    }
    for round in 0..args.rounds {
        for i in 0..GATEWAY_NAMES.len() {
            let mut order: Vec<usize> = (0..variants.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for n in order {
                let v = &mut variants[n];
                let m = drive(dir, &v.hubs, &v.gateway[i], args.connections, args.seconds).await?;
                v.runs[i].push(m);
            }
        }
    }
    let v = &variants[0];
    let grant = drive(dir, &v.hubs, &v.credentials[0], args.connections, args.seconds).await?;
    let login = drive(dir, &v.hubs, &v.credentials[1], args.login_connections.max(v.hubs.len()), args.seconds).await?;
    Ok(vec![(v.credentials[0].name, grant), (v.credentials[1].name, login)])
}

/// One variant's table. Each gateway scenario: the median rate, its share
/// of `/health` (the median of each round's share), the hubs' CPU time per
/// request and the share of `/health` it allows (`/health`'s CPU per
/// request over the route's), the worst p50 and p99 of the rounds, and
/// the errors of all rounds; then the credential scenarios, run once.
fn table(v: &Variant, extra: &[(&str, Measured)]) {
    let health = &v.runs[0];
    println!(
        "{:<36} {:>11} {:>10} {:>13} {:>10} {:>8} {:>8} {:>7}",
        "scenario", "requests/s", "of /health", "hub CPU µs/req", "by CPU", "p50 ms", "p99 ms", "errors"
    );
    let row = |name: &str, rate: f64, share: f64, cpu: f64, cpu_share: f64, p50: f64, p99: f64, errors: u64| {
        println!("{name:<36} {rate:>11.0} {share:>9.1}% {cpu:>13.1} {cpu_share:>9.1}% {p50:>8.2} {p99:>8.2} {errors:>7}");
    };
    let health_cpu = median(health.iter().map(|m| m.cpu_us).collect());
    for (s, runs) in v.gateway.iter().zip(&v.runs) {
        row(
            s.name,
            median(runs.iter().map(|m| m.rate).collect()),
            100.0 * paired(runs, health, |m| m.rate),
            median(runs.iter().map(|m| m.cpu_us).collect()),
            100.0 / paired(runs, health, |m| m.cpu_us),
            runs.iter().map(|m| m.p50_ms).fold(0.0, f64::max),
            runs.iter().map(|m| m.p99_ms).fold(0.0, f64::max),
            runs.iter().map(|m| m.errors).sum(),
        );
    }
    let health_rate = median(health.iter().map(|m| m.rate).collect());
    for (name, m) in extra {
        row(name, m.rate, 100.0 * m.rate / health_rate, m.cpu_us, 100.0 * health_cpu / m.cpu_us, m.p50_ms, m.p99_ms, m.errors);
    }
    let share = |i: usize| 100.0 * paired(&v.runs[i], health, |m| m.rate);
    let cpu_share = |i: usize| 100.0 / paired(&v.runs[i], health, |m| m.cpu_us);
    println!(
        "authenticated routes: API key {:.1}%, JWT {:.1}%, flag evaluation {:.1}% of /health by requests/s; {:.1}%, {:.1}%, {:.1}% by CPU (target: at least 75%)",
        share(1),
        share(3),
        share(4),
        cpu_share(1),
        cpu_share(3),
        cpu_share(4)
    );
    println!(
        "rate-limited key: {:.1}% of the same route with an unlimited key by requests/s, {:.1}% by CPU (target: at least 90%)",
        100.0 * paired(&v.runs[2], &v.runs[1], |m| m.rate),
        100.0 / paired(&v.runs[2], &v.runs[1], |m| m.cpu_us)
    );
    let steal: Vec<f64> = v.runs.iter().flatten().map(|m| m.steal).collect();
    let worst = steal.iter().copied().fold(0.0, f64::max);
    println!("the machine's CPU time stolen by its hypervisor during these runs: median {:.1}%, worst {worst:.1}%", median(steal));
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
