//! Event type registration, resolution through the registry, and reviews.

use device_core::DeviceError;
use device_core::policy::ConflictPolicy;
use device_core::store::ReviewChoice;
use serde_json::{Value, json};

use crate::temp_store;

#[test]
fn registering_answers_created_once_and_updates_the_policy() {
    let (_dir, store) = temp_store();
    assert!(store.register_event_type("note.edited.v1", ConflictPolicy::Lww).unwrap());
    assert!(!store.register_event_type("note.edited.v1", ConflictPolicy::Merge).unwrap());
    let types = store.event_types().unwrap();
    assert_eq!(types.len(), 1);
    assert_eq!(types[0].conflict_policy, ConflictPolicy::Merge);
    assert_eq!(types[0].source, "local");
}

#[test]
fn resolving_an_unregistered_type_is_a_clear_error() {
    let (_dir, store) = temp_store();
    let err = store.resolve("nobody.registered.v1", "{}", "{}").unwrap_err();
    assert_eq!(err, DeviceError::UnregisteredEventType { event_type: "nobody.registered.v1".into() });
    assert!(err.to_string().contains("register it"));
}

#[test]
fn resolution_uses_the_registered_policy() {
    let (_dir, store) = temp_store();
    store.register_event_type("profile.v1", ConflictPolicy::Merge).unwrap();
    let r = store.resolve("profile.v1", r#"{"a": 1, "x": 1}"#, r#"{"b": 2, "x": 2}"#).unwrap();
    assert_eq!(r.status, "resolved");
    assert_eq!(r.policy, ConflictPolicy::Merge);
    let result: Value = serde_json::from_str(r.result_json.as_deref().unwrap()).unwrap();
    assert_eq!(result, json!({"a": 1, "b": 2, "x": 2}));
    assert_eq!(r.conflicts.len(), 1);
    assert_eq!(r.conflicts[0].field, "/x");
    assert_eq!(r.conflicts[0].input_a_json, "1");
    assert!(r.review_id.is_none());
}

#[test]
fn human_review_parks_both_sides_until_a_person_chooses() {
    let (_dir, store) = temp_store();
    store.register_event_type("consent.v1", ConflictPolicy::HumanReview).unwrap();
    let r = store.resolve("consent.v1", r#"{"v": "a"}"#, r#"{"v": "b"}"#).unwrap();
    assert_eq!(r.status, "pending_review");
    assert!(r.result_json.is_none());
    let review_id = r.review_id.unwrap();
    let pending = store.pending_reviews().unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].review_id, review_id);
    assert_eq!(pending[0].input_b_json, r#"{"v":"b"}"#);
    assert_eq!(store.decide_review(&review_id, ReviewChoice::B).unwrap(), r#"{"v":"b"}"#);
    assert!(store.pending_reviews().unwrap().is_empty());
    let decided = store.review(&review_id).unwrap();
    assert_eq!(decided.choice, Some(ReviewChoice::B));
    assert!(decided.decided_at.is_some());
    assert!(matches!(store.decide_review(&review_id, ReviewChoice::A), Err(DeviceError::Conflict { .. })));
    assert!(matches!(store.decide_review("missing", ReviewChoice::A), Err(DeviceError::NotFound { .. })));
}
