//! The project's load benchmark. Starts one hub on a fresh SQLite database
//! (in this process, on its own runtime) and drives it over loopback HTTP:
//! requests/s and latency percentiles for `GET /health`, an API-key GET, an
//! ES256-JWT GET and a feature-flag evaluation (API key), then
//! client-credentials grants/s and password logins/s.
//!
//! `cargo run --release -p tests --bin bench -- --seconds 10 --concurrency 64`
//!
//! With `--crm` it runs the CRM scenarios instead (`bench_crm.rs`): a
//! write-heavy mix and list latency over 100,000 rows of the caller's
//! tenant and 1,000,000 of others, on SQLite and, given `--postgres-url`,
//! on a fresh database of that PostgreSQL server:
//! `cargo run --release -p tests --bin bench -- --crm --seconds 10 --postgres-url postgres://…/postgres`

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, ensure};
use clap::Parser;
use serde_json::{Value, json};

#[path = "../bench_crm.rs"]
mod crm;

#[derive(Parser, Clone)]
#[command(about = "Load benchmark of the hub's gateway and credential paths")]
struct Args {
    /// Seconds each scenario runs.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Concurrent client connections.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Concurrent clients for password logins (argon2id is CPU-bound).
    #[arg(long, default_value_t = 4)]
    login_concurrency: usize,
    /// The four gateway scenarios run interleaved in this many rounds, so a
    /// change in background load affects them alike.
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// Worker threads of the hub's runtime.
    #[arg(long, default_value_t = 2)]
    server_threads: usize,
    /// Run the CRM scenarios (write mix, list latency over seeded rows) instead.
    #[arg(long)]
    crm: bool,
    /// With --crm: also on a fresh database of this PostgreSQL server (dropped after).
    #[arg(long)]
    postgres_url: Option<String>,
    /// With --crm: contacts (and calls) seeded in the caller's tenant.
    #[arg(long, default_value_t = 100_000)]
    tenant_rows: u64,
    /// With --crm: contacts (and calls) seeded in ten other tenants together.
    #[arg(long, default_value_t = 1_000_000)]
    other_rows: u64,
    /// With --crm: concurrent clients of the list scenarios.
    #[arg(long, default_value_t = 1)]
    list_concurrency: usize,
}

/// One scenario's request factory.
type MakeRequest = Arc<dyn Fn(&reqwest::Client) -> reqwest::RequestBuilder + Send + Sync>;

#[derive(Default)]
struct Outcome {
    name: &'static str,
    requests: u64,
    errors: u64,
    seconds: f64,
    latencies_us: Vec<u64>,
}

impl Outcome {
    /// Adds another run of the same scenario.
    fn absorb(&mut self, other: Outcome) {
        self.name = other.name;
        self.requests += other.requests;
        self.errors += other.errors;
        self.seconds += other.seconds;
        self.latencies_us.extend(other.latencies_us);
        self.latencies_us.sort_unstable();
    }

    fn rate(&self) -> f64 {
        self.requests as f64 / self.seconds
    }

    fn percentile(&self, p: f64) -> f64 {
        if self.latencies_us.is_empty() {
            return f64::NAN;
        }
        let i = ((self.latencies_us.len() as f64 - 1.0) * p).round() as usize;
        self.latencies_us[i] as f64 / 1000.0
    }
}

async fn run(name: &'static str, client: &reqwest::Client, make: MakeRequest, concurrency: usize, seconds: u64, expect: u16) -> Outcome {
    // A short warm-up fills connection pools and caches.
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_millis(300) {
        let _ = make(client).send().await;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (client, make, stop) = (client.clone(), make.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let (mut lat, mut errors) = (Vec::with_capacity(100_000), 0u64);
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                match make(&client).send().await {
                    Ok(res) if res.status().as_u16() == expect => {
                        let _ = res.bytes().await;
                        lat.push(t.elapsed().as_micros() as u64);
                    }
                    _ => errors += 1,
                }
            }
            (lat, errors)
        }));
    }
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut latencies_us = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (lat, e) = t.await.expect("client task");
        latencies_us.extend(lat);
        errors += e;
    }
    let seconds = started.elapsed().as_secs_f64();
    latencies_us.sort_unstable();
    Outcome { name, requests: latencies_us.len() as u64, errors, seconds, latencies_us }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.crm {
        let crm_args = crm::CrmArgs {
            seconds: args.seconds,
            concurrency: args.concurrency,
            list_concurrency: args.list_concurrency,
            tenant_rows: args.tenant_rows,
            other_rows: args.other_rows,
            server_threads: args.server_threads,
        };
        crm::bench("SQLite", None, crm_args)?;
        if let Some(admin) = &args.postgres_url {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let (url, name) = rt.block_on(crm::fresh_postgres(admin))?;
            let result = crm::bench("PostgreSQL", Some(url), crm_args);
            rt.block_on(crm::drop_postgres(admin, &name))?;
            result?;
        }
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let server_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(args.server_threads).enable_all().build()?;
    let mut config = hub_kernel::config::Config::for_tests(dir.path().into(), None);
    config.listen = "127.0.0.1:0".parse()?;
    let server = server_rt.block_on(async {
        let state = hub::prepare(config).await?;
        hub::start(state).await
    })?;
    let base = format!("http://{}", server.addr);
    println!("hub on {base} (SQLite, {} server threads); {}s per scenario, {} connections", args.server_threads, args.seconds, args.concurrency);

    let client_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let outcomes = client_rt.block_on(async move {
        let client = reqwest::Client::builder().pool_max_idle_per_host(args.concurrency * 2).build()?;
        let signup: Value = client
            .post(format!("{base}/api/auth/signup-tenant"))
            .json(&json!({ "email": "bench@example.com", "password": "bench password", "org_name": "Bench", "app_id": "bench", "display_name": "Bench", "region": "eu-west-1" }))
            .send()
            .await?
            .json()
            .await?;
        let jwt = signup["data"]["token"].as_str().context("signup token")?.to_string();
        let app: Value = client
            .post(format!("{base}/api/applications"))
            .bearer_auth(&jwt)
            .json(&json!({ "name": "bench", "slug": "bench", "environment": "live" }))
            .send()
            .await?
            .json()
            .await?;
        let app_id = app["data"]["application_id"].as_str().context("application")?;
        let key: Value = client
            .post(format!("{base}/api/applications/{app_id}/keys"))
            .bearer_auth(&jwt)
            .json(&json!({ "name": "bench", "scopes": ["*"] }))
            .send()
            .await?
            .json()
            .await?;
        let api_key = key["data"]["api_key"].as_str().context("api key")?.to_string();
        let me = client.get(format!("{base}/api/me")).bearer_auth(&api_key).send().await?;
        ensure!(me.status() == 200, "the API key does not authenticate");
        // A flag with a rollout whose predicate fails and a 50% rollout
        // behind it, so an evaluation walks constraints and a bucket.
        let flag = client
            .post(format!("{base}/api/feature-flags"))
            .bearer_auth(&jwt)
            .json(&json!({ "flag_key": "bench-flag", "default_value": "control" }))
            .send()
            .await?;
        ensure!(flag.status() == 201, "creating the benchmark's flag: {}", flag.text().await?);
        for rollout in [
            json!({ "priority": 1, "predicate": [{ "context_name": "attributes.plan", "operator": "in", "values": ["enterprise"] }], "value": "enterprise" }),
            json!({ "priority": 2, "percentage": 50, "predicate": [{ "context_name": "bu_id", "operator": "in", "values": ["bu-1", "bu-2"] }], "value": "treatment" }),
        ] {
            let r = client.post(format!("{base}/api/feature-flags/bench-flag/rollouts")).bearer_auth(&jwt).json(&rollout).send().await?;
            ensure!(r.status() == 201, "adding the benchmark's rollouts: {}", r.text().await?);
        }

        let url = |p: &str| format!("{base}{p}");
        let health: MakeRequest = { let u = url("/health"); Arc::new(move |c| c.get(&u)) };
        let by_key: MakeRequest = { let (u, k) = (url("/api/me"), api_key.clone()); Arc::new(move |c| c.get(&u).bearer_auth(&k)) };
        let by_jwt: MakeRequest = { let (u, t) = (url("/api/me"), jwt.clone()); Arc::new(move |c| c.get(&u).bearer_auth(&t)) };
        let evaluate: MakeRequest = {
            let (u, k) = (url("/api/feature-flags/bench-flag/evaluate"), api_key.clone());
            let body = json!({ "persona_id": "user-42", "bu_id": "bu-1", "attributes": { "plan": "pro", "seats": 12 } }).to_string();
            Arc::new(move |c| c.post(&u).bearer_auth(&k).header("content-type", "application/json").body(body.clone()))
        };
        let grant: MakeRequest = {
            let (u, k) = (url("/api/auth/token"), api_key.clone());
            Arc::new(move |c| c.post(&u).json(&json!({ "grant_type": "client_credentials", "client_secret": k })))
        };
        let login: MakeRequest = {
            let u = url("/api/auth/login");
            Arc::new(move |c| c.post(&u).json(&json!({ "email": "bench@example.com", "password": "bench password" })))
        };
        let mut out: Vec<Outcome> = (0..4).map(|_| Outcome::default()).collect();
        let slice = (args.seconds / u64::from(args.rounds)).max(1);
        for _ in 0..args.rounds {
            out[0].absorb(run("GET /health", &client, health.clone(), args.concurrency, slice, 200).await);
            out[1].absorb(run("GET /api/me (API key)", &client, by_key.clone(), args.concurrency, slice, 200).await);
            out[2].absorb(run("GET /api/me (ES256 JWT)", &client, by_jwt.clone(), args.concurrency, slice, 200).await);
            out[3].absorb(run("POST /api/feature-flags/…/evaluate", &client, evaluate.clone(), args.concurrency, slice, 200).await);
        }
        out.push(run("POST /api/auth/token (grant)", &client, grant, args.concurrency, args.seconds, 200).await);
        out.push(run("POST /api/auth/login (argon2id)", &client, login, args.login_concurrency, args.seconds, 200).await);
        anyhow::Ok(out)
    })?;

    println!("\n{:<34} {:>12} {:>9} {:>9} {:>9} {:>8}", "scenario", "requests/s", "p50 ms", "p99 ms", "max ms", "errors");
    for o in &outcomes {
        println!("{:<34} {:>12.0} {:>9.2} {:>9.2} {:>9.2} {:>8}", o.name, o.rate(), o.percentile(0.50), o.percentile(0.99), o.percentile(1.0), o.errors);
    }
    let health = outcomes[0].rate();
    println!();
    for o in &outcomes[1..3] {
        println!("{}: {:.1}% of /health throughput (target: within 10%)", o.name, 100.0 * o.rate() / health);
    }
    println!("{}: {:.1}% of /health throughput (target: at least 75%)", outcomes[3].name, 100.0 * outcomes[3].rate() / health);
    println!("grants/s: {:.0} (target: at least 5,000)", outcomes[4].rate());
    println!("password logins/s: {:.0} (argon2id, m=19 MiB, t=2: bounded by design)", outcomes[5].rate());
    server_rt.block_on(server.stop())?;
    Ok(())
}
