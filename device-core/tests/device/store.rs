//! Opening stores: schema versions, keys, threads.

use device_core::DeviceError;
use device_core::store::{NewEvent, SCHEMA_VERSION, Store};

#[test]
fn a_new_store_is_migrated_to_the_current_schema_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.db");
    let store = Store::open(path.to_str().unwrap()).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    let raw = rusqlite::Connection::open(&path).unwrap();
    let mode: String = raw.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    drop(store);
    // Reopening does not re-run migrations (they would fail on existing tables).
    assert_eq!(Store::open(path.to_str().unwrap()).unwrap().schema_version().unwrap(), SCHEMA_VERSION);
}

#[test]
fn a_store_from_a_newer_library_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.db");
    drop(Store::open(path.to_str().unwrap()).unwrap());
    rusqlite::Connection::open(&path).unwrap().pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
    let err = Store::open(path.to_str().unwrap()).err().unwrap();
    assert!(matches!(err, DeviceError::Storage { ref reason } if reason.contains("newer")), "{err}");
}

#[test]
fn an_app_held_key_must_be_the_same_key_on_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.db");
    let path = path.to_str().unwrap();
    let key = [7u8; 32];
    let store = Store::open_with_key(path, &key).unwrap();
    store.upsert_identity_claim("0190a1b2-0000-7000-8000-0000000000d1", "0190a1b2-0000-7000-8000-0000000000e1", Some("AAEC"), None).unwrap();
    drop(store);
    assert!(matches!(Store::open_with_key(path, &[8u8; 32]), Err(DeviceError::Crypto { .. })));
    assert!(matches!(Store::open(path), Err(DeviceError::Crypto { .. })));
    assert!(matches!(Store::open_with_key(path, &[7u8; 3]), Err(DeviceError::Validation { .. })));
    let store = Store::open_with_key(path, &key).unwrap();
    let claims = store.identity_claims("0190a1b2-0000-7000-8000-0000000000d1").unwrap();
    assert_eq!(claims[0].biometric_template_envelope.as_deref(), Some("AAEC"));
}

#[test]
fn the_store_is_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Store>();
    assert_send_sync::<device_core::DeviceStore>();
    let (_dir, store) = crate::temp_store();
    let store = std::sync::Arc::new(store);
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..50 {
                    let e = NewEvent { event_type: "t".into(), payload_json: "{}".into(), idempotency_key: format!("{t}-{i}") };
                    store.enqueue(&e).unwrap();
                }
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    assert_eq!(store.outbox_stats().unwrap().total, 200);
}
