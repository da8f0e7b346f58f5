//! Event sourcing: both sides are kept, as one log in a deterministic order.

use serde_json::{Value, json};

use super::{Resolution, event_time};
use crate::canonical::canonical_json;
use crate::error::DeviceError;

pub(super) fn resolve(a: &Value, b: &Value) -> Result<Resolution, DeviceError> {
    let mut keyed = Vec::new();
    for side in [a, b] {
        let events: Vec<&Value> = match side {
            Value::Array(items) => items.iter().collect(),
            one => vec![one],
        };
        for event in events {
            keyed.push((event_time(event)?, canonical_json(event), event.clone()));
        }
    }
    // Order by event time (events without one first), then by canonical
    // text; identical events collapse into one. The log is then a pure
    // function of the set of events, so the policy is commutative,
    // associative and idempotent.
    keyed.sort_by(|x, y| (x.0, &x.1).cmp(&(y.0, &y.1)));
    keyed.dedup_by(|x, y| x.1 == y.1);
    let events: Vec<Value> = keyed.into_iter().map(|(_, _, v)| v).collect();
    Ok(Resolution::Resolved { value: json!({ "events": events }), conflicts: Vec::new() })
}
