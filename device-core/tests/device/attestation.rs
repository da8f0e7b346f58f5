//! Attestation envelopes: built with a device key, verified as the hub does.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use device_core::attestation::{AttestationEnvelope, SoftwareKey, build_envelope, verify_attestation, verify_envelope};
use device_core::{DeviceError, DeviceKey, SoftwareDeviceKey, build_attestation};

const DEVICE: &str = "0190a1b2-0000-7000-8000-000000000001";

fn envelope(key: &SoftwareKey, challenge: &str) -> AttestationEnvelope {
    build_envelope("secure-enclave", DEVICE, "keychain:attest-1", &key.public_key(), challenge, |m| Ok(key.sign(m))).unwrap()
}

#[test]
fn an_envelope_verifies_against_its_challenge() {
    let key = SoftwareKey::generate();
    let env = envelope(&key, "challenge-123");
    let json = serde_json::to_string(&env).unwrap();
    let verified = verify_attestation(&json, "challenge-123").unwrap();
    assert_eq!(verified.method, "secure-enclave");
    assert_eq!(verified.device_uuid, DEVICE);
    assert_eq!(verified.key_ref, "keychain:attest-1");
    assert_eq!(STANDARD.decode(&verified.public_key).unwrap(), key.public_key());
}

#[test]
fn another_challenge_is_rejected() {
    let key = SoftwareKey::generate();
    let json = serde_json::to_string(&envelope(&key, "issued")).unwrap();
    let err = verify_attestation(&json, "other").unwrap_err();
    assert!(matches!(err, DeviceError::Attestation { ref reason } if reason.contains("challenge")), "{err}");
}

#[test]
fn tampering_with_any_signed_field_breaks_the_signature() {
    let key = SoftwareKey::generate();
    let good = envelope(&key, "c");
    let mut cases = Vec::new();
    let mut e = good.clone();
    e.device_uuid = "0190a1b2-0000-7000-8000-000000000002".into();
    cases.push(e);
    let mut e = good.clone();
    e.method = "key-attestation".into();
    cases.push(e);
    let mut e = good.clone();
    e.key_ref = "other".into();
    cases.push(e);
    let mut e = good.clone();
    e.signed_at = "2020-01-01T00:00:00.000000Z".into();
    cases.push(e);
    let mut e = good.clone();
    e.public_key = STANDARD.encode(SoftwareKey::generate().public_key());
    cases.push(e);
    for bad in cases {
        let err = verify_envelope(&bad, "c").unwrap_err();
        assert_eq!(err, DeviceError::Attestation { reason: "signature does not verify".into() });
    }
    assert!(verify_envelope(&good, "c").is_ok());
}

#[test]
fn raw_r_s_signatures_verify_like_der() {
    let key = SoftwareKey::generate();
    let env = build_envelope("key-attestation", DEVICE, "ks:1", &key.public_key(), "c", |m| {
        let der = key.sign(m);
        let sig = p256::ecdsa::Signature::from_der(&der).unwrap();
        Ok(sig.to_bytes().to_vec())
    })
    .unwrap();
    assert!(verify_envelope(&env, "c").is_ok());
}

#[test]
fn unknown_methods_and_versions_are_refused() {
    let key = SoftwareKey::generate();
    assert!(matches!(build_envelope("software", DEVICE, "k", &key.public_key(), "c", |m| Ok(key.sign(m))), Err(DeviceError::Validation { .. })));
    let mut env = envelope(&key, "c");
    env.version = 2;
    assert!(matches!(verify_envelope(&env, "c"), Err(DeviceError::Attestation { .. })));
    assert!(matches!(verify_attestation("{\"not\": \"an envelope\"}", "c"), Err(DeviceError::Attestation { .. })));
}

#[test]
fn a_software_key_reloads_from_its_secret() {
    let key = SoftwareKey::generate();
    let again = SoftwareKey::from_secret(&key.secret()).unwrap();
    assert_eq!(key.public_key(), again.public_key());
    assert!(SoftwareKey::from_secret(&[0u8; 32]).is_err(), "zero is not a valid scalar");
}

/// A DeviceKey as an app implements it, over the software key.
struct AppKey(Arc<SoftwareDeviceKey>);

impl DeviceKey for AppKey {
    fn method(&self) -> String {
        "app-attest".into()
    }
    fn key_ref(&self) -> String {
        "enclave:42".into()
    }
    fn public_key(&self) -> Result<Vec<u8>, DeviceError> {
        Ok(self.0.public_key())
    }
    fn sign(&self, message: Vec<u8>) -> Result<Vec<u8>, DeviceError> {
        Ok(self.0.sign(message))
    }
}

#[test]
fn the_exported_api_builds_an_envelope_through_the_device_key_trait() {
    let key = Arc::new(AppKey(SoftwareDeviceKey::generate()));
    let json = build_attestation(key, DEVICE.into(), "hub-challenge".into()).unwrap();
    let env: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(env["method"], "app-attest");
    assert_eq!(env["key_ref"], "enclave:42");
    assert_eq!(env["algorithm"], "ES256");
    assert_eq!(device_core::verify_attestation(json, "hub-challenge".into()).unwrap().method, "app-attest");
}
