//! The MCP answer flood: the hub's resident memory while many tool calls
//! ask for large media content at once.
//!
//! The hub runs as its own process (the `hub` binary beside this one). One
//! tenant uploads three blobs: 15 MiB and 20 MiB (over what a tool call
//! carries back, `hub::mcp::ANSWER_LIMIT`) and 3 MiB (the largest binary
//! answer a call carries, 4 MiB once in base64). For `--seconds`, 8
//! clients call the tool for the 15 MiB blob over and over, 8 more for the
//! 3 MiB one, and one for the 20 MiB one, each client alternating between
//! `POST /mcp/v1/call` and `tools/call` on `POST /mcp`; the hub's memory
//! is sampled every 100 ms. Every answer is checked: the large blobs are a
//! tool error naming the limit, the 3 MiB one a blob resource of exactly
//! 4 MiB of base64. Everything stays on loopback.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::Context;
use clap::Parser;
use serde_json::{Value, json};
use tests::{HubProcess, HubTarget, percentile};

#[derive(Parser)]
#[command(about = "Concurrent MCP tool calls for large media blobs: hub memory and answers")]
struct Args {
    /// Length of the flood.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// Concurrent clients for each of the 15 MiB and the 3 MiB blobs.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    #[command(flatten)]
    target: HubTarget,
    /// Exit non-zero unless peak memory stays under 300 MiB, no answer is
    /// a 5xx or a transport error, and every answer is the expected one.
    #[arg(long)]
    check: bool,
}

const MIB: usize = 1024 * 1024;
/// What a tool call carries back at most (`hub::mcp::ANSWER_LIMIT`).
const LIMIT: usize = hub::mcp::ANSWER_LIMIT;

/// `n` bytes that are not all alike.
fn content(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 % 251) as u8).collect()
}

/// Uploads and commits a blob of `size` bytes; its id.
async fn blob(http: &reqwest::Client, base: &str, token: &str, size: usize) -> anyhow::Result<String> {
    let started: Value = http.post(format!("{base}/api/media/blobs")).bearer_auth(token).json(&json!({})).send().await?.json().await?;
    let id = started["data"]["blob_id"].as_str().with_context(|| format!("a blob: {started}"))?.to_string();
    let bytes = content(size);
    let sum = hub_kernel::crypto::sha256_hex(&bytes);
    let put = http.put(format!("{base}/api/media/blobs/{id}/content")).bearer_auth(token).body(bytes).send().await?;
    anyhow::ensure!(put.status() == 200, "upload: {}", put.status());
    let commit = http.post(format!("{base}/api/media/blobs/{id}/commit")).bearer_auth(token).json(&json!({ "checksum_hex": sum })).send().await?;
    anyhow::ensure!(commit.status() == 200, "commit: {}", commit.status());
    Ok(id)
}

/// The blob a client asks for, and what its answer must be.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Ask {
    /// 15 or 20 MiB: a tool error naming the limit.
    Over(usize),
    /// At the limit: a blob resource of `LIMIT` bytes of base64.
    Fits,
}

#[derive(Default)]
struct Tally {
    /// (blob, endpoint, status) → answers.
    by_status: BTreeMap<(String, &'static str, u16), u64>,
    latency: Vec<Duration>,
    unexpected: Vec<String>,
    errors: u64,
}

/// One tool call: the HTTP status, and whether the answer is the expected one.
async fn call(http: &reqwest::Client, base: &str, token: &str, blob: &str, rpc: bool, ask: Ask) -> anyhow::Result<(u16, Result<(), String>)> {
    let arguments = json!({ "blob_id": blob });
    let res = if rpc {
        let message = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "sdk_media_get_content", "arguments": arguments } });
        http.post(format!("{base}/mcp"))
            .bearer_auth(token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .json(&message)
            .send()
            .await?
    } else {
        http.post(format!("{base}/mcp/v1/call")).bearer_auth(token).json(&json!({ "name": "sdk_media_get_content", "arguments": arguments })).send().await?
    };
    let status = res.status().as_u16();
    let body: Value = res.json().await?;
    let limit = format!("{LIMIT} bytes of JSON, or of base64 for other content");
    let verdict = match (ask, rpc) {
        (Ask::Over(_), false) => {
            let detail = body["details"][0].as_str().unwrap_or_default();
            (status == 400 && body["error"] == "ValidationError" && detail.contains(&limit)).then_some(())
        }
        (Ask::Over(_), true) => {
            let text = body["result"]["content"][0]["text"].as_str().unwrap_or_default();
            (status == 200 && body["result"]["isError"] == true && text.contains(&limit)).then_some(())
        }
        (Ask::Fits, rpc) => {
            let result = if rpc { &body["result"] } else { &body };
            let resource = &result["content"][0]["resource"];
            (status == 200 && result["isError"] == false && resource["blob"].as_str().map(str::len) == Some(LIMIT)).then_some(())
        }
    };
    let what = || {
        let mut shown = body.to_string();
        shown.truncate(300);
        format!("{ask:?} on {}: {status} {shown}", if rpc { "/mcp" } else { "/mcp/v1/call" })
    };
    Ok((status, verdict.ok_or_else(what)))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let hub = HubProcess::start(&args.target.binary()?, "off", args.target.database()).await?;
    let base = hub.base.clone();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build()?;
    let signup = http
        .post(format!("{base}/api/auth/signup-tenant"))
        .json(&json!({ "email": "mcp@example.com", "password": "correct horse battery", "org_name": "Flood", "app_id": "mcp-flood", "display_name": "M", "region": "local" }))
        .send()
        .await?;
    anyhow::ensure!(signup.status() == 201, "signup: {}", signup.status());
    let signup: Value = signup.json().await?;
    let token = signup["data"]["token"].as_str().context("a token")?.to_string();
    let over = blob(&http, &base, &token, 15 * MIB).await?;
    let huge = blob(&http, &base, &token, 20 * MIB).await?;
    let fits = blob(&http, &base, &token, LIMIT / 4 * 3).await?;
    // The direct route streams the whole blob, for comparison.
    let direct = http.get(format!("{base}/api/media/blobs/{over}/content")).bearer_auth(&token).send().await?;
    anyhow::ensure!(direct.status() == 200 && direct.bytes().await?.len() == 15 * MIB, "the direct read of the 15 MiB blob");
    let rss_start = hub.rss_kib()?;

    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let tally = Arc::new(Mutex::new(Tally::default()));
    let mut plan: Vec<(String, Ask, &str)> = Vec::new();
    for _ in 0..args.concurrency {
        plan.push((over.clone(), Ask::Over(15), "15 MiB"));
        plan.push((fits.clone(), Ask::Fits, "3 MiB"));
    }
    plan.push((huge.clone(), Ask::Over(20), "20 MiB"));
    let mut tasks = Vec::new();
    for (i, (blob, ask, label)) in plan.into_iter().enumerate() {
        let (http, base, token, tally) = (http.clone(), base.clone(), token.clone(), tally.clone());
        tasks.push(tokio::spawn(async move {
            let mut rpc = i % 2 == 1;
            while Instant::now() < deadline {
                rpc = !rpc;
                let sent = Instant::now();
                let answer = call(&http, &base, &token, &blob, rpc, ask).await;
                let took = sent.elapsed();
                let mut t = tally.lock().unwrap();
                match answer {
                    Ok((status, verdict)) => {
                        *t.by_status.entry((label.to_string(), if rpc { "/mcp" } else { "/mcp/v1/call" }, status)).or_default() += 1;
                        t.latency.push(took);
                        if let Err(what) = verdict
                            && t.unexpected.len() < 5
                        {
                            t.unexpected.push(what);
                        }
                    }
                    Err(_) => t.errors += 1,
                }
            }
        }));
    }

    let mut peak = rss_start;
    while Instant::now() < deadline {
        peak = peak.max(hub.rss_kib()?);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for t in tasks {
        t.await?;
    }
    let rss_end = hub.rss_kib()?;

    let mut t = Arc::try_unwrap(tally).ok().context("tally still shared")?.into_inner().unwrap();
    t.latency.sort();
    let total: u64 = t.by_status.values().sum();
    let server_errors: u64 = t.by_status.iter().filter(|((_, _, s), _)| *s >= 500).map(|(_, n)| n).sum();
    println!(
        "mcp flood: {} clients each for the 15 MiB and the 3 MiB blob, one for the 20 MiB blob, {} s, hub on {}",
        args.concurrency,
        args.seconds,
        args.target.backend()
    );
    println!("calls: {total} ({:.0}/s), transport errors: {}", total as f64 / args.seconds as f64, t.errors);
    for ((blob, endpoint, status), n) in &t.by_status {
        println!("  {blob} on {endpoint}: {status} x {n}");
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("latency: p50 {:.0} ms, p99 {:.0} ms", ms(percentile(&t.latency, 0.5)), ms(percentile(&t.latency, 0.99)));
    println!("hub resident memory: start {} MiB, peak {} MiB, end {} MiB", rss_start / 1024, peak / 1024, rss_end / 1024);
    for what in &t.unexpected {
        println!("unexpected answer: {what}");
    }
    if args.check {
        anyhow::ensure!(peak < 300 * 1024, "peak memory {} MiB is not under 300 MiB", peak / 1024);
        anyhow::ensure!(server_errors == 0, "{server_errors} answers were 5xx");
        anyhow::ensure!(t.errors == 0, "{} calls failed in transport", t.errors);
        anyhow::ensure!(t.unexpected.is_empty(), "answers were not the expected ones");
        anyhow::ensure!(t.by_status.len() == 6, "every blob was called on both endpoints: {:?}", t.by_status.keys());
    }
    Ok(())
}
