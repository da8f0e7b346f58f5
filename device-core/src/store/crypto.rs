//! AES-256-GCM sealing of identity-claim envelopes at rest.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use rand_core::{OsRng, RngCore};

use crate::error::DeviceError;

const NONCE_LEN: usize = 12;

/// A fresh random 256-bit key.
pub(super) fn random_key() -> [u8; 32] {
    let mut key = [0u8; 32];
    OsRng.fill_bytes(&mut key);
    key
}

/// Seals and opens values with one key. Each value gets a random 96-bit
/// nonce stored in front of its ciphertext, and associated data that ties
/// the ciphertext to its row and column, so a sealed value copied into
/// another row does not open there.
pub(super) struct Sealer {
    cipher: Aes256Gcm,
}

impl Sealer {
    pub(super) fn new(key: &[u8]) -> Result<Self, DeviceError> {
        Aes256Gcm::new_from_slice(key).map(|cipher| Sealer { cipher }).map_err(|_| DeviceError::Crypto { reason: "the store key must be 32 bytes".into() })
    }

    pub(super) fn seal(&self, plaintext: &[u8], aad: &[u8]) -> Result<Vec<u8>, DeviceError> {
        let mut nonce = [0u8; NONCE_LEN];
        OsRng.fill_bytes(&mut nonce);
        let ciphertext = self
            .cipher
            .encrypt(Nonce::from_slice(&nonce), Payload { msg: plaintext, aad })
            .map_err(|_| DeviceError::Crypto { reason: "encryption failed".into() })?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&ciphertext);
        Ok(out)
    }

    pub(super) fn open(&self, sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>, DeviceError> {
        if sealed.len() < NONCE_LEN {
            return Err(DeviceError::Crypto { reason: "sealed value is truncated".into() });
        }
        let (nonce, ciphertext) = sealed.split_at(NONCE_LEN);
        self.cipher
            .decrypt(Nonce::from_slice(nonce), Payload { msg: ciphertext, aad })
            .map_err(|_| DeviceError::Crypto { reason: "sealed value does not open with this key".into() })
    }
}
