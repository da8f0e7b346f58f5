//! Governance benchmark, against one hub in this process (SQLite in a
//! temporary directory, or the PostgreSQL database `--database-url` names,
//! which should be fresh):
//!
//! 1. ReBAC: 1,000,000 relationships (500,000 personas, two outgoing edges
//!    each, random targets), then checks whose target lies four steps from
//!    the subject: latency in process (`hub_governance::rebac::reaches`, one
//!    caller) and over HTTP (`POST /api/rebac/check`, `--concurrency`).
//! 2. Cedar in the gate: `GET /api/me` with an API key for a tenant with no
//!    policy bundle and for one with a 20-policy bundle active, against
//!    `GET /health`, interleaved in rounds.
//! 3. The vault: encrypt-then-decrypt pairs per second over HTTP.
//!
//! `cargo run --release -p tests --bin governance-bench -- --seconds 6`

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, ensure};
use clap::Parser;
use serde_json::{Value, json};

#[derive(Parser, Clone)]
#[command(about = "ReBAC checks, Cedar in the gate, vault throughput")]
struct Args {
    /// `postgres://…` of a fresh database; SQLite in a temporary directory when absent.
    #[arg(long)]
    database_url: Option<String>,
    /// Relationships written for the ReBAC checks.
    #[arg(long, default_value_t = 1_000_000)]
    relationships: usize,
    /// ReBAC checks measured, in process and over HTTP each.
    #[arg(long, default_value_t = 5_000)]
    checks: usize,
    /// Seconds of each throughput measurement.
    #[arg(long, default_value_t = 6)]
    seconds: u64,
    /// Concurrent HTTP clients.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Worker threads of the hub's runtime.
    #[arg(long, default_value_t = 2)]
    server_threads: usize,
}

/// xorshift64*: the same graph and checks on every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as usize % n
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn persona(n: usize) -> String {
    format!("00000000-0000-7000-8000-{n:012}")
}

async fn post(client: &reqwest::Client, url: String, token: &str, body: Value) -> anyhow::Result<Value> {
    let res = client.post(url).bearer_auth(token).json(&body).send().await?;
    let status = res.status();
    let body: Value = res.json().await?;
    ensure!(status.is_success(), "{status}: {body}");
    Ok(body)
}

/// Requests/s of `make` for `seconds` with `concurrency` clients.
async fn throughput(concurrency: usize, seconds: u64, make: Arc<dyn Fn() -> reqwest::RequestBuilder + Send + Sync>) -> (f64, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let (done, errors) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (stop, done, errors, make) = (stop.clone(), done.clone(), errors.clone(), make.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    match make().send().await {
                        Ok(r) if r.status().is_success() => {
                            let _ = r.bytes().await;
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("client task");
    }
    (done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64(), errors.load(Ordering::Relaxed))
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let server_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(args.server_threads).enable_all().build()?;
    let mut config = hub_kernel::config::Config::for_tests(dir.path().into(), args.database_url.clone());
    config.listen = "127.0.0.1:0".parse()?;
    let (server, state) = server_rt.block_on(async {
        let state = hub::prepare(config).await?;
        let server = hub::start(state.clone()).await?;
        anyhow::Ok((server, state))
    })?;
    let base = format!("http://{}", server.addr);
    let backend = if args.database_url.is_some() { "PostgreSQL" } else { "SQLite" };
    println!("hub on {base} ({backend}, {} server threads)", args.server_threads);

    let client_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    client_rt.block_on(async move {
        let client = reqwest::Client::builder().pool_max_idle_per_host(args.concurrency * 2).build()?;
        let mut tenants = Vec::new();
        for name in ["plain", "ruled"] {
            let signup = post(
                &client,
                format!("{base}/api/auth/signup-tenant"),
                "",
                json!({ "email": format!("{name}@bench.example.com"), "password": "bench password", "org_name": name, "app_id": name, "display_name": name, "region": "eu-west-1" }),
            )
            .await?;
            let jwt = signup["data"]["token"].as_str().context("token")?.to_string();
            let app = post(&client, format!("{base}/api/applications"), &jwt, json!({ "name": name, "slug": name, "environment": "live" })).await?;
            let app_id = app["data"]["application_id"].as_str().context("application")?;
            let key = post(&client, format!("{base}/api/applications/{app_id}/keys"), &jwt, json!({ "name": name, "scopes": ["*"] })).await?;
            tenants.push((signup["data"]["tenant_id"].as_str().context("tenant")?.to_string(), jwt, key["data"]["api_key"].as_str().context("key")?.to_string()));
        }

        // 1. ReBAC.
        let (tenant, jwt) = (tenants[0].0.clone(), tenants[0].1.clone());
        let nodes = args.relationships / 2;
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let edges: Vec<[usize; 2]> = (0..nodes).map(|_| [rng.below(nodes), rng.below(nodes)]).collect();
        let loaded = Instant::now();
        let mut tx = state.db.begin().await?;
        let now = hub_kernel::db::now();
        for chunk in (0..nodes).collect::<Vec<_>>().chunks(250) {
            let values: Vec<String> = (0..chunk.len() * 2).map(|i| format!("($1, 'member', ${}, ${}, 'bench', $2)", 3 + 2 * i, 4 + 2 * i)).collect();
            let sql = format!(
                "INSERT INTO rebac_relationship (tenant_id, relation, subject_persona_id, object_persona_id, created_by, created_at) VALUES {} ON CONFLICT DO NOTHING",
                values.join(", ")
            );
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(&tenant).bind(&now);
            for &s in chunk {
                for &o in &edges[s] {
                    q = q.bind(persona(s)).bind(persona(o));
                }
            }
            q.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        if args.database_url.is_some() {
            sqlx::query("ANALYZE rebac_relationship").execute(state.db.writer()).await?;
        }
        println!("\nReBAC: {} relationships over {nodes} personas written in {:.1} s", nodes * 2, loaded.elapsed().as_secs_f64());
        // Targets four steps out, by a random walk.
        let pairs: Vec<(String, String)> = (0..args.checks)
            .map(|_| {
                let s = rng.below(nodes);
                let mut at = s;
                for _ in 0..4 {
                    at = edges[at][rng.below(2)];
                }
                (persona(s), persona(at))
            })
            .collect();
        let mut lat = Vec::with_capacity(pairs.len());
        let (mut allowed, mut depth) = (0, 0);
        for (s, t) in &pairs {
            let started = Instant::now();
            let d = hub_governance::rebac::reaches(&state.db, &tenant, s, "member", t, 25, 10_000).await?;
            lat.push(started.elapsed().as_secs_f64() * 1000.0);
            allowed += usize::from(d.allowed);
            depth += d.budget.depth_used;
        }
        lat.sort_by(f64::total_cmp);
        println!(
            "  in process: {} checks, {allowed} allowed, mean depth {:.2}: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms (target p99 < 1 ms)",
            pairs.len(),
            depth as f64 / pairs.len() as f64,
            percentile(&lat, 0.5),
            percentile(&lat, 0.99),
            percentile(&lat, 1.0)
        );
        let pairs = Arc::new(pairs);
        let next = Arc::new(AtomicU64::new(0));
        let latencies = Arc::new(std::sync::Mutex::new(Vec::new()));
        let started = Instant::now();
        let tasks: Vec<_> = (0..args.concurrency)
            .map(|_| {
                let (client, pairs, next, latencies, url, jwt) = (client.clone(), pairs.clone(), next.clone(), latencies.clone(), format!("{base}/api/rebac/check"), jwt.clone());
                tokio::spawn(async move {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                        let Some((s, t)) = pairs.get(i) else { break };
                        let body = json!({ "subject_persona_id": s, "relation": "member", "target_persona_id": t });
                        let at = Instant::now();
                        let ok = client.post(&url).bearer_auth(&jwt).json(&body).send().await.is_ok_and(|r| r.status() == 200);
                        if ok {
                            latencies.lock().unwrap().push(at.elapsed().as_secs_f64() * 1000.0);
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await?;
        }
        let mut lat = std::mem::take(&mut *latencies.lock().unwrap());
        lat.sort_by(f64::total_cmp);
        ensure!(lat.len() == pairs.len(), "{} of {} HTTP checks failed", pairs.len() - lat.len(), pairs.len());
        println!(
            "  over HTTP ({} clients): {:.0} checks/s, p50 {:.2} ms, p99 {:.2} ms",
            args.concurrency,
            lat.len() as f64 / started.elapsed().as_secs_f64(),
            percentile(&lat, 0.5),
            percentile(&lat, 0.99)
        );

        // 2. Cedar in the gate: twenty policies, the matching one last.
        let mut source = String::new();
        for i in 0..19 {
            source.push_str(&format!("@id(\"rule-{i}\")\npermit (principal, action == Action::\"crm.rule{i}.read\", resource) when {{ context.method == \"GET\" }};\n"));
        }
        source.push_str("@id(\"reads\")\npermit (principal, action, resource) when { context.method == \"GET\" && context.actor_kind == \"service\" };\n");
        let ruled_jwt = tenants[1].1.clone();
        post(&client, format!("{base}/api/policies/bundles"), &ruled_jwt, json!({ "name": "bench", "version": 1, "iql_source": source, "activate": true })).await?;
        let get = |path: &str, key: Option<String>| -> Arc<dyn Fn() -> reqwest::RequestBuilder + Send + Sync> {
            let (client, url) = (client.clone(), format!("{base}{path}"));
            Arc::new(move || match &key {
                Some(k) => client.get(&url).bearer_auth(k),
                None => client.get(&url),
            })
        };
        let scenarios = [("GET /health", get("/health", None)), ("GET /api/me, no bundle", get("/api/me", Some(tenants[0].2.clone()))), (
            "GET /api/me, 20-policy bundle",
            get("/api/me", Some(tenants[1].2.clone())),
        )];
        let mut rates = [0.0f64; 3];
        let rounds = 3;
        for _ in 0..rounds {
            for (i, (_, make)) in scenarios.iter().enumerate() {
                let (rate, errors) = throughput(args.concurrency, args.seconds.div_ceil(rounds).max(1), make.clone()).await;
                ensure!(errors == 0, "{} answered {errors} errors", scenarios[i].0);
                rates[i] += rate / rounds as f64;
            }
        }
        println!("\nCedar in the gate ({} clients, {rounds} interleaved rounds):", args.concurrency);
        for (i, (name, _)) in scenarios.iter().enumerate() {
            println!("  {name:<32} {:>9.0} requests/s  {:>5.1}% of /health", rates[i], 100.0 * rates[i] / rates[0]);
        }
        println!("  the bundle's cost: {:.1}% of the no-bundle rate (target: the gate within 10% of /health)", 100.0 * (1.0 - rates[2] / rates[1]));

        // 3. The vault.
        let (vault_client, key) = (client.clone(), tenants[0].2.clone());
        let (enc, dec) = (format!("{base}/api/vault/encrypt"), format!("{base}/api/vault/decrypt"));
        let stop = Arc::new(AtomicBool::new(false));
        let pairs_done = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let tasks: Vec<_> = (0..args.concurrency)
            .map(|i| {
                let (c, key, enc, dec, stop, done) = (vault_client.clone(), key.clone(), enc.clone(), dec.clone(), stop.clone(), pairs_done.clone());
                tokio::spawn(async move {
                    let plaintext = "eyJjYXJkIjoiNDI0MiA0MjQyIDQyNDIgNDI0MiJ9";
                    while !stop.load(Ordering::Relaxed) {
                        let sealed: Value = c.post(&enc).bearer_auth(&key).json(&json!({ "ref": format!("bench/{i}"), "plaintext_b64": plaintext })).send().await?.json().await?;
                        let mut envelope = sealed["data"].clone();
                        envelope["ref"] = json!(format!("bench/{i}"));
                        let opened: Value = c.post(&dec).bearer_auth(&key).json(&envelope).send().await?.json().await?;
                        ensure!(opened["data"]["plaintext_b64"] == plaintext, "the vault did not give the plaintext back: {opened}");
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    anyhow::Ok(())
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(args.seconds)).await;
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await??;
        }
        println!(
            "\nVault ({} clients): {:.0} encrypt+decrypt pairs/s over HTTP (each pair two audited writes)",
            args.concurrency,
            pairs_done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
        );
        anyhow::Ok(())
    })?;
    server_rt.block_on(server.stop())?;
    Ok(())
}
