//! Audit benchmark: durable appends per second through HTTP (many clients;
//! one pool and many pools) and through the in-process group-commit path,
//! on SQLite and (with `HUB_TEST_POSTGRES_URL`) PostgreSQL, then the
//! streaming verification of a chain of a million entries with its peak
//! memory. Run in release: `cargo bench -p hub --bench audit`.
//!
//! Settings (environment): `BENCH_SECONDS` per measurement (default 5),
//! `BENCH_CLIENTS` concurrent HTTP clients (64), `BENCH_CALLERS`
//! concurrent in-process callers (512), `BENCH_VERIFY_ENTRIES`
//! chain length for verification (1000000), `BENCH_ONLY` = `http`,
//! `inprocess` or `verify` to run one part.

use std::{
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use hub_kernel::{audit::appender::OwnedEvent, state::AppState};
use serde_json::{Value, json};

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn only(part: &str) -> bool {
    std::env::var("BENCH_ONLY").map_or(true, |o| o == part)
}

/// A kB figure from /proc/self/status (`VmHWM`, `VmRSS`).
fn proc_status_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(field)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

/// Resets the peak-RSS mark so the next `VmHWM` covers only what follows.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Creates a database of the benchmark's own; returns its URL and name.
async fn fresh_postgres(admin: &str) -> (String, String) {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(admin).await.expect("connect to PostgreSQL");
    let name = format!("hubbench_{}", uuid::Uuid::now_v7().simple());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await.expect("create database");
    let (base, query) = admin.split_once('?').map_or((admin.to_string(), String::new()), |(b, q)| (b.to_string(), format!("?{q}")));
    let root = &base[..base.rfind('/').filter(|&i| i > base.find("://").map_or(0, |j| j + 2)).unwrap_or(base.len())];
    (format!("{root}/{name}{query}"), name)
}

/// Drops the benchmark's database (its pools may still hold connections).
async fn drop_postgres(admin: &str, name: &str) {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(admin).await.expect("connect to PostgreSQL");
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))).execute(&mut conn).await.expect("drop database");
}

struct Hub {
    state: AppState,
    server: Option<hub::Server>,
    base: String,
    _dir: tempfile::TempDir,
}

async fn start(database_url: Option<String>) -> Hub {
    let dir = tempfile::tempdir().unwrap();
    let mut config = hub_kernel::config::Config::for_tests(PathBuf::from(dir.path()), database_url);
    config.dev = true;
    let state = hub::prepare(config).await.expect("prepare hub");
    let server = hub::start(state.clone()).await.expect("start hub");
    let base = format!("http://{}", server.addr);
    Hub { state, server: Some(server), base, _dir: dir }
}

/// Signs a tenant up; returns (tenant_id, token).
async fn tenant(base: &str, n: usize) -> (String, String) {
    let body: Value = reqwest::Client::new()
        .post(format!("{base}/api/auth/signup-tenant"))
        .json(&json!({ "email": format!("bench{n}@example.com"), "password": "bench password", "org_name": "B", "app_id": format!("bench-{n}"), "display_name": "B", "region": "r" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    (body["data"]["tenant_id"].as_str().unwrap().to_string(), body["data"]["token"].as_str().unwrap().to_string())
}

/// Appends through HTTP from `clients` tasks for `secs`; `pools` spreads
/// the clients over that many chains. Returns appends answered 201 per second.
async fn http_rate(base: &str, token: &str, clients: usize, pools: usize, secs: u64) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let client = reqwest::Client::builder().pool_max_idle_per_host(clients).build().unwrap();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (done, stop, client, url, token) = (done.clone(), stop.clone(), client.clone(), format!("{base}/api/audit/append"), token.to_string());
        tasks.push(tokio::spawn(async move {
            let pool = (c % pools) as i64;
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let res = client
                    .post(&url)
                    .bearer_auth(&token)
                    .json(&json!({ "pool_index": pool, "event_type": "crm.call.logged.v1", "payload": { "client": c, "i": i, "note": "benchmark entry" } }))
                    .send()
                    .await
                    .expect("append request");
                assert_eq!(res.status(), 201, "{}", res.text().await.unwrap_or_default());
                let _ = res.bytes().await;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

fn event(tenant: &str, pool: i64, i: u64) -> OwnedEvent {
    OwnedEvent {
        tenant_id: tenant.to_string(),
        pool_index: pool,
        event_type: "crm.call.logged.v1".into(),
        actor_kind: "service".into(),
        actor_id: "bench".into(),
        actor_chain: None,
        payload: json!({ "i": i, "note": "benchmark entry" }),
        retention_class: None,
    }
}

/// Appends through the in-process group-commit path from `callers` tasks.
async fn inprocess_rate(state: &AppState, tenant: &str, callers: usize, pools: usize, secs: u64) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..callers {
        let (done, stop, appender, tenant) = (done.clone(), stop.clone(), state.audit.clone(), tenant.to_string());
        tasks.push(tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                appender.append(event(&tenant, (c % pools) as i64, i)).await.expect("append");
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

/// Builds a chain of `n` entries in one pool through the appender, then
/// times its streaming verification and reports the peak RSS meanwhile.
async fn verify_run(state: &AppState, tenant: &str, n: u64) {
    const POOL: i64 = 900;
    let build = Instant::now();
    let appended = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..256 {
        let (appender, tenant, appended) = (state.audit.clone(), tenant.to_string(), appended.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = appended.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return;
                }
                appender.append(event(&tenant, POOL, i)).await.expect("append");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    println!("  built a chain of {n} entries in {:.1} s", build.elapsed().as_secs_f64());
    let rss_before = proc_status_kb("VmRSS:");
    reset_peak_rss();
    let started = Instant::now();
    let verdict = hub_kernel::audit::verify(&state.db, tenant, POOL).await.expect("verify");
    let secs = started.elapsed().as_secs_f64();
    assert!(verdict.ok && verdict.entries_checked == n as i64, "{verdict:?}");
    println!(
        "  verify: {} entries in {secs:.2} s = {:.0} entries/s; RSS before {} MiB, peak during verify {} MiB",
        verdict.entries_checked,
        n as f64 / secs,
        rss_before / 1024,
        proc_status_kb("VmHWM:") / 1024
    );
}

async fn backend(name: &str, url: Option<String>) {
    let secs = setting("BENCH_SECONDS", 5);
    let clients = setting("BENCH_CLIENTS", 64) as usize;
    println!("== {name}");
    let mut hub = start(url).await;
    let (tenant_id, token) = tenant(&hub.base, 0).await;
    if only("http") {
        for pools in [1, clients] {
            let rate = http_rate(&hub.base, &token, clients, pools, secs).await;
            println!("  HTTP append, {clients} clients, {pools} pool(s): {rate:.0} appends/s");
        }
    }
    if only("inprocess") {
        for pools in [1, 64] {
            let rate = inprocess_rate(&hub.state, &tenant_id, setting("BENCH_CALLERS", 512) as usize, pools, secs).await;
            println!("  in-process append, {} callers, {pools} pool(s): {rate:.0} appends/s", setting("BENCH_CALLERS", 512));
        }
    }
    if only("verify") {
        verify_run(&hub.state, &tenant_id, setting("BENCH_VERIFY_ENTRIES", 1_000_000)).await;
    }
    if let Some(s) = hub.server.take() {
        s.stop().await.unwrap();
    }
}

#[tokio::main]
async fn main() {
    println!("audit benchmark ({} CPUs)", std::thread::available_parallelism().map_or(0, |n| n.get()));
    backend("SQLite", None).await;
    if let Some(admin) = std::env::var("HUB_TEST_POSTGRES_URL").ok().filter(|s| !s.is_empty()) {
        let (url, name) = fresh_postgres(&admin).await;
        backend("PostgreSQL", Some(url)).await;
        drop_postgres(&admin, &name).await;
    } else {
        println!("(HUB_TEST_POSTGRES_URL not set: PostgreSQL skipped)");
    }
}
