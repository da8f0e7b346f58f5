//! Sync conflict policies (`hdk-sync`): pure functions that resolve two sides
//! of a conflict. No SQLite, no FFI: the hub links this module unchanged.

mod crdt;
mod events;
mod lww;
mod merge;

use serde_json::{Value, json};

use crate::error::DeviceError;

pub use crdt::{decode_document, encode_document, update_document};

/// The five policies an audit event type may carry as `conflict_policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "ffi", derive(uniffi::Enum))]
pub enum ConflictPolicy {
    Crdt,
    Lww,
    Merge,
    EventSourcing,
    HumanReview,
}

impl ConflictPolicy {
    pub const ALL: [ConflictPolicy; 5] =
        [ConflictPolicy::Crdt, ConflictPolicy::Lww, ConflictPolicy::Merge, ConflictPolicy::EventSourcing, ConflictPolicy::HumanReview];

    /// The wire name, as in the interface document.
    pub fn as_str(self) -> &'static str {
        match self {
            ConflictPolicy::Crdt => "crdt",
            ConflictPolicy::Lww => "lww",
            ConflictPolicy::Merge => "merge",
            ConflictPolicy::EventSourcing => "event-sourcing",
            ConflictPolicy::HumanReview => "human-review",
        }
    }

    /// Parses a wire name; anything else is a validation error listing the
    /// allowed values.
    pub fn parse(name: &str) -> Result<Self, DeviceError> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == name)
            .ok_or_else(|| DeviceError::validation(format!("conflict_policy `{name}` is not one of crdt, lww, merge, event-sourcing, human-review")))
    }
}

/// One field on which the two sides of a `merge` disagreed.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldConflict {
    /// JSON Pointer of the field (`/address/city`).
    pub field: String,
    pub input_a: Value,
    pub input_b: Value,
}

/// What a policy decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    /// The policy produced one value. `conflicts` is non-empty only for
    /// `merge`, naming the fields it had to pick a side for.
    Resolved { value: Value, conflicts: Vec<FieldConflict> },
    /// `human-review`: nothing is decided; both sides wait for a person.
    NeedsReview { input_a: Value, input_b: Value },
}

impl Resolution {
    /// The JSON shape shared by the device API and the hub's
    /// `POST /api/hdk/sync/resolve` answer.
    pub fn to_json(&self, policy: ConflictPolicy) -> Value {
        match self {
            Resolution::Resolved { value, conflicts } => json!({
                "policy": policy.as_str(),
                "status": "resolved",
                "result": value,
                "conflicts": conflicts.iter().map(|c| json!({
                    "field": c.field, "input_a": c.input_a, "input_b": c.input_b,
                })).collect::<Vec<_>>(),
            }),
            Resolution::NeedsReview { input_a, input_b } => json!({
                "policy": policy.as_str(),
                "status": "pending_review",
                "input_a": input_a,
                "input_b": input_b,
            }),
        }
    }
}

/// Resolves `input_a` against `input_b` under `policy`.
///
/// Input shapes per policy:
/// - `crdt`: each side is an automerge document saved with `save()`, as a
///   base64 string or as `{"automerge": "<base64>"}`; the result is
///   `{"automerge": <merged, base64>, "heads": [...], "document": <JSON view>}`.
/// - `lww`: each side is `{"timestamp": <RFC 3339 text or epoch ms>, ...}`;
///   the result is the winning side, whole.
/// - `merge`: each side is a JSON object; the result is their field-by-field
///   merge and `conflicts` lists the fields that differed.
/// - `event-sourcing`: each side is one event or an array of events; the
///   result is `{"events": [...]}` holding both, de-duplicated, in a
///   deterministic order.
/// - `human-review`: any JSON; nothing is resolved.
pub fn resolve(policy: ConflictPolicy, input_a: &Value, input_b: &Value) -> Result<Resolution, DeviceError> {
    match policy {
        ConflictPolicy::Crdt => crdt::resolve(input_a, input_b),
        ConflictPolicy::Lww => lww::resolve(input_a, input_b),
        ConflictPolicy::Merge => merge::resolve(input_a, input_b),
        ConflictPolicy::EventSourcing => events::resolve(input_a, input_b),
        ConflictPolicy::HumanReview => Ok(Resolution::NeedsReview { input_a: input_a.clone(), input_b: input_b.clone() }),
    }
}

/// Reads an event's time from `timestamp` or `occurred_at`: RFC 3339 text or
/// integer milliseconds since the epoch. Returned as nanoseconds so both forms
/// compare on one scale.
pub(crate) fn event_time(value: &Value) -> Result<Option<i128>, DeviceError> {
    let raw = value.get("timestamp").or_else(|| value.get("occurred_at"));
    match raw {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => {
            let t = crate::time::parse(text)?;
            Ok(Some(i128::from(t.timestamp()) * 1_000_000_000 + i128::from(t.timestamp_subsec_nanos())))
        }
        Some(Value::Number(n)) => n
            .as_i64()
            .map(|ms| Some(i128::from(ms) * 1_000_000))
            .ok_or_else(|| DeviceError::validation("timestamp must be an integer of milliseconds or RFC 3339 text")),
        Some(_) => Err(DeviceError::validation("timestamp must be an integer of milliseconds or RFC 3339 text")),
    }
}
