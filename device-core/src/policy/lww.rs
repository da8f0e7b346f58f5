//! Last-writer-wins: the side with the later timestamp wins whole.

use std::cmp::Ordering;

use serde_json::Value;

use super::{Resolution, event_time};
use crate::canonical::canonical_json;
use crate::error::DeviceError;

pub(super) fn resolve(a: &Value, b: &Value) -> Result<Resolution, DeviceError> {
    let ta = event_time(a)?.ok_or_else(|| DeviceError::validation("lww: input_a needs a timestamp"))?;
    let tb = event_time(b)?.ok_or_else(|| DeviceError::validation("lww: input_b needs a timestamp"))?;
    // Equal timestamps fall back to the greater canonical JSON text, which
    // depends only on the two values, never on which side was `a`: the
    // result is commutative and the device and hub pick the same winner.
    let order = ta.cmp(&tb).then_with(|| canonical_json(a).cmp(&canonical_json(b)));
    let winner = if order == Ordering::Less { b } else { a };
    Ok(Resolution::Resolved { value: winner.clone(), conflicts: Vec::new() })
}
