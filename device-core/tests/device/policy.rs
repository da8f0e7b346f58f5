//! The conflict policies' laws, through the pure API the hub also uses.

use device_core::policy::{ConflictPolicy, Resolution, decode_document, resolve, update_document};
use device_core::{DeviceError, time};
use serde_json::{Value, json};

fn resolved(policy: ConflictPolicy, a: &Value, b: &Value) -> (Value, Vec<String>) {
    match resolve(policy, a, b).expect("resolves") {
        Resolution::Resolved { value, conflicts } => (value, conflicts.into_iter().map(|c| c.field).collect()),
        other => panic!("expected a resolved value, got {other:?}"),
    }
}

#[test]
fn policy_names_round_trip_and_unknown_names_are_refused() {
    for p in ConflictPolicy::ALL {
        assert_eq!(ConflictPolicy::parse(p.as_str()).unwrap(), p);
    }
    assert_eq!(ConflictPolicy::parse("event-sourcing").unwrap(), ConflictPolicy::EventSourcing);
    assert!(matches!(ConflictPolicy::parse("last-write"), Err(DeviceError::Validation { .. })));
}

#[test]
fn lww_picks_the_later_timestamp_in_either_order() {
    let a = json!({"timestamp": "2026-01-01T10:00:00Z", "value": "old"});
    let b = json!({"timestamp": "2026-01-01T11:00:00+01:00", "value": "same-instant-other-offset"});
    let c = json!({"timestamp": 1767265200001i64, "value": "one ms later"}); // 2026-01-01T11:00:00.001Z
    assert_eq!(resolved(ConflictPolicy::Lww, &a, &c).0, c);
    assert_eq!(resolved(ConflictPolicy::Lww, &c, &a).0, c);
    // a and b are the same instant: the tie-break decides, identically both ways.
    let ab = resolved(ConflictPolicy::Lww, &a, &b).0;
    let ba = resolved(ConflictPolicy::Lww, &b, &a).0;
    assert_eq!(ab, ba);
    assert!(ab == a || ab == b);
}

#[test]
fn lww_is_idempotent_and_associative() {
    let x = json!({"timestamp": 5, "v": 1});
    let y = json!({"timestamp": 5, "v": 2});
    let z = json!({"timestamp": 3, "v": 3});
    assert_eq!(resolved(ConflictPolicy::Lww, &x, &x).0, x);
    let left = resolved(ConflictPolicy::Lww, &resolved(ConflictPolicy::Lww, &x, &y).0, &z).0;
    let right = resolved(ConflictPolicy::Lww, &x, &resolved(ConflictPolicy::Lww, &y, &z).0).0;
    assert_eq!(left, right);
    assert_eq!(left, y, "equal timestamps: the greater canonical text wins");
}

#[test]
fn lww_without_a_timestamp_is_a_validation_error() {
    let err = resolve(ConflictPolicy::Lww, &json!({"v": 1}), &json!({"timestamp": 1})).unwrap_err();
    assert!(matches!(err, DeviceError::Validation { ref reason } if reason.contains("input_a")), "{err}");
}

#[test]
fn merge_unions_fields_recurses_and_reports_conflicts() {
    let a = json!({"name": "Ada", "address": {"city": "Paris", "zip": "75001"}, "tags": ["x"]});
    let b = json!({"email": "ada@example.org", "address": {"city": "Lyon", "zip": "75001"}, "tags": ["y"]});
    let (value, conflicts) = resolved(ConflictPolicy::Merge, &a, &b);
    assert_eq!(conflicts, vec!["/address/city".to_string(), "/tags".to_string()]);
    assert_eq!(value["name"], "Ada");
    assert_eq!(value["email"], "ada@example.org");
    assert_eq!(value["address"]["zip"], "75001");
    // The greater canonical text wins a conflicting field: "Paris" > "Lyon".
    assert_eq!(value["address"]["city"], "Paris");
    assert_eq!(value["tags"], json!(["y"]));
}

#[test]
fn merge_is_commutative_and_idempotent() {
    let a = json!({"a": 1, "b": {"c": true, "d": null}, "e/f": "x"});
    let b = json!({"a": 2, "b": {"c": false, "g": [1]}, "h": "y"});
    let (ab, cab) = resolved(ConflictPolicy::Merge, &a, &b);
    let (ba, cba) = resolved(ConflictPolicy::Merge, &b, &a);
    assert_eq!(ab, ba);
    assert_eq!(cab, cba);
    assert_eq!(cab, vec!["/a", "/b/c"]);
    let (aa, caa) = resolved(ConflictPolicy::Merge, &a, &a);
    assert_eq!(aa, a);
    assert!(caa.is_empty());
}

#[test]
fn merge_escapes_field_names_as_json_pointer() {
    let (_, conflicts) = resolved(ConflictPolicy::Merge, &json!({"a/b": 1, "c~d": 1}), &json!({"a/b": 2, "c~d": 2}));
    assert_eq!(conflicts, vec!["/a~1b", "/c~0d"]);
}

#[test]
fn merge_refuses_non_objects() {
    assert!(matches!(resolve(ConflictPolicy::Merge, &json!([1]), &json!({})), Err(DeviceError::Validation { .. })));
}

#[test]
fn event_sourcing_keeps_both_in_time_order_without_duplicates() {
    let e1 = json!({"occurred_at": "2026-03-01T00:00:00Z", "kind": "opened"});
    let e2 = json!({"occurred_at": "2026-03-02T00:00:00Z", "kind": "closed"});
    let e3 = json!({"occurred_at": "2026-03-01T12:00:00Z", "kind": "edited"});
    let a = json!([e2.clone(), e1.clone()]);
    let b = json!([e3.clone(), e1.clone()]);
    let (value, _) = resolved(ConflictPolicy::EventSourcing, &a, &b);
    assert_eq!(value, json!({"events": [e1, e3, e2]}));
}

#[test]
fn event_sourcing_is_commutative_associative_and_idempotent() {
    let x = json!({"timestamp": 2, "n": "x"});
    let y = json!([{"timestamp": 1, "n": "y"}, {"timestamp": 2, "n": "a"}]);
    let z = json!({"n": "no time"});
    let es = |a: &Value, b: &Value| resolved(ConflictPolicy::EventSourcing, a, b).0["events"].clone();
    assert_eq!(es(&x, &y), es(&y, &x));
    assert_eq!(es(&es(&x, &y), &z), es(&x, &es(&y, &z)));
    let once = es(&x, &y);
    assert_eq!(es(&once, &once), once);
    assert_eq!(es(&z, &x), json!([{"n": "no time"}, {"timestamp": 2, "n": "x"}]), "events without a time sort first");
}

#[test]
fn human_review_resolves_nothing_and_keeps_both_sides() {
    let a = json!({"v": 1});
    let b = json!({"v": 2});
    let r = resolve(ConflictPolicy::HumanReview, &a, &b).unwrap();
    assert_eq!(r, Resolution::NeedsReview { input_a: a.clone(), input_b: b.clone() });
    let j = r.to_json(ConflictPolicy::HumanReview);
    assert_eq!(j["status"], "pending_review");
    assert_eq!(j["input_b"], b);
}

/// A base document and two concurrent edits of it.
fn forked_documents() -> (String, String, String) {
    let base = update_document(None, &json!({"title": "draft", "count": 1})).unwrap();
    let a = update_document(Some(&base), &json!({"title": "from a", "a_only": [1, 2]})).unwrap();
    let b = update_document(Some(&base), &json!({"count": 2, "b_only": {"k": "v"}})).unwrap();
    (base, a, b)
}

#[test]
fn crdt_merges_concurrent_edits_of_both_sides() {
    let (_, a, b) = forked_documents();
    let (value, conflicts) = resolved(ConflictPolicy::Crdt, &json!(a), &json!({"automerge": b}));
    assert!(conflicts.is_empty());
    assert_eq!(value["document"], json!({"title": "from a", "count": 2, "a_only": [1, 2], "b_only": {"k": "v"}}));
    // The merged document carries both histories: loading it gives the same view.
    let reloaded = decode_document(&value["automerge"]).unwrap();
    assert_eq!(reloaded.get_heads().len(), 2);
}

#[test]
fn crdt_is_commutative_and_idempotent() {
    let (base, a, b) = forked_documents();
    let (ab, _) = resolved(ConflictPolicy::Crdt, &json!(a), &json!(b));
    let (ba, _) = resolved(ConflictPolicy::Crdt, &json!(b), &json!(a));
    assert_eq!(ab["heads"], ba["heads"]);
    assert_eq!(ab["document"], ba["document"]);
    let (aa, _) = resolved(ConflictPolicy::Crdt, &json!(a), &json!(a));
    let a_alone = decode_document(&json!(a)).unwrap();
    assert_eq!(aa["heads"].as_array().unwrap().len(), 1);
    assert_eq!(aa["heads"][0], a_alone.get_heads()[0].to_string());
    // Merging with an ancestor changes nothing.
    let (a_base, _) = resolved(ConflictPolicy::Crdt, &json!(a), &json!(base));
    assert_eq!(a_base["document"], aa["document"]);
}

#[test]
fn crdt_concurrent_writes_to_one_field_agree_in_either_order() {
    let base = update_document(None, &json!({"title": "t"})).unwrap();
    let a = update_document(Some(&base), &json!({"title": "A"})).unwrap();
    let b = update_document(Some(&base), &json!({"title": "B"})).unwrap();
    let ab = resolved(ConflictPolicy::Crdt, &json!(a), &json!(b)).0;
    let ba = resolved(ConflictPolicy::Crdt, &json!(b), &json!(a)).0;
    assert_eq!(ab["document"], ba["document"]);
    let title = ab["document"]["title"].as_str().unwrap();
    assert!(title == "A" || title == "B");
}

#[test]
fn crdt_refuses_input_that_is_not_a_document() {
    let err = resolve(ConflictPolicy::Crdt, &json!("bm90IGEgZG9j"), &json!("bm90IGEgZG9j")).unwrap_err();
    assert!(matches!(err, DeviceError::Validation { ref reason } if reason.contains("not an automerge document")), "{err}");
    assert!(matches!(resolve(ConflictPolicy::Crdt, &json!(1), &json!(2)), Err(DeviceError::Validation { .. })));
}

#[test]
fn times_normalise_to_utc_microseconds() {
    assert_eq!(time::normalize("2026-05-01T12:00:00+02:00").unwrap(), "2026-05-01T10:00:00.000000Z");
    assert!(time::normalize("yesterday").is_err());
}
