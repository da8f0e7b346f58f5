//! Webhook benchmark. Starts a hub in this process (a fresh SQLite
//! database, or `--database-url postgres://...`) and a receiver on
//! loopback answering 204, then measures:
//! 1. the latency of an event-emitting write (`POST /api/workflows/definitions`)
//!    with no endpoint, then with `--endpoints` endpoints subscribed to it:
//!    the write's own cost (this hub runs no delivery worker), then on a
//!    hub with its worker on, the deliveries made meanwhile (on this 2-core
//!    machine they compete for the cores and, on SQLite, the writer);
//! 2. signed deliveries per second: a backlog of `--events` × `--endpoints`
//!    deliveries, drained by that hub's worker.
//!
//! `cargo run --release -p tests --bin webhook-bench -- --events 2000`

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, ensure};
use clap::Parser;
use serde_json::{Value, json};

#[derive(Parser)]
#[command(about = "Webhook delivery throughput and the cost of subscriptions on writes")]
struct Args {
    /// `postgres://...` for PostgreSQL (a fresh database it may fill);
    /// a new SQLite file when absent.
    #[arg(long)]
    database_url: Option<String>,
    /// Events whose deliveries make the backlog.
    #[arg(long, default_value_t = 2000)]
    events: usize,
    /// Endpoints subscribed to every event.
    #[arg(long, default_value_t = 10)]
    endpoints: usize,
    /// Writes timed in each latency phase (sequential, one client).
    #[arg(long, default_value_t = 300)]
    writes: usize,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn writes(client: &reqwest::Client, base: &str, token: &str, prefix: &str, n: usize) -> anyhow::Result<Vec<f64>> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        let r = client
            .post(format!("{base}/api/workflows/definitions"))
            .bearer_auth(token)
            .json(&json!({ "name": format!("{prefix}-{i}"), "step_specs": [{ "name": "one" }] }))
            .send()
            .await?;
        ensure!(r.status() == 201, "a write failed: {}", r.text().await?);
        out.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    out.sort_by(f64::total_cmp);
    Ok(out)
}

/// `n` writes of each of two tenants, alternating, so both see the same
/// database and machine: (the quiet tenant's, the busy tenant's).
async fn paired(client: &reqwest::Client, base: &str, quiet: &str, busy: &str, prefix: &str, n: usize) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let (mut q, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        q.extend(writes(client, base, quiet, &format!("{prefix}-q{i}"), 1).await?);
        b.extend(writes(client, base, busy, &format!("{prefix}-b{i}"), 1).await?);
    }
    q.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    Ok((q, b))
}

async fn signup(client: &reqwest::Client, base: &str, who: &str) -> anyhow::Result<(String, String)> {
    let signup: Value = client
        .post(format!("{base}/api/auth/signup-tenant"))
        .json(&json!({ "email": format!("{who}@example.com"), "password": "bench password", "org_name": who, "app_id": who, "display_name": "H", "region": "eu" }))
        .send()
        .await?
        .json()
        .await?;
    let token = signup["data"]["token"].as_str().context("signup token")?.to_string();
    let tenant = signup["data"]["tenant_id"].as_str().context("tenant")?.to_string();
    Ok((token, tenant))
}

async fn pending(pool: &sqlx::AnyPool) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar("SELECT COUNT(*) FROM webhook_delivery WHERE status = 'pending'").fetch_one(pool).await?)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async move {
        let received = Arc::new(AtomicU64::new(0));
        let counter = received.clone();
        let receiver = axum::Router::new().route(
            "/hook",
            axum::routing::post(move || {
                let c = counter.clone();
                async move {
                    c.fetch_add(1, Ordering::Relaxed);
                    axum::http::StatusCode::NO_CONTENT
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let hook = format!("http://{}/hook", listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, receiver).await });

        let mut config = hub_kernel::config::Config::for_tests(dir.path().into(), args.database_url.clone());
        config.quic_listen = "off".into();
        config.webhook_worker = false;
        let state = hub::prepare(config.clone()).await?;
        let backend = if args.database_url.is_some() { "PostgreSQL" } else { "SQLite" };
        let server = hub::start(state).await?;
        let base = format!("http://{}", server.addr);
        let client = reqwest::Client::new();
        // The busy tenant subscribes endpoints; the quiet one none.
        let (token, tenant) = signup(&client, &base, "hooks").await?;
        let (quiet_token, _) = signup(&client, &base, "quiet").await?;
        println!("hub on {base} ({backend}); receiver {hook}");

        // The backlog's events, before any endpoint exists; the first
        // writes also warm the hub up.
        writes(&client, &base, &token, "warm", 50).await?;
        writes(&client, &base, &quiet_token, "warm", 50).await?;
        let backlog_events = writes(&client, &base, &token, "backlog", args.events).await?;
        drop(backlog_events);

        for i in 0..args.endpoints {
            let r = client
                .post(format!("{base}/api/webhooks/endpoints"))
                .bearer_auth(&token)
                .json(&json!({ "url": hook, "event_types": ["workflow.*"], "description": format!("bench {i}") }))
                .send()
                .await?;
            ensure!(r.status() == 201, "creating an endpoint: {}", r.text().await?);
        }
        let (quiet, subscribed) = paired(&client, &base, &quiet_token, &token, "subscribed", args.writes).await?;
        // The delivering hub: the same database, its worker on (the first
        // stops: SQLite takes one hub).
        server.stop().await?;
        let mut delivering = config.clone();
        delivering.webhook_worker = true;
        delivering.database_url = Some(match &args.database_url {
            Some(url) => url.clone(),
            None => format!("sqlite://{}?mode=rwc", dir.path().join("hub.db").display()),
        });
        let state = hub::prepare(delivering).await?;
        let pool = state.db.writer().clone();
        let deliverer = hub::start(state).await?;
        let base = format!("http://{}", deliverer.addr);
        let (quiet_meanwhile, delivered_meanwhile) = paired(&client, &base, &quiet_token, &token, "delivering", args.writes).await?;
        let deadline = Instant::now() + Duration::from_secs(120);
        while pending(&pool).await? > 0 {
            ensure!(Instant::now() < deadline, "the subscribed writes' deliveries did not drain");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        println!("\nevent-emitting write (POST /api/workflows/definitions), {} sequential writes of each tenant, alternating:", args.writes);
        println!("{:<28} {:>9} {:>9} {:>9}", "", "p50 ms", "p90 ms", "mean ms");
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let subscribed_name = format!("{} endpoints subscribed", args.endpoints);
        let delivering_name = format!("{} endpoints, delivering", args.endpoints);
        for (name, v) in [
            ("no endpoint", &quiet),
            (&subscribed_name, &subscribed),
            ("no endpoint, hub delivering", &quiet_meanwhile),
            (&delivering_name, &delivered_meanwhile),
        ] {
            println!("{:<28} {:>9.3} {:>9.3} {:>9.3}", name, percentile(v, 0.5), percentile(v, 0.9), mean(v));
        }
        let added = |v: &[f64], base: &[f64]| (100.0 * (percentile(v, 0.5) / percentile(base, 0.5) - 1.0), 100.0 * (mean(v) / mean(base) - 1.0));
        let (p50, avg) = added(&subscribed, &quiet);
        println!("added latency of the write with {} endpoints: p50 {p50:+.1}%, mean {avg:+.1}% (target: under 10%)", args.endpoints);
        let (p50, avg) = added(&delivered_meanwhile, &quiet_meanwhile);
        println!("  while the hub delivers (both tenants' writes slowed by it): p50 {p50:+.1}%, mean {avg:+.1}%");

        // The backlog: the earlier events' deliveries to every endpoint, made
        // due at once, then drained by the worker.
        let before = received.load(Ordering::Relaxed);
        let uuid = if backend == "PostgreSQL" {
            "gen_random_uuid()::text"
        } else {
            "lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-a' || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)))"
        };
        let now = hub_kernel::db::now();
        let sql = format!(
            "INSERT INTO webhook_delivery (delivery_id, tenant_id, endpoint_id, entry_id, event_type, status, attempts, next_attempt_at, created_at) \
             SELECT {uuid}, a.tenant_id, e.endpoint_id, a.entry_id, a.event_type, 'pending', 0, $1, $1 FROM audit_entry a JOIN webhook_endpoint e ON e.tenant_id = a.tenant_id \
             WHERE a.tenant_id = $2 AND a.event_type = 'workflow.definition.registered.v1' ON CONFLICT (endpoint_id, entry_id) DO NOTHING"
        );
        let started = Instant::now();
        let queued = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(&now).bind(&tenant).execute(&pool).await?.rows_affected();
        let deadline = Instant::now() + Duration::from_secs(600);
        while pending(&pool).await? > 0 {
            ensure!(Instant::now() < deadline, "the backlog did not drain");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let seconds = started.elapsed().as_secs_f64();
        let delivered = received.load(Ordering::Relaxed) - before;
        let failed: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM webhook_delivery WHERE status <> 'succeeded'").fetch_one(&pool).await?;
        println!(
            "\nbacklog of {queued} deliveries ({} events × {} endpoints): drained in {seconds:.2} s, {:.0} signed deliveries/s ({delivered} received, {failed} not succeeded) (target on SQLite: at least 2,000/s)",
            queued / args.endpoints.max(1) as u64,
            args.endpoints,
            queued as f64 / seconds
        );
        deliverer.stop().await?;
        anyhow::Ok(())
    })
}
