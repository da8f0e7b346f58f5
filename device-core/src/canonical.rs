//! Canonical JSON text, the deterministic tie-breaker shared by the device and the hub.
//!
//! serde_json's map order depends on whether some crate in the build enabled
//! `preserve_order`; the hub's dependency tree may, the phone's may not. Tie
//! breaks must agree on both, so this writer sorts object keys itself.

use serde_json::Value;

/// Writes `value` with object keys sorted by their UTF-8 bytes and no
/// whitespace. Equal JSON values always give equal text.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*key).clone()).to_string());
                out.push(':');
                write(&map[*key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, out);
            }
            out.push(']');
        }
        // Scalars have one textual form in serde_json already.
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_at_every_depth() {
        let v = json!({"b": 1, "a": {"d": [true, null], "c": "x"}});
        assert_eq!(canonical_json(&v), r#"{"a":{"c":"x","d":[true,null]},"b":1}"#);
    }
}
