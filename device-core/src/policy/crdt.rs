//! CRDT: two automerge documents merged into one.

use automerge::transaction::Transactable;
use automerge::{AutoCommit, AutoSerde, Automerge, ObjId, ObjType, ScalarValue};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::Resolution;
use crate::error::DeviceError;

/// Reads a side: base64 text of a saved automerge document, or an object
/// with that text under `automerge`.
pub fn decode_document(side: &Value) -> Result<Automerge, DeviceError> {
    Automerge::load(&document_bytes(side)?).map_err(|e| DeviceError::validation(format!("crdt: input is not an automerge document: {e}")))
}

/// The saved document bytes of one side (base64 text, or `{ automerge }`).
fn document_bytes(side: &Value) -> Result<Vec<u8>, DeviceError> {
    let text = match side {
        Value::String(s) => s.as_str(),
        Value::Object(map) => map
            .get("automerge")
            .and_then(Value::as_str)
            .ok_or_else(|| DeviceError::validation("crdt: an object input needs the saved document as base64 under `automerge`"))?,
        _ => return Err(DeviceError::validation("crdt: input must be a base64 automerge document")),
    };
    decode_bytes(text)
}

pub fn encode_document(doc: &Automerge) -> String {
    STANDARD.encode(doc.save())
}

pub(super) fn resolve(a: &Value, b: &Value) -> Result<Resolution, DeviceError> {
    let mut merged = decode_document(a)?;
    // Loading the other side's saved bytes incrementally applies only the
    // changes `merged` lacks, without first building the other document
    // and re-extracting its changes (the bulk of a plain `merge`).
    merged.load_incremental(&document_bytes(b)?).map_err(|e| DeviceError::validation(format!("crdt: input is not an automerge document: {e}")))?;
    // Heads identify the merged history independently of merge order; the
    // sorted list lets callers compare results without loading documents.
    let mut heads: Vec<String> = merged.get_heads().iter().map(|h| h.to_string()).collect();
    heads.sort();
    let document = serde_json::to_value(AutoSerde::from(&merged)).map_err(|e| DeviceError::validation(format!("crdt: document has no JSON view: {e}")))?;
    Ok(Resolution::Resolved {
        // Saved without DEFLATE on the columns: still a complete document
        // any automerge loads, and the merge's largest single cost otherwise.
        value: json!({ "automerge": STANDARD.encode(merged.save_nocompress()), "heads": heads, "document": document }),
        conflicts: Vec::new(),
    })
}

/// Applies a JSON object's fields to a document (a new one when `document`
/// is `None`) as one change, and answers the saved document as base64.
/// Apps without an automerge library of their own edit CRDT-policy values
/// through this; a loaded document gets a fresh actor, so two devices that
/// edit copies of one document make concurrent changes that `crdt` merges.
pub fn update_document(document: Option<&str>, fields: &Value) -> Result<String, DeviceError> {
    let Value::Object(map) = fields else {
        return Err(DeviceError::validation("crdt: fields must be a JSON object"));
    };
    let mut doc = match document {
        Some(text) => AutoCommit::load(&decode_bytes(text)?).map_err(|e| DeviceError::validation(format!("crdt: input is not an automerge document: {e}")))?,
        None => AutoCommit::new(),
    };
    for (key, value) in map {
        put(&mut doc, &automerge::ROOT, Place::Key(key), value)?;
    }
    doc.commit();
    Ok(STANDARD.encode(doc.save()))
}

fn decode_bytes(text: &str) -> Result<Vec<u8>, DeviceError> {
    STANDARD.decode(text).map_err(|e| DeviceError::validation(format!("crdt: input is not base64: {e}")))
}

enum Place<'a> {
    Key(&'a str),
    Index(usize),
}

fn put(doc: &mut AutoCommit, obj: &ObjId, place: Place<'_>, value: &Value) -> Result<(), DeviceError> {
    let fail = |e: automerge::AutomergeError| DeviceError::validation(format!("crdt: cannot write value: {e}"));
    let scalar = |v: &Value| -> Option<ScalarValue> {
        Some(match v {
            Value::Null => ScalarValue::Null,
            Value::Bool(b) => ScalarValue::Boolean(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => ScalarValue::Int(i),
                (None, Some(u)) => ScalarValue::Uint(u),
                _ => ScalarValue::F64(n.as_f64().unwrap_or(0.0)),
            },
            Value::String(s) => ScalarValue::Str(s.as_str().into()),
            _ => return None,
        })
    };
    if let Some(s) = scalar(value) {
        return match place {
            Place::Key(k) => doc.put(obj, k, s).map_err(fail),
            Place::Index(i) => doc.insert(obj, i, s).map_err(fail),
        };
    }
    let kind = if value.is_object() { ObjType::Map } else { ObjType::List };
    let child = match place {
        Place::Key(k) => doc.put_object(obj, k, kind).map_err(fail)?,
        Place::Index(i) => doc.insert_object(obj, i, kind).map_err(fail)?,
    };
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                put(doc, &child, Place::Key(k), v)?;
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                put(doc, &child, Place::Index(i), v)?;
            }
        }
        _ => unreachable!("scalars returned above"),
    }
    Ok(())
}
