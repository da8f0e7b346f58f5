//! The cost of the hub's per-request metrics, measured in process, where
//! neither the network stack nor a load generator shares the figure.
//!
//! Two hubs run in this process, one with metrics on and one with them off
//! (`HUB_METRICS=false`), each on its own fresh database, each with the
//! gateway benchmark's tenant, keys and flag. Every scenario sends its
//! requests straight into the hub's router (`tower::ServiceExt::oneshot`:
//! the whole gate, routing, handler and the observe layer, no socket),
//! alternating between the two hubs in short batches. The figure is the
//! CPU time of all this process's threads per request (from
//! `/proc/self/task/*/schedstat`, in nanoseconds, which time stolen by the
//! hypervisor does not inflate) and the difference between the settings,
//! taken within each round and then the median over the rounds.
//!
//! The difference is the metrics' cost per request in nanoseconds; divided
//! by a route's CPU time per request over HTTP (the `bench` binary's
//! "hub CPU µs/req" column) it gives the share that comparison would see.
//!
//! `cargo run --release -p tests --bin observe-bench -- --rounds 20`

use std::{path::Path, time::Instant};

use anyhow::{Context, ensure};
use axum::{
    Router,
    body::{Body, to_bytes},
    http::{Request, header},
};
use clap::Parser;
use serde_json::Value;
use tests::{Scenario, median};
use tower::ServiceExt;

#[derive(Parser, Clone)]
#[command(about = "In-process cost of the hub's per-request metrics: CPU ns per request with metrics on and off")]
struct Args {
    /// Requests of one scenario per batch (one batch per setting per round).
    #[arg(long, default_value_t = 4000)]
    batch: usize,
    /// Rounds; the settings take turns within each.
    #[arg(long, default_value_t = 15)]
    rounds: usize,
    /// Tasks sending requests at once (the runtime has as many workers).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// A PostgreSQL server (`postgres://…`): each hub gets a fresh
    /// database there, dropped after. SQLite in a temporary directory when
    /// absent.
    #[arg(long)]
    postgres_url: Option<String>,
    /// Leave metrics on in the second hub too: the comparison then shows
    /// its own noise.
    #[arg(long)]
    noise_floor: bool,
    /// Only the scenarios whose name contains this (for a profile of one).
    #[arg(long)]
    only: Option<String>,
}

/// A request as `oneshot` sends it into the router.
fn request(method: &str, path: &str, bearer: Option<&str>, body: Option<&str>) -> anyhow::Result<Request<Body>> {
    let mut req = Request::builder().method(method).uri(path);
    if let Some(b) = bearer {
        req = req.header(header::AUTHORIZATION, format!("Bearer {b}"));
    }
    Ok(match body {
        Some(body) => req.header(header::CONTENT_TYPE, "application/json").body(Body::from(body.to_owned()))?,
        None => req.body(Body::empty())?,
    })
}

/// The gateway benchmark's tenant and scenarios (`tests::gateway_tenant`),
/// made on one hub through its router.
async fn scenarios(router: &Router) -> anyhow::Result<Vec<Scenario>> {
    let post = async |path: &str, bearer: Option<&str>, body: Value| {
        let res = router.clone().oneshot(request("POST", path, bearer, Some(&body.to_string()))?).await?;
        let status = res.status();
        let body: Value = serde_json::from_slice(&to_bytes(res.into_body(), usize::MAX).await?).unwrap_or(Value::Null);
        ensure!(status.is_success(), "{path}: {status}: {body}");
        Ok(body)
    };
    Ok(tests::gateway_tenant(post).await?.0)
}

/// The CPU time of every thread of this process so far, in nanoseconds
/// (the first field of each thread's `schedstat`: time on a CPU).
fn process_cpu_ns() -> anyhow::Result<u64> {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task")? {
        // A thread may end between the listing and the read.
        if let Ok(stat) = std::fs::read_to_string(task?.path().join("schedstat")) {
            total += stat.split_whitespace().next().context("schedstat")?.parse::<u64>()?;
        }
    }
    Ok(total)
}

/// Sends `batch` requests of `s` to `router` from `threads` tasks at once:
/// CPU ns and wall ns per request.
async fn drive(router: &Router, s: &Scenario, batch: usize, threads: usize) -> anyhow::Result<(f64, f64)> {
    let (cpu, wall) = (process_cpu_ns()?, Instant::now());
    let tasks: Vec<_> = (0..threads)
        .map(|_| {
            let (router, s) = (router.clone(), s.clone());
            tokio::spawn(async move {
                for _ in 0..batch / threads {
                    let res = router.clone().oneshot(request(s.method, s.path, s.bearer.as_deref(), s.body.as_deref())?).await?;
                    ensure!(res.status().is_success(), "{}: {}", s.name, res.status());
                    to_bytes(res.into_body(), usize::MAX).await?;
                }
                Ok(())
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    let n = (batch / threads * threads) as f64;
    Ok(((process_cpu_ns()? - cpu) as f64 / n, wall.elapsed().as_nanos() as f64 / n))
}

/// One hub in this process: its router and scenarios.
struct Hub {
    name: &'static str,
    router: Router,
    scenarios: Vec<Scenario>,
    /// The state, kept so its background tasks and pools live on.
    _state: hub_kernel::state::AppState,
}

async fn start(name: &'static str, dir: &Path, database_url: Option<String>, metrics: bool) -> anyhow::Result<Hub> {
    let mut config = hub_kernel::config::Config::for_tests(dir.into(), database_url);
    config.quic_listen = "off".into();
    config.metrics = metrics;
    let state = hub::prepare(config).await?;
    let router = hub::app(state.clone());
    let scenarios = scenarios(&router).await?;
    Ok(Hub { name, router, scenarios, _state: state })
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    ensure!(args.threads >= 1 && args.batch >= args.threads, "--threads must be at least 1 and at most --batch");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(args.threads).enable_all().build()?;
    rt.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let dirs = (tempfile::tempdir()?, tempfile::tempdir()?);
    let second = if args.noise_floor { ("metrics on (again)", true) } else { ("metrics off", false) };
    let mut databases = Vec::new();
    let mut urls = Vec::new();
    for _ in 0..2 {
        urls.push(match &args.postgres_url {
            Some(server) => {
                let (url, name) = tests::fresh_postgres(server, "hubbench").await?;
                databases.push(name);
                Some(url)
            }
            None => None,
        });
    }
    let (b, a) = (urls.pop().flatten(), urls.pop().flatten());
    let hubs = [start("metrics on", dirs.0.path(), a, true).await?, start(second.0, dirs.1.path(), b, second.1).await?];
    let outcome = measure(&args, &hubs).await;
    drop(hubs);
    if let Some(server) = &args.postgres_url {
        for name in databases {
            tests::drop_postgres(server, &name).await?;
        }
    }
    outcome
}

/// Warms both hubs up, runs the rounds (the hubs take turns, the first one
/// every other round) and prints the table.
async fn measure(args: &Args, hubs: &[Hub; 2]) -> anyhow::Result<()> {
    let count = hubs[0].scenarios.len();
    let chosen = |i: usize| args.only.as_ref().is_none_or(|only| hubs[0].scenarios[i].name.contains(only.as_str()));
    for hub in hubs {
        for (_, s) in hub.scenarios.iter().enumerate().filter(|(i, _)| chosen(*i)) {
            drive(&hub.router, s, args.batch, args.threads).await?;
        }
    }
    // Per scenario, per hub: (CPU ns, wall ns) of each round.
    let mut runs = vec![[Vec::new(), Vec::new()]; count];
    for round in 0..args.rounds {
        for (i, per_hub) in runs.iter_mut().enumerate().filter(|(i, _)| chosen(*i)) {
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for h in order {
                per_hub[h].push(drive(&hubs[h].router, &hubs[h].scenarios[i], args.batch, args.threads).await?);
            }
        }
    }
    let backend = if args.postgres_url.is_some() { "PostgreSQL" } else { "SQLite" };
    println!(
        "{backend}, in process: {} rounds of {} requests per scenario and setting, {} task(s); CPU time of all threads per request",
        args.rounds, args.batch, args.threads
    );
    println!(
        "  {:<32} {:>10} {:>10} {:>12} {:>8} {:>18} {:>10}",
        "scenario",
        hubs[0].name.replace("metrics ", ""),
        hubs[1].name.replace("metrics ", ""),
        "difference",
        "",
        "(rounds, min..max)",
        "wall"
    );
    for (i, [on, off]) in runs.iter().enumerate().filter(|(i, _)| chosen(*i)) {
        let each: Vec<f64> = on.iter().zip(off).map(|(a, b)| a.0 - b.0).collect();
        let (lo, hi) = each.iter().fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
        let share: Vec<f64> = on.iter().zip(off).map(|(a, b)| 100.0 * (a.0 / b.0 - 1.0)).collect();
        let wall: Vec<f64> = on.iter().zip(off).map(|(a, b)| 100.0 * (a.1 / b.1 - 1.0)).collect();
        println!(
            "  {:<32} {:>7.0} ns {:>7.0} ns {:>+9.0} ns {:>+7.1}% {:>18} {:>+9.1}%",
            hubs[0].scenarios[i].name,
            median(on.iter().map(|m| m.0).collect()),
            median(off.iter().map(|m| m.0).collect()),
            median(each),
            median(share),
            format!("({lo:+.0}..{hi:+.0} ns)"),
            median(wall)
        );
    }
    Ok(())
}
