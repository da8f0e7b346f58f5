//! Time helpers: RFC 3339 UTC text with microseconds, which sorts as text.

use chrono::{DateTime, SecondsFormat, Utc};

use crate::error::DeviceError;

/// Formats a time the way every stored and wire timestamp is written.
pub fn format(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// The current time as stored text.
pub fn now() -> String {
    format(Utc::now())
}

/// Parses any RFC 3339 time (any offset) into UTC.
pub fn parse(text: &str) -> Result<DateTime<Utc>, DeviceError> {
    DateTime::parse_from_rfc3339(text).map(|t| t.with_timezone(&Utc)).map_err(|e| DeviceError::validation(format!("`{text}` is not an RFC 3339 time: {e}")))
}

/// Normalises RFC 3339 text to the stored form, so times with different
/// offsets compare correctly as text.
pub fn normalize(text: &str) -> Result<String, DeviceError> {
    parse(text).map(format)
}
