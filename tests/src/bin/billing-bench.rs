//! Billing and search benchmark, against one hub in this process (SQLite in
//! a temporary directory, or the PostgreSQL database `--database-url`
//! names, which should be fresh):
//!
//! 1. Usage ingest: `POST /api/meter/usage` batches of `--batch` events
//!    (every event its own idempotency key, so each is deduplicated against
//!    the keys of the last 24 hours; a tenth of the batches replayed, to
//!    count the repeats too), `--concurrency` clients: events/s.
//!    The events are `--events` (default 1,000,000) over the 30 days before
//!    yesterday, `--assets` assets and `--skus` skus: the tenant of step 2.
//! 2. Invoice generation: `POST /api/billing/invoices` for that tenant over
//!    the 30 days, against a catalog rating every sku (each mode once):
//!    the first generation's time, then a repeat's (the stored invoice).
//! 3. Search: `--documents` (default 100,000) documents written to the
//!    search index, then `GET /api/search?q=` with one or two words drawn
//!    as the documents' words are (Zipf): latency percentiles, one client.
//!
//! `cargo run --release -p tests --bin billing-bench`

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Instant,
};

use anyhow::{Context, ensure};
use chrono::{TimeDelta, Utc};
use clap::Parser;
use serde_json::{Value, json};

#[derive(Parser, Clone)]
#[command(about = "Usage ingest, invoice generation, search latency")]
struct Args {
    /// `postgres://…` of a fresh database; SQLite in a temporary directory when absent.
    #[arg(long)]
    database_url: Option<String>,
    /// Usage events ingested (and invoiced).
    #[arg(long, default_value_t = 1_000_000)]
    events: usize,
    /// Events per ingest request (at most 1000).
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    #[arg(long, default_value_t = 200)]
    assets: usize,
    #[arg(long, default_value_t = 6)]
    skus: usize,
    /// Documents in the search index.
    #[arg(long, default_value_t = 100_000)]
    documents: usize,
    /// Searches measured.
    #[arg(long, default_value_t = 2_000)]
    searches: usize,
    /// Concurrent HTTP clients of the ingest.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Worker threads of the hub's runtime.
    #[arg(long, default_value_t = 2)]
    server_threads: usize,
}

/// xorshift64*: the same data on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() >> 11) as usize % n
    }

    /// A Zipf-like rank in `0..n` (s = 1): rank r with weight 1 / (r + 1).
    fn zipf(&mut self, n: usize) -> usize {
        let h = (n as f64).ln() + 0.5772;
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((u * h).exp() - 1.0).clamp(0.0, n as f64 - 1.0) as usize
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn call(req: reqwest::RequestBuilder) -> anyhow::Result<(u16, Value)> {
    let res = req.send().await?;
    let status = res.status().as_u16();
    Ok((status, res.json().await?))
}

/// A word of the search vocabulary: `w` and its rank in base 26.
fn word(mut rank: usize) -> String {
    let mut w = String::from("w");
    loop {
        w.push((b'a' + (rank % 26) as u8) as char);
        rank /= 26;
        if rank == 0 {
            return w;
        }
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    ensure!((1..=1000).contains(&args.batch), "--batch is 1 to 1000");
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
        let (s, signup) = call(
            client.post(format!("{base}/api/auth/signup-tenant")).json(&json!({
                "email": "billing@bench.example.com", "password": "bench password", "org_name": "bench", "app_id": "bench",
                "display_name": "bench", "region": "eu-west-1"
            })),
        )
        .await?;
        ensure!(s == 201, "signup: {s} {signup}");
        let jwt = signup["data"]["token"].as_str().context("token")?.to_string();
        let tenant = signup["data"]["tenant_id"].as_str().context("tenant")?.to_string();

        // 1. Usage ingest.
        let first_day = (Utc::now() - TimeDelta::days(31)).date_naive();
        let last_day = (Utc::now() - TimeDelta::days(2)).date_naive();
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let batches: Vec<Value> = (0..args.events.div_ceil(args.batch))
            .map(|b| {
                let n = args.batch.min(args.events - b * args.batch);
                let events: Vec<Value> = (0..n)
                    .map(|i| {
                        let day = first_day + TimeDelta::days(rng.below(30) as i64);
                        json!({
                            "asset_id": format!("00000000-0000-7000-8000-{:012}", rng.below(args.assets)),
                            "sku": format!("sku-{}", rng.below(args.skus)),
                            "quantity": 1 + rng.below(100),
                            "occurred_at": format!("{day}T{:02}:{:02}:00Z", rng.below(24), rng.below(60)),
                            "idempotency_key": format!("e-{b}-{i}"),
                        })
                    })
                    .collect();
                json!({ "events": events })
            })
            .collect();
        let replays = batches.len() / 10;
        let batches = Arc::new(batches);
        let next = Arc::new(AtomicU64::new(0));
        let (recorded, repeated) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let started = Instant::now();
        let total = batches.len() + replays;
        let tasks: Vec<_> = (0..args.concurrency)
            .map(|_| {
                let (client, batches, next, recorded, repeated, url, jwt) =
                    (client.clone(), batches.clone(), next.clone(), recorded.clone(), repeated.clone(), format!("{base}/api/meter/usage"), jwt.clone());
                tokio::spawn(async move {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                        if i >= total {
                            return anyhow::Ok(());
                        }
                        // After every batch once, a tenth of them again (all repeats).
                        let body = &batches[if i < batches.len() { i } else { (i - batches.len()) * 10 }];
                        let (s, r) = call(client.post(&url).bearer_auth(&jwt).json(body)).await?;
                        ensure!(s == 200, "ingest: {s} {r}");
                        recorded.fetch_add(r["data"]["recorded"].as_u64().unwrap_or(0), Ordering::Relaxed);
                        repeated.fetch_add(r["data"]["repeated"].as_u64().unwrap_or(0), Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await??;
        }
        let elapsed = started.elapsed().as_secs_f64();
        let (recorded, repeated) = (recorded.load(Ordering::Relaxed), repeated.load(Ordering::Relaxed));
        ensure!(recorded as usize == args.events, "{recorded} of {} events recorded", args.events);
        println!(
            "\nUsage ingest ({} clients, batches of {}): {recorded} events recorded + {repeated} repeats answered in {elapsed:.1} s: {:.0} events/s \
             (target >= 10,000/s)",
            args.concurrency,
            args.batch,
            (recorded + repeated) as f64 / elapsed
        );
        let rollups: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM meter_usage_rollup WHERE tenant_id = $1").bind(&tenant).fetch_one(&state.db.read).await?;
        println!("  {rollups} daily roll-up rows (asset, day, sku)");

        // 2. Invoice generation.
        let modes = [
            json!({ "unit": "call", "mode": "flat_per_call", "price": 2 }),
            json!({ "unit": "unit", "mode": "per_unit", "price": 3 }),
            json!({ "unit": "call", "mode": "tiered_per_call", "tiers": [{ "up_to": 10000, "unit_price": 5 }, { "up_to": 100000, "unit_price": 3 }, { "up_to": null, "unit_price": 1 }] }),
            json!({ "unit": "token", "mode": "passthrough_plus_margin", "price": 7, "margin_pct": 12.5 }),
            json!({ "unit": "month", "mode": "bundled_subscription", "price": 4900 }),
            json!({ "unit": "call", "mode": "free_internal" }),
        ];
        hub_billing::billing::create_catalog(&state.db, "bench", 1, Some("EUR"), "bench-operator").await.map_err(|e| anyhow::anyhow!("{e}"))?;
        for s in 0..args.skus {
            let rate: hub_billing::billing::NewRate = serde_json::from_value(modes[s % modes.len()].clone())?;
            hub_billing::billing::put_rate(&state.db, "bench", &format!("sku-{s}"), &rate, "bench-operator").await.map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        hub_billing::billing::set_catalog_status(&state.db, "bench", "active", "bench-operator").await.map_err(|e| anyhow::anyhow!("{e}"))?;
        let invoice = json!({ "catalog": "bench", "period_start": first_day.to_string(), "period_end": last_day.to_string() });
        let url = format!("{base}/api/billing/invoices");
        let at = Instant::now();
        let (s, first) = call(client.post(&url).bearer_auth(&jwt).json(&invoice)).await?;
        let generated = at.elapsed().as_secs_f64() * 1000.0;
        ensure!(s == 201, "invoice: {s} {first}");
        let at = Instant::now();
        let (s, again) = call(client.post(&url).bearer_auth(&jwt).json(&invoice)).await?;
        let repeat = at.elapsed().as_secs_f64() * 1000.0;
        ensure!(s == 200 && again["data"]["invoice_id"] == first["data"]["invoice_id"], "repeat: {s} {again}");
        let calls: i64 = first["data"]["line_items"].as_array().context("lines")?.iter().filter_map(|l| l["calls"].as_i64()).sum();
        ensure!(calls as usize == args.events, "the invoice counts {calls} calls, not {}", args.events);
        println!(
            "\nInvoice over {} events ({} lines, total {} {}): generated in {generated:.1} ms (target < 2000 ms); the repeat answered in {repeat:.1} ms",
            args.events,
            first["data"]["line_items"].as_array().map_or(0, Vec::len),
            first["data"]["total"],
            first["data"]["currency"].as_str().unwrap_or_default()
        );

        // 3. Search.
        let vocabulary = 20_000;
        let loaded = Instant::now();
        let mut tx = state.db.begin().await?;
        let now = hub_kernel::db::now();
        let chunk = 500;
        for start in (0..args.documents).step_by(chunk) {
            let n = chunk.min(args.documents - start);
            let values: Vec<String> = (0..n).map(|i| format!("($1, 'content_item', ${}, ${}, ${}, $2)", 3 + 3 * i, 4 + 3 * i, 5 + 3 * i)).collect();
            let sql = format!("INSERT INTO search_document (tenant_id, kind, ref_id, title, body, updated_at) VALUES {}", values.join(", "));
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(&tenant).bind(&now);
            for d in start..start + n {
                let title: Vec<String> = (0..4).map(|_| word(rng.zipf(vocabulary))).collect();
                let body: Vec<String> = (0..40).map(|_| word(rng.zipf(vocabulary))).collect();
                q = q.bind(format!("00000000-0000-7000-9000-{d:012}")).bind(title.join(" ")).bind(body.join(" "));
            }
            q.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        if args.database_url.is_some() {
            sqlx::query("ANALYZE search_document").execute(state.db.writer()).await?;
        }
        println!("\nSearch: {} documents (4-word titles, 40-word bodies, {vocabulary} words, Zipf) indexed in {:.1} s", args.documents, loaded.elapsed().as_secs_f64());
        let url = format!("{base}/api/search");
        let mut lat = Vec::with_capacity(args.searches);
        let mut hits = 0i64;
        for i in 0..args.searches {
            let q = if i % 2 == 0 { word(rng.zipf(vocabulary)) } else { format!("{} {}", word(rng.zipf(vocabulary)), word(rng.zipf(vocabulary))) };
            let at = Instant::now();
            let (s, r) = call(client.get(&url).bearer_auth(&jwt).query(&[("q", q.as_str())])).await?;
            lat.push(at.elapsed().as_secs_f64() * 1000.0);
            ensure!(s == 200, "search: {s} {r}");
            hits += r["total"].as_i64().unwrap_or(0);
        }
        lat.sort_by(f64::total_cmp);
        println!(
            "  {} searches (one or two words, 10 hits by relevance with the total), mean {:.0} matches: p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            args.searches,
            hits as f64 / args.searches as f64,
            percentile(&lat, 0.5),
            percentile(&lat, 0.9),
            percentile(&lat, 0.99),
            percentile(&lat, 1.0)
        );
        anyhow::Ok(())
    })?;
    server_rt.block_on(server.stop())?;
    Ok(())
}
