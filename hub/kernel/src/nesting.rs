//! Bounds on how deeply a text nests, checked before a recursive parser
//! sees it. A parser that recurses once per level (serde_json, Cedar's)
//! runs on a worker's stack; past a few hundred levels an unoptimised build
//! overflows it, and an overflow aborts the whole process, every tenant's
//! requests with it.
//!
//! serde_json has a recursion limit of its own, but a workspace build that
//! also compiles a crate enabling its `unbounded_depth` feature (uniffi's
//! tooling does) switches it off for every crate of that build; this check
//! holds whatever the features.

use crate::error::ApiError;

/// How deeply a JSON document the hub receives may nest arrays and objects.
pub const JSON_NESTING_LIMIT: usize = 64;

/// The deepest nesting of arrays and objects in JSON text, stopping as soon
/// as it passes `limit`. Brackets inside strings do not count; the text
/// need not be valid JSON (the parser reports that).
pub fn json_depth(bytes: &[u8], limit: usize) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in bytes {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > deepest {
                    deepest = depth;
                    if deepest > limit {
                        break;
                    }
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Refuses JSON text nested deeper than [`JSON_NESTING_LIMIT`] with a 400
/// naming `what` and the limit.
pub fn check_json(bytes: &[u8], what: &str) -> Result<(), ApiError> {
    if json_depth(bytes, JSON_NESTING_LIMIT) > JSON_NESTING_LIMIT {
        return Err(ApiError::invalid(format!("{what} nests arrays and objects more than {JSON_NESTING_LIMIT} levels deep")));
    }
    Ok(())
}

/// JSON text a client sent, parsed into a value after [`check_json`]; a
/// parse error is a 400 saying `what` must be JSON.
pub fn parse_json(bytes: &[u8], what: &str) -> Result<serde_json::Value, ApiError> {
    check_json(bytes, what)?;
    serde_json::from_slice(bytes).map_err(|e| ApiError::invalid(format!("{what} must be JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_brackets_outside_strings_only() {
        assert_eq!(json_depth(br#"{"a":[1,{"b":2}]}"#, 64), 3);
        assert_eq!(json_depth(br#"{"a":"[[[[{{{{\"]]]"}"#, 64), 1);
        assert_eq!(json_depth(br#"["\\", [1]]"#, 64), 2);
        assert_eq!(json_depth(b"12", 64), 0);
        let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(json_depth(deep.as_bytes(), 64), 65, "the scan stops past the limit");
        assert!(check_json(deep.as_bytes(), "request body").is_err());
        let edge = format!("{}1{}", "[".repeat(64), "]".repeat(64));
        assert!(check_json(edge.as_bytes(), "request body").is_ok());
    }
}
