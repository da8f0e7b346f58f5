//! U+0000 (NUL) is refused at the edge, in every string of every request.
//!
//! PostgreSQL's text types cannot hold it: a NUL bound to a statement fails
//! it with `invalid byte sequence for encoding "UTF8": 0x00`, which would
//! reach the client as a 500 on one backend and be stored on the other.
//! So a request that carries one is 400 `ValidationError` naming where,
//! before any handler runs: in a JSON body (values and object keys, at any
//! depth) through [`crate::body::parse_body`] and the scan of
//! [`crate::body::Lenient`]'s fast path, in the query string through
//! [`crate::extract::Params`] and `Page`, in a path parameter through the
//! gate's per-route layer, and in the few bodies a handler reads itself
//! (a form, an optional JSON body) through [`check_value`] and
//! [`check_pairs`]. Header values cannot carry one: hyper refuses the
//! request first (the test below pins the `http` crate's rule).

use serde_json::Value;

use crate::error::{ApiError, ApiResult};

/// The end of every refusal's sentence.
const WHY: &str = "must not contain the NUL character (U+0000)";

/// The most places one refusal names: a body of many NULs must not buy an
/// answer many times its size.
const MOST_NAMED: usize = 20;

/// The refusal of a field `name` that holds a NUL, for the checks of a
/// transport other than JSON or a query (the QUIC frames of robots).
pub fn refusal(name: &str) -> String {
    format!("{name} {WHY}")
}

/// Whether a JSON text holds a NUL in any string. In JSON a NUL can only be
/// written as the escape `\u0000` (a raw control character is invalid, the
/// parser refuses it, and `u` of an escape is lowercase only); that escape
/// is one when its backslash is not itself escaped, that is when the run of
/// backslashes ending at it is odd (`\\u0000` is a backslash and the text
/// `u0000`). Exact for valid JSON, and one `memmem` pass over the bytes.
pub fn in_json_text(bytes: &[u8]) -> bool {
    memchr::memmem::find_iter(bytes, br"\u0000").any(|at| bytes[..=at].iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 1)
}

/// 400 naming each string of `value` that holds a NUL, by its path
/// (`email`, `attributes.note`, `items[2].name`), and each object key that
/// holds one (shown with the NUL as `\u0000`).
pub fn check_value(value: &Value) -> ApiResult<()> {
    let mut found = Vec::new();
    walk(value, &mut String::new(), &mut found);
    refuse(found)
}

/// 400 naming each name-value pair (of a query string or a form, `what`
/// saying which) that holds a NUL in its name or its value.
pub fn check_pairs(pairs: &[(String, String)], what: &str) -> ApiResult<()> {
    let found = pairs
        .iter()
        .filter(|(k, v)| k.contains('\0') || v.contains('\0'))
        .map(|(k, _)| if k.contains('\0') { refusal(&format!("{what} name {}", shown(k))) } else { refusal(&format!("{what} {k}")) })
        .collect();
    refuse(found)
}

/// 400 naming a path parameter that holds a NUL once percent-decoded.
pub fn check_path_params<'a>(params: impl Iterator<Item = (&'a str, &'a str)>) -> ApiResult<()> {
    refuse(params.filter(|(_, v)| v.contains('\0')).map(|(k, _)| refusal(&format!("path parameter {k}"))).collect())
}

fn refuse(mut found: Vec<String>) -> ApiResult<()> {
    if found.is_empty() {
        return Ok(());
    }
    found.truncate(MOST_NAMED);
    Err(ApiError::Validation(found))
}

/// A key as a refusal shows it: the NUL written as its JSON escape.
fn shown(key: &str) -> String {
    key.replace('\0', r"\u0000")
}

fn walk(value: &Value, path: &mut String, found: &mut Vec<String>) {
    if found.len() >= MOST_NAMED {
        return;
    }
    match value {
        Value::String(s) if s.contains('\0') => found.push(refusal(path)),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(item, path, found);
                path.truncate(len);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                if key.contains('\0') {
                    let parent = if path.is_empty() { "the body" } else { path.as_str() };
                    found.push(refusal(&format!("key \"{}\" of {parent}", shown(key))));
                }
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&shown(key));
                walk(item, path, found);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_scan_finds_an_escaped_nul_and_only_that() {
        assert!(in_json_text(br#"{"a":"\u0000"}"#));
        assert!(in_json_text(br#"{"a":"x\\\u0000"}"#), "an escaped backslash, then a NUL");
        assert!(!in_json_text(br#"{"a":"\\u0000"}"#), "a backslash, then the text u0000");
        assert!(!in_json_text(br#"{"a":"\\\\u0000"}"#));
        assert!(!in_json_text(br#"{"a":"\u0001"}"#));
        assert!(!in_json_text(br#"{"a":"u0000"}"#));
        // Every answer of the scan agrees with the parser's.
        for text in [r#"["\u0000"]"#, r#"["\\u0000"]"#, r#"["\\\u0000"]"#, r#"["\\\\u0000"]"#, r#"["\u0020\u0000"]"#] {
            let parsed: Value = serde_json::from_str(text).unwrap();
            assert_eq!(in_json_text(text.as_bytes()), parsed[0].as_str().unwrap().contains('\0'), "{text}");
        }
    }

    #[test]
    fn a_refusal_names_values_and_keys_at_any_depth() {
        let body = json!({ "email": "a\0b", "ok": "fine", "attributes": { "note": "x\0", "k\0": 1 }, "items": [{ "name": "\0" }] });
        let Err(ApiError::Validation(mut d)) = check_value(&body) else { panic!() };
        // Keys come in the map's order, which serde_json's features decide.
        d.sort();
        assert_eq!(
            d,
            vec![format!("attributes.note {WHY}"), format!("email {WHY}"), format!("items[0].name {WHY}"), format!(r#"key "k\u0000" of attributes {WHY}"#),]
        );
        assert!(check_value(&json!({ "a": r"\u0000", "b": [1, null, true] })).is_ok());
        let many = Value::Array(vec![json!("\0"); 1000]);
        let Err(ApiError::Validation(d)) = check_value(&json!({ "many": many })) else { panic!() };
        assert_eq!(d.len(), MOST_NAMED);
    }

    #[test]
    fn pairs_and_path_parameters_are_named() {
        let pairs = vec![("q".to_string(), "a\0".to_string()), ("n\0".to_string(), "v".to_string()), ("ok".to_string(), "v".to_string())];
        let Err(ApiError::Validation(d)) = check_pairs(&pairs, "query parameter") else { panic!() };
        assert_eq!(d, vec![format!("query parameter q {WHY}"), format!(r"query parameter name n\u0000 {WHY}")]);
        let Err(ApiError::Validation(d)) = check_path_params([("id", "a\0"), ("other", "b")].into_iter()) else { panic!() };
        assert_eq!(d, vec![format!("path parameter id {WHY}")]);
    }

    #[test]
    fn a_header_value_cannot_carry_a_nul() {
        assert!(axum::http::HeaderValue::from_bytes(b"agent\0x").is_err());
    }
}
