//! The one error type of device-core, exported across the FFI as is.

/// Every failure the library reports. The variants say what the app should
/// do about it (fix its input, register a type, retry the sync, ...), and each
/// carries a human-readable reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[cfg_attr(feature = "ffi", derive(uniffi::Error))]
pub enum DeviceError {
    /// The caller's input is malformed (bad JSON, blank field, bad base64, ...).
    #[error("validation failed: {reason}")]
    Validation { reason: String },
    /// A conflict was to be resolved for an event type nobody registered.
    #[error("event type `{event_type}` is not registered; register it with a conflict policy first")]
    UnregisteredEventType { event_type: String },
    /// The named record does not exist.
    #[error("not found: {reason}")]
    NotFound { reason: String },
    /// The record exists but is in a state that forbids the operation.
    #[error("conflict: {reason}")]
    Conflict { reason: String },
    /// SQLite failed (disk full, corrupt file, schema newer than this library).
    #[error("storage failed: {reason}")]
    Storage { reason: String },
    /// Encryption, decryption or key handling failed.
    #[error("crypto failed: {reason}")]
    Crypto { reason: String },
    /// An attestation envelope did not verify.
    #[error("attestation rejected: {reason}")]
    Attestation { reason: String },
    /// The app's transport could not deliver a request; the sync can be retried.
    #[error("transport failed: {reason}")]
    Transport { reason: String },
    /// The hub answered with a status or body the library cannot use.
    #[error("hub answered {status}: {reason}")]
    Hub { status: u16, reason: String },
}

impl DeviceError {
    pub(crate) fn validation(reason: impl Into<String>) -> Self {
        DeviceError::Validation { reason: reason.into() }
    }
}

#[cfg(feature = "store")]
impl From<rusqlite::Error> for DeviceError {
    fn from(e: rusqlite::Error) -> Self {
        DeviceError::Storage { reason: e.to_string() }
    }
}

// A foreign implementation (Kotlin, Swift, Python) that throws something
// other than a DeviceError surfaces as a transport-level failure, so a buggy
// app callback never aborts the process.
#[cfg(feature = "ffi")]
impl From<uniffi::UnexpectedUniFFICallbackError> for DeviceError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        DeviceError::Transport { reason: format!("app callback failed: {}", e.reason) }
    }
}
