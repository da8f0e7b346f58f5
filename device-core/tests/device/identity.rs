//! Identity claims (sealed at rest) and permission snapshots.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use device_core::DeviceError;
use device_core::store::Store;

use crate::temp_store;

const DEVICE: &str = "0190a1b2-0000-7000-8000-0000000000d1";
const PERSON: &str = "0190a1b2-0000-7000-8000-0000000000e1";
const TENANT: &str = "0190a1b2-0000-7000-8000-0000000000f1";
const PERSONA: &str = "0190a1b2-0000-7000-8000-0000000000f2";

#[test]
fn a_claim_with_neither_credential_is_accepted() {
    let (_dir, store) = temp_store();
    let claim = store.upsert_identity_claim(DEVICE, PERSON, None, None).unwrap();
    assert_eq!(claim.device_uuid, DEVICE);
    assert_eq!(claim.person_id, PERSON);
    assert_eq!(claim.biometric_template_envelope, None);
    assert_eq!(claim.pin_envelope, None);
}

#[test]
fn envelopes_round_trip_but_are_not_stored_in_clear() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.db");
    let store = Store::open(path.to_str().unwrap()).unwrap();
    let template = b"BIOMETRIC-TEMPLATE-SECRET-0123456789";
    let bio = STANDARD.encode(template);
    let pin = STANDARD.encode(b"PIN-ENVELOPE-SECRET");
    store.upsert_identity_claim(DEVICE, PERSON, Some(&bio), Some(&pin)).unwrap();
    let claims = store.identity_claims(DEVICE).unwrap();
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].biometric_template_envelope.as_deref(), Some(bio.as_str()));
    assert_eq!(claims[0].pin_envelope.as_deref(), Some(pin.as_str()));
    drop(store);
    let raw = rusqlite::Connection::open(&path).unwrap();
    let stored: Vec<u8> = raw.query_row("SELECT biometric_envelope FROM identity_claim", [], |r| r.get(0)).unwrap();
    assert!(!stored.windows(template.len()).any(|w| w == template));
    assert_eq!(stored.len(), 12 + template.len() + 16, "nonce + ciphertext + tag");
}

#[test]
fn an_upsert_replaces_the_claim() {
    let (_dir, store) = temp_store();
    let first = store.upsert_identity_claim(DEVICE, PERSON, Some("AAEC"), None).unwrap();
    let second = store.upsert_identity_claim(DEVICE, PERSON, None, Some("AwQF")).unwrap();
    assert_eq!(second.created_at, first.created_at);
    assert_eq!(second.biometric_template_envelope, None);
    assert_eq!(second.pin_envelope.as_deref(), Some("AwQF"));
    assert_eq!(store.identity_claims(DEVICE).unwrap().len(), 1);
}

#[test]
fn claims_need_uuids_and_base64() {
    let (_dir, store) = temp_store();
    assert!(matches!(store.upsert_identity_claim("", PERSON, None, None), Err(DeviceError::Validation { .. })));
    assert!(matches!(store.upsert_identity_claim(DEVICE, "bob", None, None), Err(DeviceError::Validation { .. })));
    let err = store.upsert_identity_claim(DEVICE, PERSON, Some("!!not base64"), None).unwrap_err();
    assert!(matches!(err, DeviceError::Validation { ref reason } if reason.contains("biometric")), "{err}");
}

#[test]
fn a_sealed_envelope_moved_to_another_row_does_not_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.db");
    let store = Store::open(path.to_str().unwrap()).unwrap();
    let other_person = "0190a1b2-0000-7000-8000-0000000000e2";
    store.upsert_identity_claim(DEVICE, PERSON, Some("AAEC"), None).unwrap();
    store.upsert_identity_claim(DEVICE, other_person, None, None).unwrap();
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute(
        "UPDATE identity_claim SET biometric_envelope = (SELECT biometric_envelope FROM identity_claim WHERE person_id = ?1) WHERE person_id = ?2",
        [PERSON, other_person],
    )
    .unwrap();
    assert!(matches!(store.identity_claims(DEVICE), Err(DeviceError::Crypto { .. })));
}

#[test]
fn the_newest_permission_snapshot_wins_by_taken_at() {
    let (_dir, store) = temp_store();
    assert_eq!(store.latest_permission_snapshot(DEVICE).unwrap(), None);
    let old = store.record_permission_snapshot(DEVICE, TENANT, PERSONA, r#"{"camera": "granted"}"#, Some("2026-01-02T00:00:00Z")).unwrap();
    // Recorded later but taken earlier (a different offset, same day):
    store.record_permission_snapshot(DEVICE, TENANT, PERSONA, r#"{"camera": "denied"}"#, Some("2026-01-02T00:30:00+01:00")).unwrap();
    let latest = store.latest_permission_snapshot(DEVICE).unwrap().unwrap();
    assert_eq!(latest.snapshot_id, old.snapshot_id);
    assert_eq!(latest.permission_set_json, r#"{"camera":"granted"}"#);
    assert_eq!(latest.taken_at, "2026-01-02T00:00:00.000000Z");
    let newer = store.record_permission_snapshot(DEVICE, TENANT, PERSONA, r#"["location"]"#, None).unwrap();
    assert_eq!(store.latest_permission_snapshot(DEVICE).unwrap().unwrap(), newer);
    assert_eq!(store.latest_permission_snapshot("0190a1b2-0000-7000-8000-0000000000d9").unwrap(), None);
    assert!(matches!(store.record_permission_snapshot(DEVICE, TENANT, PERSONA, "42", None), Err(DeviceError::Validation { .. })));
}
