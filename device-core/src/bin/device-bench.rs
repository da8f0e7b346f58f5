//! device-bench: outbox and conflict-policy throughput on this machine.
//! Run it in release: `cargo run --release -p device_core --bin device-bench`.

use std::time::{Duration, Instant};

use automerge::transaction::Transactable;
use automerge::{AutoCommit, ROOT};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use device_core::policy::{ConflictPolicy, resolve};
use device_core::store::{NewEvent, Store};
use serde_json::{Value, json};

fn rate(n: usize, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64()
}

fn event(i: usize) -> NewEvent {
    NewEvent {
        event_type: "visit.logged.v1".into(),
        payload_json: format!(r#"{{"visit":{i},"site":"north","ok":true}}"#),
        idempotency_key: format!("bench-{i}"),
    }
}

/// A document of `changes` changes (one field write each) forked from
/// `base`, saved as base64.
fn document_with_changes(base: &[u8], prefix: &str, changes: usize) -> String {
    let mut doc = AutoCommit::load(base).expect("base loads");
    for i in 0..changes {
        doc.put(ROOT, format!("{prefix}{}", i % 50), i as i64).expect("put");
        doc.commit();
    }
    STANDARD.encode(doc.save())
}

fn main() {
    // A fresh file per run in the system temp dir, removed at the end.
    let dir = std::env::temp_dir().join(format!("device-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let store = Store::open(dir.join("bench.db").to_str().unwrap()).expect("store opens");

    // Single enqueues: each its own fsynced transaction, as an app records
    // events one at a time.
    let single = 2_000;
    let start = Instant::now();
    for i in 0..single {
        store.enqueue(&event(i)).expect("enqueue");
    }
    println!("outbox enqueue (single, fsync each): {:>10.0} events/s", rate(single, start.elapsed()));

    // Batched: 1,000 events per transaction.
    let batches = 100;
    let per_batch = 1_000;
    let start = Instant::now();
    for b in 0..batches {
        let events: Vec<NewEvent> = (0..per_batch).map(|i| event(single + b * per_batch + i)).collect();
        store.enqueue_batch(&events).expect("batch");
    }
    println!("outbox enqueue (batched x{per_batch}):        {:>10.0} events/s", rate(batches * per_batch, start.elapsed()));

    let total = single + batches * per_batch;
    let start = Instant::now();
    let mut drained = 0;
    loop {
        let d = store.drain(500).expect("drain");
        if d.count == 0 {
            break;
        }
        drained += d.count as usize;
    }
    assert_eq!(drained, total);
    println!("outbox drain (limit 500):            {:>10.0} rows/s", rate(drained, start.elapsed()));

    let pairs: Vec<(ConflictPolicy, Value, Value)> = vec![
        (ConflictPolicy::Lww, json!({"timestamp": "2026-01-01T00:00:00Z", "v": 1}), json!({"timestamp": 1767225600001i64, "v": 2})),
        (
            ConflictPolicy::Merge,
            json!({"name": "Ada", "address": {"city": "Paris", "zip": "75001"}, "tags": ["a"]}),
            json!({"email": "a@example.org", "address": {"city": "Lyon"}, "tags": ["b"]}),
        ),
        (
            ConflictPolicy::EventSourcing,
            json!([{"timestamp": 3, "k": "c"}, {"timestamp": 1, "k": "a"}]),
            json!([{"timestamp": 2, "k": "b"}, {"timestamp": 1, "k": "a"}]),
        ),
        (ConflictPolicy::HumanReview, json!({"v": 1}), json!({"v": 2})),
    ];
    for (policy, a, b) in &pairs {
        let n = 100_000;
        let start = Instant::now();
        for _ in 0..n {
            std::hint::black_box(resolve(*policy, a, b).expect("resolves"));
        }
        println!("resolve {:<15}                {:>10.0} resolutions/s", policy.as_str(), rate(n, start.elapsed()));
    }

    // Two small concurrent edits: the common case on a phone.
    let mut base = AutoCommit::new();
    base.put(ROOT, "title", "draft").unwrap();
    base.commit();
    let base_bytes = base.save();
    let small_a = json!(document_with_changes(&base_bytes, "a", 5));
    let small_b = json!(document_with_changes(&base_bytes, "b", 5));
    let n = 2_000;
    let start = Instant::now();
    for _ in 0..n {
        std::hint::black_box(resolve(ConflictPolicy::Crdt, &small_a, &small_b).expect("merges"));
    }
    println!("resolve crdt (5+5 changes)            {:>10.0} resolutions/s", rate(n, start.elapsed()));

    // The target case: two documents of 1,000 changes each on one base.
    let a = json!(document_with_changes(&base_bytes, "a", 1_000));
    let b = json!(document_with_changes(&base_bytes, "b", 1_000));
    let runs = 20;
    let mut times = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        let r = resolve(ConflictPolicy::Crdt, &a, &b).expect("merges");
        times.push(start.elapsed());
        std::hint::black_box(r);
    }
    times.sort();
    println!(
        "crdt resolution, 2 x 1,000 changes:  median {:.2} ms, max {:.2} ms ({runs} runs)",
        times[runs / 2].as_secs_f64() * 1e3,
        times[runs - 1].as_secs_f64() * 1e3
    );
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
