//! The body flood: what an attacker without a credential can make the hub
//! hold by sending requests whose bodies never finish, and what deeply
//! nested text does to its parsers.
//!
//! The hub runs as its own process (the `hub` binary beside this one).
//! First the nesting probes: Cedar text, JSON bodies on tenant and public
//! routes, each nested far past its bound, each of which must be a 4xx
//! with the hub still answering. Then the flood: many HTTP/1.1
//! connections each send the head of a POST and all but the last byte of
//! its body (2 MiB bodies to a tenant's signed-webhook receiver, which
//! reads its body, and 60 KiB bodies to the login form) and then wait,
//! and a few HTTP/2 connections do the same on every stream the hub allows
//! them. Meanwhile another client logs in and reads `/api/me` every half
//! second. Everything stays on loopback and stops by itself.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::Context;
use clap::Parser;
use serde_json::{Value, json};
use tests::{HubProcess, HubTarget, ms, rss_kib_of};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

#[derive(Parser)]
#[command(about = "Slow-body flood and nesting probes: hub memory, slow connections closed in time, a normal client meanwhile")]
struct Args {
    /// Slow HTTP/1.1 connections.
    #[arg(long, default_value_t = 1000)]
    connections: usize,
    /// HTTP/2 connections, each opening as many streams as the hub allows.
    #[arg(long, default_value_t = 4)]
    h2_connections: usize,
    /// The hub's body read timeout (HUB_BODY_READ_TIMEOUT_MS), in ms.
    #[arg(long, default_value_t = 15_000)]
    body_timeout_ms: u64,
    /// The hub's stream cap per HTTP/2 connection (HUB_HTTP2_MAX_STREAMS).
    #[arg(long, default_value_t = 64)]
    h2_streams: u32,
    #[command(flatten)]
    target: HubTarget,
    /// Exit non-zero unless every nesting probe is a 4xx, peak memory stays
    /// under 400 MiB, every slow connection is closed within the body read
    /// timeout (and 2 s of slack), and every normal request succeeds within 1 s.
    #[arg(long)]
    check: bool,
}

/// How one slow request ended: its status (0: closed without an answer)
/// and when, from the moment its head was sent.
struct Ended {
    status: u16,
    after: Duration,
}

/// One slow HTTP/1.1 request: the head, `sent` bytes of a body of
/// `length`, then silence until the hub answers or closes.
async fn slow_h1(addr: String, path: String, length: usize, sent: usize, give_up: Duration) -> anyhow::Result<Ended> {
    let tcp = TcpStream::connect(&addr).await?;
    let (mut rd, mut wr) = tcp.into_split();
    let head = format!("POST {path} HTTP/1.1\r\nHost: hub\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n");
    let start = Instant::now();
    wr.write_all(head.as_bytes()).await?;
    // The writer goes on beside the reader: a hub that refuses early stops
    // reading, and a blocked write must not keep the answer unread.
    let writer = tokio::spawn(async move {
        let chunk = vec![b' '; 64 * 1024];
        let mut left = sent;
        while left > 0 {
            let n = left.min(chunk.len());
            if wr.write_all(&chunk[..n]).await.is_err() {
                return;
            }
            left -= n;
        }
        // Hold the write half open: the body stays one byte short.
        tokio::time::sleep(Duration::from_secs(3600)).await;
        drop(wr);
    });
    let mut answer = Vec::new();
    let read = tokio::time::timeout(give_up, rd.read_to_end(&mut answer)).await;
    let after = start.elapsed();
    writer.abort();
    let text = String::from_utf8_lossy(&answer);
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    match read {
        Ok(_) => Ok(Ended { status, after }),
        // Still open when the bench gave up: reported as such.
        Err(_) => Ok(Ended { status: 1, after }),
    }
}

/// One HTTP/2 connection with `streams` slow requests on it.
async fn slow_h2(addr: String, path: String, streams: u32, length: usize, give_up: Duration) -> anyhow::Result<Vec<Ended>> {
    let tcp = TcpStream::connect(&addr).await?;
    let (client, connection) = h2::client::handshake(tcp).await?;
    tokio::spawn(connection);
    let mut tasks = Vec::new();
    for _ in 0..streams {
        let mut client = client.clone().ready().await?;
        let req = http::Request::post(format!("http://{addr}{path}"))
            .header("content-type", "application/json")
            .header("content-length", length.to_string())
            .body(())?;
        let start = Instant::now();
        let (response, mut send) = client.send_request(req, false)?;
        tasks.push(tokio::spawn(async move {
            let sender = tokio::spawn(async move {
                let mut left = length - 1;
                while left > 0 {
                    send.reserve_capacity(left.min(64 * 1024));
                    match futures_util::future::poll_fn(|cx| send.poll_capacity(cx)).await {
                        Some(Ok(n)) if n > 0 => {
                            if send.send_data(bytes::Bytes::from(vec![b' '; n]), false).is_err() {
                                return;
                            }
                            left -= n;
                        }
                        _ => return,
                    }
                }
                tokio::time::sleep(Duration::from_secs(3600)).await;
                drop(send);
            });
            let ended = match tokio::time::timeout(give_up, response).await {
                Ok(Ok(r)) => Ended { status: r.status().as_u16(), after: start.elapsed() },
                // Reset by the hub.
                Ok(Err(_)) => Ended { status: 0, after: start.elapsed() },
                Err(_) => Ended { status: 1, after: start.elapsed() },
            };
            sender.abort();
            ended
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await?);
    }
    Ok(out)
}

/// The nesting probes: each must be a 4xx, and the hub must answer after.
async fn nesting_probes(http: &reqwest::Client, base: &str, token: &str) -> anyhow::Result<Vec<(String, u16)>> {
    let nested = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
    let cedar = |name: &str, condition: String| {
        json!({ "name": name, "version": 1, "iql_source": format!("permit (principal, action, resource) when {{ {condition} }};") }).to_string()
    };
    let probes: Vec<(&str, &str, bool, String)> = vec![
        ("Cedar, 150 parentheses", "/api/policies/bundles", true, cedar("p", format!("{}true{}", "(".repeat(150), ")".repeat(150)))),
        ("Cedar, 5,000 nested sets", "/api/policies/bundles", true, cedar("s", format!("{}1{} == 1", "[".repeat(5000), "]".repeat(5000)))),
        ("Cedar, 1,000 nested ifs", "/api/policies/bundles", true, cedar("i", "if true then true else ".repeat(1000) + "true")),
        ("Cedar, 30,000 chained sums", "/api/policies/bundles", true, cedar("c", format!("1{} == 1", " + 1".repeat(30_000)))),
        ("JSON body, 100,000 levels (tenant route)", "/api/crm/contacts", true, format!(r#"{{"name":"x","attributes":{{"a":{}}}}}"#, nested(100_000))),
        ("JSON body, 30,000 levels (login)", "/api/auth/login", false, format!(r#"{{"email":"a@example.com","password":{}}}"#, nested(30_000))),
        ("JSON body, 30,000 levels (token form)", "/api/auth/token", false, nested(30_000)),
    ];
    let mut out = Vec::new();
    for (what, path, auth, body) in probes {
        let mut req = http.post(format!("{base}{path}")).header("content-type", "application/json").body(body);
        if auth {
            req = req.bearer_auth(token);
        }
        let status = req.send().await.map(|r| r.status().as_u16()).unwrap_or(0);
        let health = http.get(format!("{base}/health")).send().await.map(|r| r.status().as_u16()).unwrap_or(0);
        out.push((what.to_string(), if health == 200 { status } else { 0 }));
    }
    Ok(out)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let env = [("HUB_BODY_READ_TIMEOUT_MS", args.body_timeout_ms.to_string()), ("HUB_HTTP2_MAX_STREAMS", args.h2_streams.to_string())];
    let hub = HubProcess::start_with_env(&args.target.binary()?, "off", args.target.database(), &env).await?;
    let base = hub.base.clone();
    let addr = base.trim_start_matches("http://").to_string();
    let http = reqwest::Client::new();
    let signup = http
        .post(format!("{base}/api/auth/signup-tenant"))
        .json(&json!({ "email": "real@example.com", "password": "correct horse battery", "org_name": "Flood", "app_id": "flood", "display_name": "R", "region": "local" }))
        .send()
        .await?;
    anyhow::ensure!(signup.status() == 201, "signup: {}", signup.status());
    let signup: Value = signup.json().await?;
    let token = signup["data"]["token"].as_str().context("token")?.to_string();
    let tenant_id = signup["data"]["tenant_id"].as_str().context("tenant_id")?.to_string();
    // A signed-webhook receiver of the tenant: it reads the bodies sent to it.
    let secret =
        http.post(format!("{base}/api/webhooks/inbound-secrets")).bearer_auth(&token).json(&json!({ "kind": "email", "provider": "acme" })).send().await?;
    anyhow::ensure!(secret.status().is_success(), "inbound secret: {}", secret.status());

    let probes = nesting_probes(&http, &base, &token).await?;
    println!("nesting probes (status; 0 = the hub stopped answering):");
    for (what, status) in &probes {
        println!("  {what}: {status}");
    }
    let probes_ok = probes.iter().all(|(_, s)| (400..500).contains(s));

    let rss_start = hub.rss_kib()?;
    let timeout = Duration::from_millis(args.body_timeout_ms);
    let give_up = timeout + Duration::from_secs(10);
    let inbound = format!("/api/webhooks/inbound/email/acme?tenant_id={tenant_id}");
    let started = Instant::now();
    let mut h1 = Vec::new();
    for i in 0..args.connections {
        let (path, length) = if i % 2 == 0 { (inbound.clone(), 2 * 1024 * 1024) } else { ("/api/auth/login".to_string(), 60 * 1024) };
        h1.push(tokio::spawn(slow_h1(addr.clone(), path, length, length - 1, give_up)));
    }
    let mut h2 = Vec::new();
    for _ in 0..args.h2_connections {
        h2.push(tokio::spawn(slow_h2(addr.clone(), inbound.clone(), args.h2_streams, 2 * 1024 * 1024, give_up)));
    }

    // A normal client meanwhile: a login and a read every half second.
    let normal = tokio::spawn({
        let (base, token) = (base.clone(), token.clone());
        async move {
            let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("client");
            let mut out = Vec::new();
            let until = Instant::now() + timeout + Duration::from_secs(2);
            while Instant::now() < until {
                let sent = Instant::now();
                let login = client
                    .post(format!("{base}/api/auth/login"))
                    .json(&json!({ "email": "real@example.com", "password": "correct horse battery" }))
                    .send()
                    .await;
                out.push(("login", login.map(|r| r.status().as_u16()).unwrap_or(0), sent.elapsed()));
                let sent = Instant::now();
                let me = client.get(format!("{base}/api/me")).bearer_auth(&token).send().await;
                out.push(("me", me.map(|r| r.status().as_u16()).unwrap_or(0), sent.elapsed()));
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            out
        }
    });

    let peak = Arc::new(Mutex::new(rss_start));
    let sampler = tokio::spawn({
        let peak = peak.clone();
        let pid = hub.pid();
        async move {
            loop {
                if let Ok(kib) = rss_kib_of(pid) {
                    let mut p = peak.lock().unwrap();
                    *p = (*p).max(kib);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    });

    let mut ended = Vec::new();
    let mut errors = 0;
    for t in h1 {
        match t.await? {
            Ok(e) => ended.push(("http/1.1", e)),
            Err(_) => errors += 1,
        }
    }
    for t in h2 {
        match t.await? {
            Ok(es) => ended.extend(es.into_iter().map(|e| ("h2", e))),
            Err(_) => errors += 1,
        }
    }
    let normal = normal.await?;
    sampler.abort();
    let peak = *peak.lock().unwrap();
    let rss_end = hub.rss_kib()?;

    let mut by: BTreeMap<(&str, u16), u64> = BTreeMap::new();
    for (proto, e) in &ended {
        *by.entry((proto, e.status)).or_default() += 1;
    }
    let slowest = ended.iter().map(|(_, e)| e.after).max().unwrap_or_default();
    let open = ended.iter().filter(|(_, e)| e.status == 1).count();
    println!(
        "body flood: {} HTTP/1.1 connections and {} HTTP/2 connections x {} streams, body read timeout {} ms, hub on {}, {:.1} s",
        args.connections,
        args.h2_connections,
        args.h2_streams,
        args.body_timeout_ms,
        args.target.backend(),
        started.elapsed().as_secs_f64()
    );
    println!(
        "slow requests by protocol and answer (0: closed or reset without one, 1: still open when the bench gave up): {by:?}; connection errors: {errors}"
    );
    println!("last slow request ended {:.0} ms after its head", ms(slowest));
    println!("hub resident memory: start {} MiB, peak {} MiB, end {} MiB", rss_start / 1024, peak / 1024, rss_end / 1024);
    let worst = normal.iter().map(|(_, _, d)| *d).max().unwrap_or_default();
    let failed = normal.iter().filter(|(_, s, _)| *s != 200).count();
    println!("normal client: {} requests, {} failed, slowest {:.0} ms", normal.len(), failed, ms(worst));
    if args.check {
        anyhow::ensure!(probes_ok, "a nesting probe was not a 4xx, or the hub stopped answering");
        anyhow::ensure!(peak < 400 * 1024, "peak memory {} MiB is not under 400 MiB", peak / 1024);
        anyhow::ensure!(open == 0 && slowest <= timeout + Duration::from_secs(2), "a slow request was not closed within the body read timeout");
        anyhow::ensure!(errors == 0, "{errors} slow connections could not be made");
        anyhow::ensure!(failed == 0 && worst < Duration::from_secs(1), "a normal request failed or took 1 s or more");
        anyhow::ensure!(!normal.is_empty(), "no normal request was tried");
    }
    Ok(())
}
