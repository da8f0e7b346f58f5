//! Sync against a fake hub behind the transport trait: batches, resumption
//! after interruptions, no loss and no duplicates, policy pulls.

use std::collections::BTreeMap;
use std::sync::Mutex;

use device_core::DeviceError;
use device_core::policy::ConflictPolicy;
use device_core::store::{HttpRequest, HttpResponse, HttpTransport, NewEvent, Store};
use protocol::sync::{RejectedEvent, SyncBatch, SyncBatchAck};
use serde_json::json;

use crate::temp_store;

const DEVICE: &str = "0190a1b2-0000-7000-8000-0000000000d1";

/// What the fake hub does on its n-th batch request (1-based).
#[derive(Clone, Copy, PartialEq)]
enum Fault {
    None,
    /// The request never reaches the hub.
    DropRequest(u32),
    /// The hub stores the batch but its answer is lost.
    DropAnswer(u32),
}

struct FakeHub {
    stored: Mutex<BTreeMap<String, protocol::sync::SyncEvent>>,
    batch_requests: Mutex<u32>,
    batch_sizes: Mutex<Vec<usize>>,
    fault: Fault,
    /// Acknowledge at most this many events per batch (a hub under load).
    ack_limit: usize,
    wrap_in_envelope: bool,
}

impl FakeHub {
    fn new(fault: Fault) -> Self {
        FakeHub {
            stored: Mutex::new(BTreeMap::new()),
            batch_requests: Mutex::new(0),
            batch_sizes: Mutex::new(Vec::new()),
            fault,
            ack_limit: usize::MAX,
            wrap_in_envelope: false,
        }
    }

    fn answer(&self, status: u16, value: serde_json::Value) -> HttpResponse {
        let value = if self.wrap_in_envelope { json!({"success": true, "data": value}) } else { value };
        HttpResponse { status, body: value.to_string().into_bytes() }
    }
}

impl HttpTransport for FakeHub {
    fn send(&self, request: HttpRequest) -> Result<HttpResponse, DeviceError> {
        match (request.method.as_str(), request.path.as_str()) {
            ("GET", "/api/hdk/sync/policies") => Ok(self.answer(
                200,
                json!({"event_types": [
                    {"event_type": "note.edited.v1", "conflict_policy": "crdt", "retention_class": "operational"},
                    {"event_type": "visit.logged.v1", "conflict_policy": "event-sourcing", "schema_version": 2},
                    {"event_type": "future.v1", "conflict_policy": "quantum"},
                ]}),
            )),
            ("POST", "/api/hdk/sync/batches") => {
                assert_eq!(request.content_type.as_deref(), Some("application/json"));
                let n = {
                    let mut count = self.batch_requests.lock().unwrap();
                    *count += 1;
                    *count
                };
                if self.fault == Fault::DropRequest(n) {
                    return Err(DeviceError::Transport { reason: "network down".into() });
                }
                let batch: SyncBatch = serde_json::from_slice(&request.body).unwrap();
                assert_eq!(batch.device_uuid, DEVICE);
                self.batch_sizes.lock().unwrap().push(batch.events.len());
                let mut ack = SyncBatchAck { batch_id: batch.batch_id.clone(), ..Default::default() };
                let mut stored = self.stored.lock().unwrap();
                for event in batch.events.into_iter().take(self.ack_limit) {
                    if event.event_type == "bad.v1" {
                        ack.rejected.push(RejectedEvent { idempotency_key: event.idempotency_key, reason: "unknown event type".into() });
                    } else if stored.contains_key(&event.idempotency_key) {
                        ack.duplicates.push(event.idempotency_key);
                    } else {
                        ack.accepted.push(event.idempotency_key.clone());
                        stored.insert(event.idempotency_key.clone(), event);
                    }
                }
                if self.fault == Fault::DropAnswer(n) {
                    return Err(DeviceError::Transport { reason: "connection reset".into() });
                }
                Ok(self.answer(200, serde_json::to_value(ack).unwrap()))
            }
            other => panic!("unexpected request {other:?}"),
        }
    }
}

fn fill(store: &Store, n: u32) {
    let events: Vec<NewEvent> = (0..n)
        .map(|i| NewEvent { event_type: "visit.logged.v1".into(), payload_json: format!("{{\"i\": {i}}}"), idempotency_key: format!("key-{i:04}") })
        .collect();
    store.enqueue_batch(&events).unwrap();
}

#[test]
fn a_push_sends_everything_in_batches_of_the_given_size() {
    let (_dir, store) = temp_store();
    fill(&store, 25);
    let hub = FakeHub::new(Fault::None);
    let report = store.push_outbox(&hub, DEVICE, 10).unwrap();
    assert_eq!((report.batches, report.accepted, report.duplicates, report.pending), (3, 25, 0, 0));
    assert_eq!(*hub.batch_sizes.lock().unwrap(), vec![10, 10, 5]);
    let stored = hub.stored.lock().unwrap();
    assert_eq!(stored.len(), 25);
    assert_eq!(stored["key-0007"].payload, json!({"i": 7}));
    assert_eq!(stored["key-0007"].event_type, "visit.logged.v1");
    drop(stored);
    // Nothing is left to send.
    let again = store.push_outbox(&hub, DEVICE, 10).unwrap();
    assert_eq!((again.batches, again.accepted), (0, 0));
}

#[test]
fn a_lost_answer_is_resumed_without_duplicates() {
    let (_dir, store) = temp_store();
    fill(&store, 30);
    let hub = FakeHub::new(Fault::DropAnswer(2));
    let err = store.push_outbox(&hub, DEVICE, 10).unwrap_err();
    assert!(matches!(err, DeviceError::Transport { .. }));
    // Batch 1 acknowledged; batch 2 stored on the hub but unacknowledged.
    assert_eq!(store.outbox_stats().unwrap().sync_pending, 20);
    assert_eq!(hub.stored.lock().unwrap().len(), 20);
    let report = store.push_outbox(&hub, DEVICE, 10).unwrap();
    assert_eq!((report.accepted, report.duplicates, report.pending), (10, 10, 0));
    assert_eq!(hub.stored.lock().unwrap().len(), 30, "every event once");
}

#[test]
fn a_dropped_request_is_resumed_without_loss() {
    let (_dir, store) = temp_store();
    fill(&store, 15);
    let hub = FakeHub::new(Fault::DropRequest(1));
    assert!(store.push_outbox(&hub, DEVICE, 10).is_err());
    assert_eq!(store.outbox_stats().unwrap().sync_pending, 15);
    // New events enqueued while offline go out with the old ones.
    store.enqueue(&NewEvent { event_type: "visit.logged.v1".into(), payload_json: "{}".into(), idempotency_key: "late".into() }).unwrap();
    let report = store.push_outbox(&hub, DEVICE, 10).unwrap();
    assert_eq!((report.accepted, report.pending), (16, 0));
    assert!(hub.stored.lock().unwrap().contains_key("late"));
}

#[test]
fn a_partly_acknowledged_batch_resends_only_the_rest() {
    let (_dir, store) = temp_store();
    fill(&store, 12);
    let mut hub = FakeHub::new(Fault::None);
    hub.ack_limit = 5;
    let report = store.push_outbox(&hub, DEVICE, 10).unwrap();
    assert_eq!((report.accepted, report.duplicates, report.pending), (12, 0, 0));
    // 10 sent (5 acked), then 7 (5 acked), then 2.
    assert_eq!(*hub.batch_sizes.lock().unwrap(), vec![10, 7, 2]);
}

#[test]
fn rejected_events_are_not_sent_again() {
    let (_dir, store) = temp_store();
    fill(&store, 3);
    store.enqueue(&NewEvent { event_type: "bad.v1".into(), payload_json: "{}".into(), idempotency_key: "bad".into() }).unwrap();
    let hub = FakeHub::new(Fault::None);
    let report = store.push_outbox(&hub, DEVICE, 10).unwrap();
    assert_eq!((report.accepted, report.rejected, report.pending), (3, 1, 0));
    assert_eq!(store.outbox_stats().unwrap().sync_rejected, 1);
    assert_eq!(store.push_outbox(&hub, DEVICE, 10).unwrap().batches, 0);
}

#[test]
fn a_hub_error_status_is_reported_and_nothing_is_marked() {
    struct Refusing;
    impl HttpTransport for Refusing {
        fn send(&self, _: HttpRequest) -> Result<HttpResponse, DeviceError> {
            Ok(HttpResponse { status: 503, body: br#"{"success":false,"error":"Unavailable"}"#.to_vec() })
        }
    }
    let (_dir, store) = temp_store();
    fill(&store, 2);
    let err = store.push_outbox(&Refusing, DEVICE, 10).unwrap_err();
    assert!(matches!(err, DeviceError::Hub { status: 503, ref reason } if reason.contains("Unavailable")), "{err}");
    assert_eq!(store.outbox_stats().unwrap().sync_pending, 2);
    assert!(matches!(store.push_outbox(&Refusing, DEVICE, 0), Err(DeviceError::Validation { .. })));
    assert!(matches!(store.push_outbox(&Refusing, "not-a-uuid", 10), Err(DeviceError::Validation { .. })));
}

#[test]
fn pulling_policies_registers_known_ones_and_skips_unknown() {
    let (_dir, store) = temp_store();
    store.register_event_type("note.edited.v1", ConflictPolicy::Lww).unwrap();
    let mut hub = FakeHub::new(Fault::None);
    hub.wrap_in_envelope = true;
    let report = store.pull_policies(&hub).unwrap();
    assert_eq!(report.updated, 2);
    assert_eq!(report.skipped, vec!["future.v1".to_string()]);
    let types = store.event_types().unwrap();
    assert_eq!(types.len(), 2);
    assert_eq!(types[0].event_type, "note.edited.v1");
    assert_eq!(types[0].conflict_policy, ConflictPolicy::Crdt, "the hub's policy replaces the local one");
    assert_eq!(types[0].source, "hub");
    assert_eq!(types[0].retention_class.as_deref(), Some("operational"));
    assert_eq!(types[1].schema_version, 2);
    assert_eq!(store.policy_for("visit.logged.v1").unwrap(), ConflictPolicy::EventSourcing);
}
