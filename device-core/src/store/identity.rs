//! Identity claims (`hdk-idp`): a device bound to a person, with optional
//! biometric-template and PIN envelopes sealed at rest.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rusqlite::params;

use super::{Store, parse_uuid};
use crate::error::DeviceError;

/// A claim as the app reads it back: envelopes decrypted, as base64.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "ffi", derive(uniffi::Record))]
pub struct IdentityClaim {
    pub device_uuid: String,
    pub person_id: String,
    pub biometric_template_envelope: Option<String>,
    pub pin_envelope: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// Associated data binding a sealed envelope to its claim and column.
fn aad(device_uuid: &str, person_id: &str, column: &str) -> Vec<u8> {
    format!("identity_claim/{device_uuid}/{person_id}/{column}").into_bytes()
}

impl Store {
    /// Upserts the claim binding `device_uuid` to `person_id`. Envelopes are
    /// base64 (as on the wire); a claim with neither is accepted. An upsert
    /// states the whole claim: an envelope left out is cleared.
    pub fn upsert_identity_claim(
        &self,
        device_uuid: &str,
        person_id: &str,
        biometric_template_envelope: Option<&str>,
        pin_envelope: Option<&str>,
    ) -> Result<IdentityClaim, DeviceError> {
        let device_uuid = parse_uuid("device_uuid", device_uuid)?;
        let person_id = parse_uuid("person_id", person_id)?;
        let seal = |name: &str, value: Option<&str>| -> Result<Option<Vec<u8>>, DeviceError> {
            let Some(text) = value else { return Ok(None) };
            let bytes = STANDARD.decode(text.trim()).map_err(|_| DeviceError::validation(format!("{name} must be base64")))?;
            self.sealer.seal(&bytes, &aad(&device_uuid, &person_id, name)).map(Some)
        };
        let biometric = seal("biometric_template_envelope", biometric_template_envelope)?;
        let pin = seal("pin_envelope", pin_envelope)?;
        let now = crate::time::now();
        self.conn().execute(
            "INSERT INTO identity_claim (device_uuid, person_id, biometric_envelope, pin_envelope, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5)
             ON CONFLICT (device_uuid, person_id) DO UPDATE SET biometric_envelope = excluded.biometric_envelope,
                 pin_envelope = excluded.pin_envelope, updated_at = excluded.updated_at",
            params![device_uuid, person_id, biometric, pin, now],
        )?;
        self.identity_claims(&device_uuid)?
            .into_iter()
            .find(|c| c.person_id == person_id)
            .ok_or_else(|| DeviceError::Storage { reason: "claim vanished after upsert".into() })
    }

    /// Every claim on a device, by person, envelopes decrypted.
    pub fn identity_claims(&self, device_uuid: &str) -> Result<Vec<IdentityClaim>, DeviceError> {
        let device_uuid = parse_uuid("device_uuid", device_uuid)?;
        let rows = {
            let conn = self.conn();
            let mut stmt = conn.prepare(
                "SELECT person_id, biometric_envelope, pin_envelope, created_at, updated_at
                 FROM identity_claim WHERE device_uuid = ?1 ORDER BY person_id",
            )?;
            let mapped = stmt.query_map([&device_uuid], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, Option<Vec<u8>>>(1)?, r.get::<_, Option<Vec<u8>>>(2)?, r.get::<_, String>(3)?, r.get::<_, String>(4)?))
            })?;
            mapped.collect::<Result<Vec<_>, _>>()?
        };
        rows.into_iter()
            .map(|(person_id, bio, pin, created_at, updated_at)| {
                let open = |name: &str, sealed: Option<Vec<u8>>| -> Result<Option<String>, DeviceError> {
                    sealed.map(|s| self.sealer.open(&s, &aad(&device_uuid, &person_id, name)).map(|p| STANDARD.encode(p))).transpose()
                };
                Ok(IdentityClaim {
                    biometric_template_envelope: open("biometric_template_envelope", bio)?,
                    pin_envelope: open("pin_envelope", pin)?,
                    device_uuid: device_uuid.clone(),
                    person_id,
                    created_at,
                    updated_at,
                })
            })
            .collect()
    }
}
