//! The login flood benchmark: the hub's resident memory and answers while
//! many clients send wrong passwords at once, and the latency of a correct
//! login from another address meanwhile.
//!
//! The hub runs as its own process (the `hub` binary beside this one). The
//! flood's clients each connect from their own loopback address
//! (127.10.x.y) and guess passwords of random unknown emails, the case the
//! per-account throttle cannot stop and only the bound on password hashes
//! in flight keeps memory flat; each address gets its free failures, then
//! 429s. Every two seconds a person logs in correctly from 127.0.0.2.
//! Everything stays on loopback and stops after `--seconds`.

use std::{
    collections::BTreeMap,
    net::{IpAddr, Ipv4Addr},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::Context;
use clap::Parser;
use serde_json::json;
use tests::{HubProcess, HubTarget, ms, percentile};

#[derive(Parser)]
#[command(about = "Wrong-password flood: hub memory, refusals, and a correct login meanwhile")]
struct Args {
    /// Length of the flood.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Concurrent flooding clients, each from its own loopback address.
    #[arg(long, default_value_t = 500)]
    concurrency: usize,
    #[command(flatten)]
    target: HubTarget,
    /// Exit non-zero unless peak memory stays under 300 MiB and every
    /// correct login succeeds within 1 s.
    #[arg(long)]
    check: bool,
}

fn client_from(addr: IpAddr) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder().local_address(Some(addr)).timeout(Duration::from_secs(30)).build()?)
}

#[derive(Default)]
struct Tally {
    by_status: BTreeMap<u16, u64>,
    refusal_latency: Vec<Duration>,
    errors: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.concurrency <= 60_000, "--concurrency is at most 60000 (one loopback address each)");
    let hub = HubProcess::start(&args.target.binary()?, "off", args.target.database()).await?;
    let base = hub.base.clone();
    let http = reqwest::Client::new();
    let signup = http
        .post(format!("{base}/api/auth/signup-tenant"))
        .json(&json!({ "email": "real@example.com", "password": "correct horse battery", "org_name": "Flood", "app_id": "flood", "display_name": "R", "region": "local" }))
        .send()
        .await?;
    anyhow::ensure!(signup.status() == 201, "signup: {}", signup.status());
    let rss_start = hub.rss_kib()?;

    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let tally = Arc::new(Mutex::new(Tally::default()));
    let mut tasks = Vec::new();
    for i in 0..args.concurrency {
        let addr = IpAddr::V4(Ipv4Addr::new(127, 10, (i / 250) as u8, (i % 250 + 1) as u8));
        let client = client_from(addr)?;
        let url = format!("{base}/api/auth/login");
        let tally = tally.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                n += 1;
                let body = json!({ "email": format!("nobody-{i}-{n}@example.com"), "password": "a wrong guess" });
                let sent = Instant::now();
                let res = client.post(&url).json(&body).send().await;
                let took = sent.elapsed();
                let code = match res {
                    // No back-off on a refusal: a flood ignores Retry-After.
                    Ok(r) => {
                        let code = r.status().as_u16();
                        let _ = r.bytes().await;
                        Some(code)
                    }
                    Err(_) => None,
                };
                let mut t = tally.lock().unwrap();
                match code {
                    Some(code) => {
                        *t.by_status.entry(code).or_default() += 1;
                        if code == 429 || code == 503 {
                            t.refusal_latency.push(took);
                        }
                    }
                    None => t.errors += 1,
                }
            }
        }));
    }

    // A correct login from another address every two seconds.
    let real = client_from(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)))?;
    let logins = tokio::spawn({
        let url = format!("{base}/api/auth/login");
        async move {
            let mut out = Vec::new();
            tokio::time::sleep(Duration::from_secs(2)).await;
            while Instant::now() + Duration::from_secs(2) < deadline {
                let sent = Instant::now();
                let status = real
                    .post(&url)
                    .json(&json!({ "email": "real@example.com", "password": "correct horse battery" }))
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
                    .unwrap_or(0);
                out.push((status, sent.elapsed()));
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            out
        }
    });

    let mut peak = rss_start;
    while Instant::now() < deadline {
        peak = peak.max(hub.rss_kib()?);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for t in tasks {
        t.await?;
    }
    let logins = logins.await?;
    let rss_end = hub.rss_kib()?;

    let mut t = Arc::try_unwrap(tally).ok().context("tally still shared")?.into_inner().unwrap();
    t.refusal_latency.sort();
    let total: u64 = t.by_status.values().sum();
    println!("login flood: {} clients from {} addresses, {} s, hub on {}", args.concurrency, args.concurrency, args.seconds, args.target.backend());
    println!("requests: {total} ({:.0}/s), by status: {:?}, transport errors: {}", total as f64 / args.seconds as f64, t.by_status, t.errors);
    println!("429/503 answers: p50 {:.1} ms, p99 {:.1} ms", ms(percentile(&t.refusal_latency, 0.5)), ms(percentile(&t.refusal_latency, 0.99)));
    println!("hub resident memory: start {} MiB, peak {} MiB, end {} MiB", rss_start / 1024, peak / 1024, rss_end / 1024);
    let worst = logins.iter().map(|(_, d)| *d).max().unwrap_or_default();
    let failed = logins.iter().filter(|(s, _)| *s != 200).count();
    println!("correct logins from 127.0.0.2: {} tried, {} failed, slowest {:.0} ms", logins.len(), failed, ms(worst));
    if args.check {
        anyhow::ensure!(peak < 300 * 1024, "peak memory {} MiB is not under 300 MiB", peak / 1024);
        anyhow::ensure!(failed == 0 && worst < Duration::from_secs(1), "a correct login failed or took 1 s or more");
        anyhow::ensure!(!logins.is_empty(), "no correct login was tried");
    }
    Ok(())
}
