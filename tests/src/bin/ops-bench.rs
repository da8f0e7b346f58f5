//! Operator credential benchmark, against hubs in this process:
//!
//! 1. Throughput of an operator route (`GET /admin/webhooks`) with a
//!    database operator token (validated from the per-replica cache) and
//!    with the `ADMIN_OPS_TOKEN` environment secret, interleaved in rounds
//!    so both see the same machine (target: the token within 10%).
//! 2. With `--database-url` (PostgreSQL, one database for two hubs): the
//!    time from revoking a token on hub A (`DELETE
//!    /admin/security/ops-tokens/{id}` sent) to hub B's first refusal of it
//!    (401), hub B having cached the token beforehand (target under 1 s).
//!
//! `cargo run --release -p tests --bin ops-bench -- --seconds 5 --database-url postgres://…`

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

/// The environment secret `Config::for_tests` sets.
const BREAK_GLASS: &str = "test-ops-token";

#[derive(Parser, Clone)]
#[command(about = "Operator-route throughput (database token vs environment secret) and revocation propagation across two hubs")]
struct Args {
    /// `postgres://…` of a fresh database: both hubs use it; SQLite in a
    /// temporary directory when absent (then only the throughput runs).
    #[arg(long)]
    database_url: Option<String>,
    /// Seconds of each throughput measurement.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Rounds of (secret, token) measurements.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Concurrent HTTP clients.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Worker threads of each hub's runtime.
    #[arg(long, default_value_t = 2)]
    server_threads: usize,
    /// Revocations timed across the two hubs.
    #[arg(long, default_value_t = 30)]
    revocations: usize,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Requests/s of `GET {url}` with the operator header `token` for
/// `seconds` with `concurrency` clients (and the refused requests).
async fn throughput(client: &reqwest::Client, url: &str, token: &str, concurrency: usize, seconds: u64) -> (f64, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let (done, errors) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (stop, done, errors, client, url, token) = (stop.clone(), done.clone(), errors.clone(), client.clone(), url.to_string(), token.to_string());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    match client.get(&url).header("x-admin-ops-token", &token).send().await {
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

/// Mints a database operator token on `base`: (id, plaintext).
async fn mint(client: &reqwest::Client, base: &str, label: &str) -> anyhow::Result<(String, String)> {
    let res = client.post(format!("{base}/admin/security/ops-tokens")).header("x-admin-ops-token", BREAK_GLASS).json(&json!({ "label": label })).send().await?;
    let status = res.status();
    let body: Value = res.json().await?;
    ensure!(status.as_u16() == 201, "{status}: {body}");
    Ok((body["data"]["id"].as_str().context("id")?.to_string(), body["data"]["token"].as_str().context("token")?.to_string()))
}

async fn status_of(client: &reqwest::Client, url: &str, token: &str) -> anyhow::Result<u16> {
    Ok(client.get(url).header("x-admin-ops-token", token).send().await?.status().as_u16())
}

/// Starts a hub on `database_url` in a runtime of its own; answers its base URL.
fn start_hub(rt: &tokio::runtime::Runtime, dir: &std::path::Path, database_url: Option<String>) -> anyhow::Result<(hub::Server, String)> {
    let mut config = hub_kernel::config::Config::for_tests(dir.into(), database_url);
    config.listen = "127.0.0.1:0".parse()?;
    config.quic_listen = "off".into();
    let server = rt.block_on(async {
        let state = hub::prepare(config).await?;
        hub::start(state).await
    })?;
    let base = format!("http://{}", server.addr);
    Ok((server, base))
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let (dir_a, dir_b) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let rt_a = tokio::runtime::Builder::new_multi_thread().worker_threads(args.server_threads).enable_all().build()?;
    let (_hub_a, base_a) = start_hub(&rt_a, dir_a.path(), args.database_url.clone())?;
    let backend = if args.database_url.is_some() { "PostgreSQL" } else { "SQLite" };
    println!("hub A on {base_a} ({backend}, {} server threads)", args.server_threads);
    let rt_b = tokio::runtime::Builder::new_multi_thread().worker_threads(args.server_threads).enable_all().build()?;
    let hub_b = match &args.database_url {
        Some(url) => Some(start_hub(&rt_b, dir_b.path(), Some(url.clone()))?),
        None => None,
    };

    let client_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    client_rt.block_on(async move {
        let client = reqwest::Client::builder().pool_max_idle_per_host(args.concurrency * 2).build()?;
        let url = format!("{base_a}/admin/webhooks");
        let (_, token) = mint(&client, &base_a, "bench").await?;
        ensure!(status_of(&client, &url, &token).await? == 200, "the database token is refused");

        println!("\nThroughput of GET /admin/webhooks ({} clients, {} s a measurement, {} rounds):", args.concurrency, args.seconds, args.rounds);
        let (mut secret, mut db) = (Vec::new(), Vec::new());
        for round in 1..=args.rounds {
            let (s, s_err) = throughput(&client, &url, BREAK_GLASS, args.concurrency, args.seconds).await;
            let (d, d_err) = throughput(&client, &url, &token, args.concurrency, args.seconds).await;
            ensure!(s_err == 0 && d_err == 0, "refused requests: secret {s_err}, token {d_err}");
            println!("  round {round}: environment secret {s:.0} req/s, database token {d:.0} req/s ({:+.1}%)", (d / s - 1.0) * 100.0);
            secret.push(s);
            db.push(d);
        }
        let (s, d) = (secret.iter().sum::<f64>() / secret.len() as f64, db.iter().sum::<f64>() / db.len() as f64);
        println!("  mean: environment secret {s:.0} req/s, database token {d:.0} req/s: the token at {:.1}% of the secret (target: within 10%)", d / s * 100.0);

        let Some((_, base_b)) = hub_b.as_ref() else {
            println!("\nRevocation across hubs: skipped (give --database-url of a PostgreSQL database)");
            return anyhow::Ok(());
        };
        let url_b = format!("{base_b}/admin/webhooks");
        let mut lat = Vec::with_capacity(args.revocations);
        for n in 0..args.revocations {
            let (id, token) = mint(&client, &base_a, &format!("revoked-{n}")).await?;
            // Hub B reads and caches the token (for 30 s by default).
            ensure!(status_of(&client, &url_b, &token).await? == 200, "hub B refuses a fresh token");
            ensure!(status_of(&client, &url_b, &token).await? == 200, "hub B refuses a cached token");
            let started = Instant::now();
            let revoke = client.delete(format!("{base_a}/admin/security/ops-tokens/{id}")).header("x-admin-ops-token", BREAK_GLASS).send();
            let (revoked, refused) = tokio::join!(revoke, async {
                loop {
                    if status_of(&client, &url_b, &token).await? == 401 {
                        return anyhow::Ok(started.elapsed());
                    }
                    ensure!(started.elapsed() < Duration::from_secs(60), "hub B still accepts the revoked token after 60 s");
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            });
            ensure!(revoked?.status().as_u16() == 200, "the revocation failed");
            lat.push(refused?.as_secs_f64() * 1000.0);
        }
        lat.sort_by(f64::total_cmp);
        println!(
            "\nRevocation on hub A to refusal on hub B ({} revocations, B polling every ms): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (target < 1000 ms)",
            lat.len(),
            percentile(&lat, 0.5),
            percentile(&lat, 0.99),
            percentile(&lat, 1.0)
        );
        anyhow::Ok(())
    })?;
    Ok(())
}
