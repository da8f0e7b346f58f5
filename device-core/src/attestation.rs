//! Device attestation: the envelope a device signs over a hub-issued
//! challenge, and its verification (pure p256, shared with the hub).
//!
//! What this proves: the device holds the private half of the P-256 key
//! whose public half is in the envelope, and signed this very challenge.
//! Checking a vendor certificate chain for that key (App Attest, Play
//! Integrity) is not part of this envelope; the hub binds the key to the
//! device through `device_key_ref` on registration.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use p256::ecdsa::signature::{Signer, Verifier};
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

use crate::error::DeviceError;

/// Version of the envelope layout and of the signed message.
pub const ENVELOPE_VERSION: u32 = 1;
/// The only algorithm: ECDSA over P-256 with SHA-256.
pub const ALGORITHM: &str = "ES256";
/// The attestation methods of the interface document. The document names
/// two of them and leaves two vendor-specific values open; these are ours.
pub const METHODS: [&str; 4] = ["secure-enclave", "key-attestation", "app-attest", "play-integrity"];

/// The JSON the device sends as `signature_envelope`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttestationEnvelope {
    pub version: u32,
    pub algorithm: String,
    pub method: String,
    pub device_uuid: String,
    /// The app's handle of the key in its secure store (`device_key_ref`).
    pub key_ref: String,
    /// SEC1 public key (uncompressed or compressed), base64.
    pub public_key: String,
    /// The challenge exactly as the hub issued it.
    pub challenge: String,
    /// When the device signed, RFC 3339 UTC.
    pub signed_at: String,
    /// ECDSA signature, DER (what Secure Enclave and Android Keystore
    /// produce) or fixed 64-byte r||s, base64.
    pub signature: String,
}

/// What a verified envelope tells the hub.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "ffi", derive(uniffi::Record))]
pub struct VerifiedAttestation {
    pub method: String,
    pub device_uuid: String,
    pub key_ref: String,
    pub public_key: String,
    pub signed_at: String,
}

/// The exact bytes that are signed. Every field that means something is in
/// it, separated by newlines, which `check_fields` forbids inside fields so
/// no two envelopes share a message.
pub fn signed_message(method: &str, device_uuid: &str, key_ref: &str, public_key_b64: &str, challenge: &str, signed_at: &str) -> Vec<u8> {
    format!("hdk-attestation-v{ENVELOPE_VERSION}\n{ALGORITHM}\n{method}\n{device_uuid}\n{key_ref}\n{public_key_b64}\n{challenge}\n{signed_at}").into_bytes()
}

fn check_fields(fields: &[(&str, &str)]) -> Result<(), DeviceError> {
    for (name, value) in fields {
        if value.trim().is_empty() {
            return Err(DeviceError::validation(format!("attestation: {name} is blank")));
        }
        if value.contains('\n') {
            return Err(DeviceError::validation(format!("attestation: {name} contains a newline")));
        }
    }
    Ok(())
}

fn check_method(method: &str) -> Result<(), DeviceError> {
    if METHODS.contains(&method) { Ok(()) } else { Err(DeviceError::validation(format!("attestation method `{method}` is not one of {}", METHODS.join(", ")))) }
}

/// Builds a signed envelope. `sign` receives the message and returns an
/// ECDSA P-256/SHA-256 signature over it (the app's secure key does this).
pub fn build_envelope(
    method: &str,
    device_uuid: &str,
    key_ref: &str,
    public_key_sec1: &[u8],
    challenge: &str,
    sign: impl FnOnce(&[u8]) -> Result<Vec<u8>, DeviceError>,
) -> Result<AttestationEnvelope, DeviceError> {
    check_method(method)?;
    check_fields(&[("device_uuid", device_uuid), ("key_ref", key_ref), ("challenge", challenge)])?;
    VerifyingKey::from_sec1_bytes(public_key_sec1).map_err(|_| DeviceError::Crypto { reason: "device key is not a P-256 public key".into() })?;
    let public_key = STANDARD.encode(public_key_sec1);
    let signed_at = crate::time::now();
    let message = signed_message(method, device_uuid, key_ref, &public_key, challenge, &signed_at);
    let signature = sign(&message)?;
    Ok(AttestationEnvelope {
        version: ENVELOPE_VERSION,
        algorithm: ALGORITHM.into(),
        method: method.into(),
        device_uuid: device_uuid.into(),
        key_ref: key_ref.into(),
        public_key,
        challenge: challenge.into(),
        signed_at,
        signature: STANDARD.encode(signature),
    })
}

/// Verifies an envelope (its JSON text) against the challenge the hub
/// issued. Any failure is `DeviceError::Attestation` with the reason.
pub fn verify_attestation(envelope_json: &str, expected_challenge: &str) -> Result<VerifiedAttestation, DeviceError> {
    let envelope: AttestationEnvelope =
        serde_json::from_str(envelope_json).map_err(|e| reject(format!("envelope is not valid JSON of the expected shape: {e}")))?;
    verify_envelope(&envelope, expected_challenge)
}

/// Verifies a parsed envelope against the challenge the hub issued.
pub fn verify_envelope(envelope: &AttestationEnvelope, expected_challenge: &str) -> Result<VerifiedAttestation, DeviceError> {
    if envelope.version != ENVELOPE_VERSION {
        return Err(reject(format!("unsupported envelope version {}", envelope.version)));
    }
    if envelope.algorithm != ALGORITHM {
        return Err(reject(format!("unsupported algorithm `{}`", envelope.algorithm)));
    }
    check_method(&envelope.method).map_err(|e| reject(e.to_string()))?;
    check_fields(&[
        ("device_uuid", &envelope.device_uuid),
        ("key_ref", &envelope.key_ref),
        ("challenge", &envelope.challenge),
        ("signed_at", &envelope.signed_at),
        ("public_key", &envelope.public_key),
    ])
    .map_err(|e| reject(e.to_string()))?;
    if envelope.challenge != expected_challenge {
        return Err(reject("challenge does not match the one issued".into()));
    }
    let key_bytes = STANDARD.decode(&envelope.public_key).map_err(|_| reject("public_key is not base64".into()))?;
    let key = VerifyingKey::from_sec1_bytes(&key_bytes).map_err(|_| reject("public_key is not a P-256 key".into()))?;
    let sig_bytes = STANDARD.decode(&envelope.signature).map_err(|_| reject("signature is not base64".into()))?;
    let signature = Signature::from_der(&sig_bytes)
        .or_else(|_| Signature::from_slice(&sig_bytes))
        .map_err(|_| reject("signature is neither DER nor 64-byte r||s".into()))?;
    // Platform keystores may emit high-S signatures; both forms are valid
    // ECDSA, so normalise before checking.
    let signature = signature.normalize_s().unwrap_or(signature);
    let message = signed_message(&envelope.method, &envelope.device_uuid, &envelope.key_ref, &envelope.public_key, &envelope.challenge, &envelope.signed_at);
    key.verify(&message, &signature).map_err(|_| reject("signature does not verify".into()))?;
    Ok(VerifiedAttestation {
        method: envelope.method.clone(),
        device_uuid: envelope.device_uuid.clone(),
        key_ref: envelope.key_ref.clone(),
        public_key: envelope.public_key.clone(),
        signed_at: envelope.signed_at.clone(),
    })
}

fn reject(reason: String) -> DeviceError {
    DeviceError::Attestation { reason }
}

/// A P-256 key held in memory: for tests and for development builds, never
/// a substitute for the Secure Enclave or Android Keystore on a phone.
pub struct SoftwareKey {
    key: SigningKey,
}

impl SoftwareKey {
    /// A fresh random key.
    pub fn generate() -> Self {
        SoftwareKey { key: SigningKey::random(&mut rand_core::OsRng) }
    }

    /// A key from its 32-byte secret scalar.
    pub fn from_secret(secret: &[u8]) -> Result<Self, DeviceError> {
        SigningKey::from_slice(secret).map(|key| SoftwareKey { key }).map_err(|_| DeviceError::Crypto { reason: "secret is not a valid P-256 scalar".into() })
    }

    /// The secret scalar, so a test can persist and reload the key.
    pub fn secret(&self) -> Vec<u8> {
        self.key.to_bytes().to_vec()
    }

    /// Uncompressed SEC1 public key (65 bytes).
    pub fn public_key(&self) -> Vec<u8> {
        self.key.verifying_key().to_encoded_point(false).as_bytes().to_vec()
    }

    /// DER ECDSA-SHA256 signature of `message`, as phone keystores return.
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        let signature: Signature = self.key.sign(message);
        signature.to_der().as_bytes().to_vec()
    }
}
