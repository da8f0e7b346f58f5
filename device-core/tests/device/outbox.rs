//! The outbox: enqueue (single, batched, idempotent) and drain.

use std::sync::Arc;

use device_core::DeviceError;
use device_core::store::{NewEvent, Store};

use crate::temp_store;

fn event(key: &str, n: u32) -> NewEvent {
    NewEvent { event_type: "visit.logged.v1".into(), payload_json: format!("{{\"n\": {n}}}"), idempotency_key: key.into() }
}

#[test]
fn a_repeated_idempotency_key_is_stored_once() {
    let (_dir, store) = temp_store();
    let first = store.enqueue(&event("k1", 1)).unwrap();
    assert!(first.inserted);
    let again = store.enqueue(&event("k1", 2)).unwrap();
    assert!(!again.inserted);
    assert_eq!(again.event_id, first.event_id);
    assert_eq!(store.outbox_stats().unwrap().total, 1);
    // The first payload stands.
    assert_eq!(store.outbox_event("k1").unwrap().unwrap().payload_json, r#"{"n": 1}"#);
}

#[test]
fn batched_enqueue_dedupes_within_and_across_batches() {
    let (_dir, store) = temp_store();
    store.enqueue(&event("a", 0)).unwrap();
    let outcomes = store.enqueue_batch(&[event("a", 1), event("b", 2), event("b", 3), event("c", 4)]).unwrap();
    let inserted: Vec<bool> = outcomes.iter().map(|o| o.inserted).collect();
    assert_eq!(inserted, vec![false, true, false, true]);
    assert_eq!(outcomes[1].event_id, outcomes[2].event_id);
    assert_eq!(store.outbox_stats().unwrap().total, 3);
}

#[test]
fn a_malformed_event_fails_the_whole_batch() {
    let (_dir, store) = temp_store();
    let bad = NewEvent { event_type: "t".into(), payload_json: "{not json".into(), idempotency_key: "x".into() };
    let err = store.enqueue_batch(&[event("ok", 1), bad]).unwrap_err();
    assert!(matches!(err, DeviceError::Validation { ref reason } if reason.contains("payload")), "{err}");
    assert_eq!(store.outbox_stats().unwrap().total, 0);
    let blank = NewEvent { event_type: " ".into(), payload_json: "{}".into(), idempotency_key: "y".into() };
    assert!(matches!(store.enqueue(&blank), Err(DeviceError::Validation { .. })));
}

#[test]
fn drain_claims_oldest_first_up_to_limit_and_never_twice() {
    let (_dir, store) = temp_store();
    for i in 0..5 {
        store.enqueue(&event(&format!("k{i}"), i)).unwrap();
    }
    let first = store.drain(3).unwrap();
    assert_eq!(first.count, 3);
    let keys: Vec<&str> = first.rows.iter().map(|r| r.idempotency_key.as_str()).collect();
    assert_eq!(keys, ["k0", "k1", "k2"]);
    assert!(first.rows.iter().all(|r| r.drained_at.is_some()));
    assert!(first.rows.windows(2).all(|w| w[0].received_at <= w[1].received_at));
    let second = store.drain(10).unwrap();
    assert_eq!(second.count, 2);
    assert_eq!(second.rows[0].idempotency_key, "k3");
    assert_eq!(store.drain(10).unwrap().count, 0);
    assert_eq!(store.outbox_stats().unwrap().undrained, 0);
    assert!(matches!(store.drain(0), Err(DeviceError::Validation { .. })));
}

#[test]
fn concurrent_drains_from_many_threads_split_the_rows() {
    let (_dir, store) = temp_store();
    let events: Vec<NewEvent> = (0..400).map(|i| event(&format!("k{i}"), i)).collect();
    store.enqueue_batch(&events).unwrap();
    let store = Arc::new(store);
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let mut keys = Vec::new();
                loop {
                    let drained = store.drain(7).unwrap();
                    if drained.count == 0 {
                        return keys;
                    }
                    keys.extend(drained.rows.into_iter().map(|r| r.idempotency_key));
                }
            })
        })
        .collect();
    let mut all: Vec<String> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    assert_eq!(all.len(), 400);
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 400, "no row was drained twice");
}

#[test]
fn enqueued_events_survive_reopening_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.db");
    let path = path.to_str().unwrap();
    {
        let store = Store::open(path).unwrap();
        store.enqueue(&event("durable", 1)).unwrap();
        // Dropped without any explicit flush or close.
    }
    let store = Store::open(path).unwrap();
    assert_eq!(store.outbox_event("durable").unwrap().unwrap().payload_json, r#"{"n": 1}"#);
}

#[test]
fn an_enqueue_is_visible_to_another_connection_before_the_store_closes() {
    // Commit-before-return: a second, independent SQLite connection (as
    // after a crash and restart) already sees the row while the first
    // store is still open.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.db");
    let store = Store::open(path.to_str().unwrap()).unwrap();
    store.enqueue(&event("seen", 1)).unwrap();
    store.enqueue_batch(&[event("seen2", 2), event("seen3", 3)]).unwrap();
    let other = rusqlite::Connection::open(&path).unwrap();
    let n: i64 = other.query_row("SELECT COUNT(*) FROM outbox", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 3);
    drop(store);
}
