//! The CRM benchmark (a hub on its own runtime in this process, driven over
//! loopback HTTP): a write-heavy mix (create a contact, log two calls, one
//! missed, each with its audit events in the same transaction, then read
//! the contact's timeline), and list latency with `--tenant-rows` contacts
//! and calls in the caller's tenant and `--other-rows` in ten other
//! tenants, seeded with bulk SQL; on SQLite and, given `--postgres-url`, on
//! a fresh database of that PostgreSQL server (dropped after).
//!
//! `cargo run --release -p tests --bin crm-bench -- --seconds 10 --postgres-url postgres://…/postgres`

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use clap::Parser;

#[path = "../bench_crm.rs"]
mod crm;

#[derive(Parser, Clone)]
#[command(about = "CRM write mix and list latency over seeded rows")]
struct Args {
    /// Seconds each scenario runs.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Concurrent client connections of the write mix.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Worker threads of the hub's runtime.
    #[arg(long, default_value_t = 2)]
    server_threads: usize,
    /// Also on a fresh database of this PostgreSQL server (dropped after).
    #[arg(long)]
    postgres_url: Option<String>,
    /// Contacts (and calls) seeded in the caller's tenant.
    #[arg(long, default_value_t = 100_000)]
    tenant_rows: u64,
    /// Contacts (and calls) seeded in ten other tenants together.
    #[arg(long, default_value_t = 1_000_000)]
    other_rows: u64,
    /// Concurrent clients of the list scenarios.
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
        let (url, name) = rt.block_on(tests::fresh_postgres(admin, "crmbench"))?;
        let result = crm::bench("PostgreSQL", Some(url), crm_args);
        rt.block_on(tests::drop_postgres(admin, &name))?;
        result?;
    }
    Ok(())
}
