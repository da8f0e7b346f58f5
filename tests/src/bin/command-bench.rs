//! The robot command benchmark: latency from `POST /api/commands` to the
//! handler starting (p50, p99) with many agents connected over QUIC, and
//! the hub's resident memory with many idle agents connected.
//!
//! The hub runs as its own process (the `hub` binary beside this one, so a
//! release build measures a release hub); the agents are simulated in this
//! process with the edge agent's own QUIC client, and their "handler start"
//! is the moment the command frame arrives, before any handler process
//! would be spawned. Everything stays on loopback.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::Context;
use clap::Parser;
use edge_agent::client;
use protocol::command::{Ack, AgentFrame, HubFrame};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use edge_agent::protocol;
use tests::{HubProcess, HubTarget, MachineTicks, median, ms, percentile};

#[derive(Parser)]
#[command(about = "Robot command path benchmark")]
struct Args {
    /// Agents connected while latency is measured.
    #[arg(long, default_value_t = 1000)]
    agents: usize,
    /// Agents connected in all (the measured ones included) when the hub's
    /// memory is read; at most `--agents` connects no more.
    #[arg(long, default_value_t = 10_000)]
    idle_agents: usize,
    /// Commands timed per run.
    #[arg(long, default_value_t = 2000)]
    samples: usize,
    /// Timed runs with the same connected fleet, one after another: each
    /// run's figures are printed, then their median and worst.
    #[arg(long, default_value_t = 1)]
    runs: usize,
    #[command(flatten)]
    target: HubTarget,
}

type Waiters = Arc<Mutex<HashMap<String, oneshot::Sender<Instant>>>>;

/// One timed run: the latencies to the agent and to the answer, sorted,
/// and the share of the machine's CPU time stolen by its hypervisor.
struct Run {
    lat: Vec<Duration>,
    answered: Vec<Duration>,
    steal: f64,
}

async fn post(client: &reqwest::Client, base: &str, path: &str, token: &str, body: Value) -> anyhow::Result<Value> {
    let res = client.post(format!("{base}{path}")).bearer_auth(token).json(&body).send().await?;
    let status = res.status();
    let v: Value = res.json().await?;
    anyhow::ensure!(status.is_success(), "{path}: {status} {v}");
    Ok(v)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.agents >= 1 && args.samples >= 1 && args.runs >= 1, "--agents, --samples and --runs must be at least 1");
    let fleet = args.idle_agents.max(args.agents);
    let quic_port = std::net::UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port();
    let hub = HubProcess::start(&args.target.binary()?, &format!("127.0.0.1:{quic_port}"), args.target.database()).await?;
    let base = hub.base.clone();
    let http = reqwest::Client::new();
    let rss_start = hub.rss_kib()?;

    let signup = http
        .post(format!("{base}/api/auth/signup-tenant"))
        .json(&json!({ "email": "bench@example.com", "password": "correct horse battery", "org_name": "Bench", "app_id": "bench", "display_name": "B", "region": "local" }))
        .send()
        .await?
        .json::<Value>()
        .await?;
    let token = signup["data"]["token"].as_str().context("signup token")?.to_string();

    // Assets and credentials, created over HTTP a few at a time.
    eprintln!("creating {fleet} assets and credentials...");
    let mut robots: Vec<(String, String)> = Vec::with_capacity(fleet);
    let mut pending = tokio::task::JoinSet::new();
    for i in 0..fleet {
        let (http, base, token) = (http.clone(), base.clone(), token.clone());
        pending.spawn(async move {
            let a = post(&http, &base, "/api/assets", &token, json!({ "display_name": format!("bot-{i}") })).await?;
            let id = a["data"]["asset_id"].as_str().context("asset id")?.to_string();
            let c = post(&http, &base, &format!("/api/assets/{id}/credentials"), &token, json!({})).await?;
            anyhow::Ok((id, c["data"]["credential"].as_str().context("credential")?.to_string()))
        });
        if pending.len() >= 16 {
            robots.push(pending.join_next().await.context("task")???);
        }
    }
    while let Some(r) = pending.join_next().await {
        robots.push(r??);
    }

    // Several client endpoints (UDP sockets) share the simulated fleet.
    let cert = hub.data_dir().join("quic-cert.pem");
    let endpoints: Vec<quinn::Endpoint> = (0..8).map(|_| client::endpoint(&cert)).collect::<anyhow::Result<_>>()?;
    let addr: std::net::SocketAddr = format!("127.0.0.1:{quic_port}").parse()?;
    let waiters: Waiters = Arc::default();

    // A bounded number of handshakes in flight: a burst of thousands
    // overflows the loopback socket buffers and measures retransmission
    // timers instead of the hub.
    let gate = Arc::new(tokio::sync::Semaphore::new(64));
    let connect = |from: usize, to: usize| {
        let mut set = tokio::task::JoinSet::new();
        for (i, (asset, cred)) in robots[from..to].iter().enumerate() {
            let ep = endpoints[(from + i) % endpoints.len()].clone();
            let (asset, cred, gate) = (asset.clone(), cred.clone(), gate.clone());
            set.spawn(async move {
                let _permit = gate.acquire_owned().await.expect("semaphore open");
                client::open(&ep, addr, "localhost", &asset, &cred).await.map(|s| (asset, s))
            });
        }
        set
    };

    eprintln!("connecting {} agents...", args.agents);
    let mut live = Vec::new();
    let mut set = connect(0, args.agents);
    while let Some(r) = set.join_next().await {
        let (asset, s) = r?.map_err(|e| anyhow::anyhow!("{e}"))?;
        live.push(s.connection.clone());
        let waiters = waiters.clone();
        let (mut sender, mut receiver) = (s.sender, s.receiver);
        tokio::spawn(async move {
            while let Ok(Some(frame)) = receiver.recv().await {
                if let HubFrame::Command(c) = frame {
                    let at = Instant::now();
                    if let Some(tx) = waiters.lock().unwrap().remove(&asset) {
                        let _ = tx.send(at);
                    }
                    let ack = Ack { command_id: c.command_id, ok: true, code: None, message: None, data: None };
                    if sender.send(&AgentFrame::Ack(ack)).await.is_err() {
                        break;
                    }
                }
            }
        });
    }
    let rss_agents = hub.rss_kib()?;
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Per sample: POST to the agent receiving the command, and POST to the
    // hub's answer (the commit and the answer's way back), which splits
    // the time between the transaction and the delivery.
    let mut runs = Vec::with_capacity(args.runs);
    for run in 0..args.runs {
        eprintln!("run {}: timing {} commands...", run + 1, args.samples);
        let (mut lat, mut answered) = (Vec::with_capacity(args.samples), Vec::with_capacity(args.samples));
        let machine_before = MachineTicks::now()?;
        for i in 0..args.samples {
            let asset = &robots[(run * args.samples + i) % args.agents].0;
            let (tx, rx) = oneshot::channel();
            waiters.lock().unwrap().insert(asset.clone(), tx);
            let t0 = Instant::now();
            post(&http, &base, "/api/commands", &token, json!({ "type": "bench", "risk_class": "low", "target_asset_id": asset })).await?;
            answered.push(t0.elapsed());
            let at = tokio::time::timeout(Duration::from_secs(10), rx).await.context("a command never reached its agent")??;
            lat.push(at.saturating_duration_since(t0));
        }
        let steal = MachineTicks::now()?.stolen_percent_since(&machine_before);
        lat.sort();
        answered.sort();
        runs.push(Run { lat, answered, steal });
    }

    eprintln!("connecting {} more idle agents...", fleet - args.agents);
    let mut set = connect(args.agents, fleet);
    let mut idle = Vec::new();
    while let Some(r) = set.join_next().await {
        let (_, s) = r?.map_err(|e| anyhow::anyhow!("{e}"))?;
        idle.push(s);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_idle = hub.rss_kib()?;
    let total = live.len() + idle.len();

    println!("robot command benchmark (loopback, hub pid {}, {})", hub.pid(), args.target.backend());
    println!("  latency POST /api/commands -> handler start, {} samples per run, {} agents connected:", args.samples, args.agents);
    for (n, r) in runs.iter().enumerate() {
        println!(
            "    run {}: p50 {:.3} ms   p99 {:.3} ms   max {:.3} ms   (answered, committed: p50 {:.3} ms   p99 {:.3} ms)   CPU stolen by the hypervisor {:.1}%",
            n + 1,
            ms(percentile(&r.lat, 0.50)),
            ms(percentile(&r.lat, 0.99)),
            ms(*r.lat.last().expect("samples")),
            ms(percentile(&r.answered, 0.50)),
            ms(percentile(&r.answered, 0.99)),
            r.steal
        );
    }
    let p99s: Vec<f64> = runs.iter().map(|r| ms(percentile(&r.lat, 0.99))).collect();
    let median_p99 = median(p99s.clone());
    if runs.len() > 1 {
        let worst = p99s.iter().copied().fold(0.0, f64::max);
        println!("    p99 over the {} runs: median {median_p99:.3} ms, worst {worst:.3} ms (target: under 5 ms)", runs.len());
    }
    println!(
        "  hub resident memory: {:.1} MiB at start, {:.1} MiB with {} agents, {:.1} MiB with {} idle agents connected",
        rss_start as f64 / 1024.0,
        rss_agents as f64 / 1024.0,
        args.agents,
        rss_idle as f64 / 1024.0,
        total
    );
    println!(
        "{}",
        json!({
            "p50_ms": runs.iter().map(|r| ms(percentile(&r.lat, 0.50))).collect::<Vec<f64>>(), "p99_ms": p99s, "median_p99_ms": median_p99,
            "answered_p99_ms": runs.iter().map(|r| ms(percentile(&r.answered, 0.99))).collect::<Vec<f64>>(),
            "steal_percent": runs.iter().map(|r| r.steal).collect::<Vec<f64>>(),
            "agents": args.agents, "idle_agents": total, "rss_mib_idle": rss_idle as f64 / 1024.0,
        })
    );
    for c in live {
        c.close(0u32.into(), b"done");
    }
    drop(idle);
    drop(hub);
    Ok(())
}
