//! Wire types shared across processes: QUIC command-stream frames and device
//! sync batches, serialised as CBOR. No I/O lives here.

pub mod command;

use serde::{Serialize, de::DeserializeOwned};

/// Encodes a frame as CBOR.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, ciborium::ser::Error<std::io::Error>> {
    let mut out = Vec::new();
    ciborium::into_writer(value, &mut out)?;
    Ok(out)
}

/// How deeply a CBOR frame may nest arrays and maps: the decoder recurses
/// once per level, on the stack of whoever reads the frame (the hub's
/// workers), so a peer's frame must not choose how deep. Room for the
/// frame's own levels around a JSON value at the hub's JSON bound (64).
pub const MAX_NESTING: usize = 72;

/// Decodes a CBOR frame, refusing one nested deeper than [`MAX_NESTING`].
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ciborium::de::Error<std::io::Error>> {
    ciborium::de::from_reader_with_recursion_limit(bytes, MAX_NESTING)
}

/// Device sync wire types: what device-core sends to and reads from the hub's
/// `hdk-sync` supporting routes. The HTTP bodies are JSON (the app's HTTP
/// stack carries them); the same types encode as CBOR through [`encode`].
pub mod sync {
    use serde::{Deserialize, Serialize};

    /// Path of the route a device pushes its outbox to.
    pub const BATCHES_PATH: &str = "/api/hdk/sync/batches";
    /// Path of the route a device pulls event types and policies from.
    pub const POLICIES_PATH: &str = "/api/hdk/sync/policies";
    /// Most events one batch may carry; the hub answers 400 above it.
    pub const MAX_BATCH_EVENTS: usize = 500;

    /// `POST /api/hdk/sync/batches` request body.
    ///
    /// Batches are idempotent by event, not by batch: the hub stores each
    /// event once per idempotency key, and a resumed sync re-sends the
    /// unacknowledged events of an interrupted batch under a new batch_id.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct SyncBatch {
        /// Chosen by the device (UUIDv7), echoed in the ack; for logs only.
        pub batch_id: String,
        pub device_uuid: String,
        pub events: Vec<SyncEvent>,
    }

    /// One outbox event.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct SyncEvent {
        /// Unique per tenant; the hub's de-duplication key.
        pub idempotency_key: String,
        /// The device's id of the event (UUIDv7).
        pub event_id: String,
        pub event_type: String,
        pub payload: serde_json::Value,
        /// When the device enqueued it (RFC 3339 UTC, microseconds).
        pub occurred_at: String,
    }

    /// `POST /api/hdk/sync/batches` answer (200; the hub may wrap it as
    /// `{ "success": true, "data": <this> }`). Every key of the batch appears
    /// in exactly one list; a key in none of them was not processed and the
    /// device sends it again.
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    pub struct SyncBatchAck {
        pub batch_id: String,
        /// Stored now.
        #[serde(default)]
        pub accepted: Vec<String>,
        /// Already stored by an earlier batch: as good as accepted.
        #[serde(default)]
        pub duplicates: Vec<String>,
        /// Refused for good (unknown event type, payload too large, ...):
        /// the device stops sending them.
        #[serde(default)]
        pub rejected: Vec<RejectedEvent>,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct RejectedEvent {
        pub idempotency_key: String,
        pub reason: String,
    }

    /// `GET /api/hdk/sync/policies` answer (200, possibly wrapped like the
    /// ack): the tenant's registered audit event types.
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    pub struct SyncPolicies {
        pub event_types: Vec<EventTypePolicy>,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct EventTypePolicy {
        pub event_type: String,
        /// `crdt`, `lww`, `merge`, `event-sourcing` or `human-review`; kept
        /// as text so a newer hub's policy does not break an older device.
        pub conflict_policy: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub retention_class: Option<String>,
        #[serde(default = "one")]
        pub schema_version: u32,
    }

    fn one() -> u32 {
        1
    }
}
