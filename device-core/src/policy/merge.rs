//! Field-by-field merge of two JSON objects, reporting the fields that differed.

use serde_json::{Map, Value};

use super::{FieldConflict, Resolution};
use crate::canonical::canonical_json;
use crate::error::DeviceError;

pub(super) fn resolve(a: &Value, b: &Value) -> Result<Resolution, DeviceError> {
    let (Value::Object(a), Value::Object(b)) = (a, b) else {
        return Err(DeviceError::validation("merge: input_a and input_b must both be JSON objects"));
    };
    let mut conflicts = Vec::new();
    let value = merge_objects(a, b, "", &mut conflicts);
    Ok(Resolution::Resolved { value: Value::Object(value), conflicts })
}

/// Keys present on one side only are taken as they are; nested objects merge
/// recursively; any other difference is a conflict. A conflicting field takes
/// the value with the greater canonical JSON text: an arbitrary but
/// order-independent rule, so merge(a, b) == merge(b, a). The app sees every
/// such field in `conflicts` with both original values and can override.
fn merge_objects(a: &Map<String, Value>, b: &Map<String, Value>, path: &str, conflicts: &mut Vec<FieldConflict>) -> Map<String, Value> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = Map::new();
    for key in keys {
        let field = format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"));
        let merged = match (a.get(key), b.get(key)) {
            (Some(x), None) | (None, Some(x)) => x.clone(),
            (Some(Value::Object(x)), Some(Value::Object(y))) => Value::Object(merge_objects(x, y, &field, conflicts)),
            (Some(x), Some(y)) if x == y => x.clone(),
            (Some(x), Some(y)) => {
                conflicts.push(FieldConflict { field, input_a: x.clone(), input_b: y.clone() });
                if canonical_json(x) >= canonical_json(y) { x.clone() } else { y.clone() }
            }
            (None, None) => unreachable!("key came from one of the maps"),
        };
        out.insert(key.clone(), merged);
    }
    out
}
