//! Field checks the operator sections share.

use hub_kernel::prelude::*;

/// A required string ([`Check::required`]) of at most `max` characters.
pub(crate) fn required_bounded(check: &mut Check, name: &str, value: &Option<String>, max: usize) -> String {
    let v = check.required(name, value);
    if v.chars().count() > max {
        check.fail(format!("{name} must be at most {max} characters"));
    }
    v
}

/// A required enumerated string: "required" when missing, the allowed
/// values when outside them.
pub(crate) fn required_one_of(check: &mut Check, name: &str, value: &Option<String>, allowed: &[&str]) -> String {
    let v = check.required(name, value);
    check.one_of(name, &v, allowed);
    v
}

/// A required RFC 3339 time, normalised to the stored form.
pub(crate) fn required_time(check: &mut Check, name: &str, value: &Option<String>) -> Option<chrono::DateTime<chrono::Utc>> {
    let v = check.required(name, value);
    if v.is_empty() {
        return None;
    }
    let t = db::parse_time(&v);
    if t.is_none() {
        check.fail(format!("{name} must be an RFC 3339 timestamp"));
    }
    t
}
