//! device-core: the on-device (hdk) surfaces, offline on SQLite, exposed to
//! mobile apps through uniffi. This file holds only the exported API; the
//! work is done by the modules it delegates to.
//!
//! Features: `store` (SQLite offline store and sync) and `ffi` (the uniffi
//! API below), both default. With `default-features = false` only the pure
//! modules build: [`policy`] (conflict resolution) and [`attestation`]
//! (envelope verification), which the hub links.

pub mod attestation;
pub mod canonical;
pub mod error;
pub mod policy;
#[cfg(feature = "store")]
pub mod store;
pub mod time;

pub use error::DeviceError;

#[cfg(feature = "ffi")]
uniffi::setup_scaffolding!();

#[cfg(feature = "ffi")]
pub use exported::*;

/// The uniffi surface. JSON crosses the boundary as text.
#[cfg(feature = "ffi")]
mod exported {
    use std::sync::Arc;

    use crate::attestation::{self, SoftwareKey, VerifiedAttestation};
    use crate::error::DeviceError;
    use crate::policy::{self, ConflictPolicy};
    use crate::store::{
        DrainResult, EnqueueOutcome, EventTypeRecord, HttpTransport, IdentityClaim, NewEvent, OutboxStats, PermissionSnapshot, PullReport, ResolutionRecord,
        ReviewChoice, ReviewItem, Store, SyncReport,
    };

    /// The device's attestation key, which the app implements over the
    /// Secure Enclave (iOS) or Android Keystore so the private key never
    /// leaves the hardware.
    #[uniffi::export(with_foreign)]
    pub trait DeviceKey: Send + Sync {
        /// `secure-enclave`, `key-attestation`, `app-attest` or `play-integrity`.
        fn method(&self) -> String;
        /// The key's handle in the app's keystore (`device_key_ref`).
        fn key_ref(&self) -> String;
        /// SEC1 P-256 public key.
        fn public_key(&self) -> Result<Vec<u8>, DeviceError>;
        /// ECDSA P-256 / SHA-256 signature of `message`, DER or r||s.
        fn sign(&self, message: Vec<u8>) -> Result<Vec<u8>, DeviceError>;
    }

    /// Signs the hub's challenge with the device key and answers the
    /// attestation envelope as JSON text (the `signature_envelope`).
    #[uniffi::export]
    pub fn build_attestation(key: Arc<dyn DeviceKey>, device_uuid: String, challenge: String) -> Result<String, DeviceError> {
        let public_key = key.public_key()?;
        let envelope = attestation::build_envelope(&key.method(), &device_uuid, &key.key_ref(), &public_key, &challenge, |message| key.sign(message.to_vec()))?;
        serde_json::to_string(&envelope).map_err(|e| DeviceError::validation(e.to_string()))
    }

    /// Verifies an envelope against the issued challenge (what the hub does).
    #[uniffi::export]
    pub fn verify_attestation(envelope_json: String, challenge: String) -> Result<VerifiedAttestation, DeviceError> {
        attestation::verify_attestation(&envelope_json, &challenge)
    }

    /// Resolves two sides under a policy without any store: JSON in, the
    /// resolution JSON (`policy`, `status`, `result`, `conflicts`) out.
    #[uniffi::export]
    pub fn resolve_conflict(policy: ConflictPolicy, input_a_json: String, input_b_json: String) -> Result<String, DeviceError> {
        let a = crate::store::parse_json("input_a", &input_a_json)?;
        let b = crate::store::parse_json("input_b", &input_b_json)?;
        Ok(policy::resolve(policy, &a, &b)?.to_json(policy).to_string())
    }

    /// Applies a JSON object's fields to an automerge document (a new one
    /// when absent) and answers it saved, base64: how an app edits values of
    /// a `crdt` event type.
    #[uniffi::export]
    pub fn crdt_update(document_base64: Option<String>, fields_json: String) -> Result<String, DeviceError> {
        let fields = crate::store::parse_json("fields", &fields_json)?;
        policy::update_document(document_base64.as_deref(), &fields)
    }

    /// Parses a policy's wire name (`event-sourcing`, ...).
    #[uniffi::export]
    pub fn parse_conflict_policy(name: String) -> Result<ConflictPolicy, DeviceError> {
        ConflictPolicy::parse(&name)
    }

    /// An in-memory P-256 key for tests and development builds.
    #[derive(uniffi::Object)]
    pub struct SoftwareDeviceKey {
        inner: SoftwareKey,
    }

    #[uniffi::export]
    impl SoftwareDeviceKey {
        #[uniffi::constructor]
        pub fn generate() -> Arc<Self> {
            Arc::new(SoftwareDeviceKey { inner: SoftwareKey::generate() })
        }

        #[uniffi::constructor]
        pub fn from_secret(secret: Vec<u8>) -> Result<Arc<Self>, DeviceError> {
            Ok(Arc::new(SoftwareDeviceKey { inner: SoftwareKey::from_secret(&secret)? }))
        }

        pub fn secret(&self) -> Vec<u8> {
            self.inner.secret()
        }

        pub fn public_key(&self) -> Vec<u8> {
            self.inner.public_key()
        }

        pub fn sign(&self, message: Vec<u8>) -> Vec<u8> {
            self.inner.sign(&message)
        }
    }

    /// The offline store; safe to share across threads.
    #[derive(uniffi::Object)]
    pub struct DeviceStore {
        inner: Store,
    }

    #[uniffi::export]
    impl DeviceStore {
        /// Opens a store whose encryption key lives in the store file.
        #[uniffi::constructor]
        pub fn open(path: String) -> Result<Arc<Self>, DeviceError> {
            Ok(Arc::new(DeviceStore { inner: Store::open(&path)? }))
        }

        /// Opens a store with a 32-byte key the app keeps in its keystore.
        #[uniffi::constructor]
        pub fn open_with_key(path: String, key: Vec<u8>) -> Result<Arc<Self>, DeviceError> {
            Ok(Arc::new(DeviceStore { inner: Store::open_with_key(&path, &key)? }))
        }

        pub fn schema_version(&self) -> Result<u32, DeviceError> {
            self.inner.schema_version()
        }

        pub fn enqueue(&self, event_type: String, payload_json: String, idempotency_key: String) -> Result<EnqueueOutcome, DeviceError> {
            self.inner.enqueue(&NewEvent { event_type, payload_json, idempotency_key })
        }

        pub fn enqueue_batch(&self, events: Vec<NewEvent>) -> Result<Vec<EnqueueOutcome>, DeviceError> {
            self.inner.enqueue_batch(&events)
        }

        pub fn drain(&self, limit: u32) -> Result<DrainResult, DeviceError> {
            self.inner.drain(limit)
        }

        pub fn outbox_stats(&self) -> Result<OutboxStats, DeviceError> {
            self.inner.outbox_stats()
        }

        /// Answers true when the type is new.
        pub fn register_event_type(&self, event_type: String, policy: ConflictPolicy) -> Result<bool, DeviceError> {
            self.inner.register_event_type(&event_type, policy)
        }

        pub fn event_types(&self) -> Result<Vec<EventTypeRecord>, DeviceError> {
            self.inner.event_types()
        }

        pub fn resolve(&self, event_type: String, input_a_json: String, input_b_json: String) -> Result<ResolutionRecord, DeviceError> {
            self.inner.resolve(&event_type, &input_a_json, &input_b_json)
        }

        pub fn pending_reviews(&self) -> Result<Vec<ReviewItem>, DeviceError> {
            self.inner.pending_reviews()
        }

        /// Answers the chosen side's JSON.
        pub fn decide_review(&self, review_id: String, choice: ReviewChoice) -> Result<String, DeviceError> {
            self.inner.decide_review(&review_id, choice)
        }

        pub fn upsert_identity_claim(
            &self,
            device_uuid: String,
            person_id: String,
            biometric_template_envelope: Option<String>,
            pin_envelope: Option<String>,
        ) -> Result<IdentityClaim, DeviceError> {
            self.inner.upsert_identity_claim(&device_uuid, &person_id, biometric_template_envelope.as_deref(), pin_envelope.as_deref())
        }

        pub fn identity_claims(&self, device_uuid: String) -> Result<Vec<IdentityClaim>, DeviceError> {
            self.inner.identity_claims(&device_uuid)
        }

        pub fn record_permission_snapshot(
            &self,
            device_uuid: String,
            tenant_id: String,
            persona_id: String,
            permission_set_json: String,
            taken_at: Option<String>,
        ) -> Result<PermissionSnapshot, DeviceError> {
            self.inner.record_permission_snapshot(&device_uuid, &tenant_id, &persona_id, &permission_set_json, taken_at.as_deref())
        }

        pub fn latest_permission_snapshot(&self, device_uuid: String) -> Result<Option<PermissionSnapshot>, DeviceError> {
            self.inner.latest_permission_snapshot(&device_uuid)
        }

        /// Pushes the pending outbox to the hub through the app's transport.
        pub fn push_outbox(&self, transport: Arc<dyn HttpTransport>, device_uuid: String, batch_size: u32) -> Result<SyncReport, DeviceError> {
            self.inner.push_outbox(transport.as_ref(), &device_uuid, batch_size)
        }

        /// Pulls the tenant's event types and policies from the hub.
        pub fn pull_policies(&self, transport: Arc<dyn HttpTransport>) -> Result<PullReport, DeviceError> {
            self.inner.pull_policies(transport.as_ref())
        }
    }
}
