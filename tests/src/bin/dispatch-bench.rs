//! Latency of `POST /api/dispatch/routes/optimize` (nearest neighbour, 2-opt,
//! the route stored and its event recorded) for routes of 50 and 200 stops,
//! against one hub on a fresh SQLite database in this process, over
//! loopback HTTP. Each request carries a different set of stops scattered
//! over a city (about 20 km across).
//!
//! `cargo run --release -p tests --bin dispatch-bench -- --requests 500`
//! (`--check` fails unless p99 for 200 stops is under 20 ms)

use std::time::Instant;

use anyhow::{Context, ensure};
use clap::Parser;
use serde_json::{Value, json};

#[derive(Parser)]
#[command(about = "Latency of dispatch route optimisation")]
struct Args {
    /// Measured requests per route size (after a warm-up of 20).
    #[arg(long, default_value_t = 500)]
    requests: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Worker threads of the hub's runtime.
    #[arg(long, default_value_t = 2)]
    server_threads: usize,
    /// Fail unless p99 for 200 stops is under 20 ms.
    #[arg(long)]
    check: bool,
}

/// A small deterministic generator (xorshift64*), so every run sends the
/// same stops.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A request of `n` stops around Amsterdam, from a depot in the middle.
fn request(rng: &mut Rng, n: usize) -> Value {
    let stops: Vec<Value> = (0..n)
        .map(|i| json!({ "stop_id": format!("s{i}"), "lat": 52.28 + rng.unit() * 0.18, "lng": 4.75 + rng.unit() * 0.30, "service_minutes": 3 }))
        .collect();
    json!({ "start": { "lat": 52.37, "lng": 4.90 }, "stops": stops })
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let server_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(args.server_threads).enable_all().build()?;
    let config = hub_kernel::config::Config::for_tests(dir.path().into(), None);
    let server = server_rt.block_on(async {
        let state = hub::prepare(config).await?;
        hub::start(state).await
    })?;
    let base = format!("http://{}", server.addr);
    println!("hub on {base} (SQLite, {} server threads); {} requests per size, {} in flight", args.server_threads, args.requests, args.concurrency);

    let client_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let results = client_rt.block_on(async {
        let client = reqwest::Client::new();
        let signup: Value = client
            .post(format!("{base}/api/auth/signup-tenant"))
            .json(&json!({ "email": "dispatch@example.com", "password": "bench password", "org_name": "Bench", "app_id": "dispatch-bench", "display_name": "Bench", "region": "eu-west-1" }))
            .send()
            .await?
            .json()
            .await?;
        let token = signup["data"]["token"].as_str().context("signup token")?.to_string();
        let url = format!("{base}/api/dispatch/routes/optimize");
        let mut results = Vec::new();
        for n in [50, 200] {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ n as u64);
            let bodies: Vec<Value> = (0..args.requests + 20).map(|_| request(&mut rng, n)).collect();
            let mut saved = 0.0;
            for body in &bodies[..20] {
                let res = client.post(&url).bearer_auth(&token).json(body).send().await?;
                ensure!(res.status() == 201, "optimize answered {}", res.status());
            }
            let chunks: Vec<Vec<Value>> = bodies[20..].chunks(args.requests.div_ceil(args.concurrency)).map(<[Value]>::to_vec).collect();
            let started = Instant::now();
            let mut tasks = Vec::new();
            for chunk in chunks {
                let (client, url, token) = (client.clone(), url.clone(), token.clone());
                tasks.push(tokio::spawn(async move {
                    let mut out = Vec::with_capacity(chunk.len());
                    for body in chunk {
                        let t = Instant::now();
                        let res = client.post(&url).bearer_auth(&token).json(&body).send().await?;
                        ensure!(res.status() == 201, "optimize answered {}", res.status());
                        let route: Value = res.json().await?;
                        out.push((t.elapsed().as_secs_f64() * 1000.0, route["data"]["given_order_km"].as_f64().unwrap_or(0.0) - route["data"]["total_km"].as_f64().unwrap_or(0.0), route["data"]["given_order_km"].as_f64().unwrap_or(1.0)));
                    }
                    anyhow::Ok(out)
                }));
            }
            let mut latencies = Vec::new();
            for t in tasks {
                for (ms, shorter, given) in t.await.expect("client task")? {
                    latencies.push(ms);
                    saved += shorter / given;
                }
            }
            let seconds = started.elapsed().as_secs_f64();
            latencies.sort_by(f64::total_cmp);
            results.push((n, latencies.len() as f64 / seconds, percentile(&latencies, 0.5), percentile(&latencies, 0.99), *latencies.last().unwrap(), 100.0 * saved / latencies.len() as f64));
        }
        anyhow::Ok(results)
    })?;

    println!("\n{:<8} {:>12} {:>9} {:>9} {:>9} {:>22}", "stops", "requests/s", "p50 ms", "p99 ms", "max ms", "shorter than given");
    for (n, rate, p50, p99, max, saved) in &results {
        println!("{n:<8} {rate:>12.0} {p50:>9.2} {p99:>9.2} {max:>9.2} {saved:>21.1}%");
    }
    let p99_200 = results.iter().find(|r| r.0 == 200).map(|r| r.3).unwrap_or(f64::NAN);
    println!("\n200 stops: p99 {p99_200:.2} ms (target: under 20 ms)");
    server_rt.block_on(server.stop())?;
    if args.check {
        ensure!(p99_200 < 20.0, "p99 for 200 stops is {p99_200:.2} ms, not under 20 ms");
    }
    Ok(())
}
