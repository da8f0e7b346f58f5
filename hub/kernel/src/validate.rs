//! Validation at the edge: collect every problem of a request in one
//! `details` array before any SQL runs.
//!
//! A field is missing when it is absent, null, or a blank string; the number
//! 0 and `false` are values (RULINGS 1).

use chrono::{DateTime, TimeDelta, Utc};
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};

/// How far a client's clock may run ahead of the hub's. A time at which a
/// client says something happened (`taken_at`, `occurred_at`,
/// `recorded_at`, ...) further in the future than this is refused: a
/// record dated years ahead would otherwise stay the "latest" for good.
pub const MAX_CLOCK_SKEW_SECONDS: i64 = 300;

/// Parses a client-supplied time at which something happened: RFC 3339,
/// and no more than `MAX_CLOCK_SKEW_SECONDS` ahead of now. Every such time
/// of every route goes through here; the error names the field.
pub fn observed_time(name: &str, raw: &str) -> Result<DateTime<Utc>, String> {
    let t = crate::db::parse_time(raw).ok_or_else(|| format!("{name} must be an RFC 3339 timestamp"))?;
    if t > Utc::now() + TimeDelta::seconds(MAX_CLOCK_SKEW_SECONDS) {
        return Err(format!("{name} must not be more than {} minutes in the future", MAX_CLOCK_SKEW_SECONDS / 60));
    }
    Ok(t)
}

/// A UUID the request's contract has checked (`format: uuid`), in its
/// canonical text (lowercase, hyphenated), the form `Check`'s UUID readers
/// give and the tables store.
pub fn canonical_uuid(checked: &str) -> String {
    let checked = checked.trim();
    Uuid::parse_str(checked).map(|u| u.to_string()).unwrap_or_else(|_| checked.to_string())
}

/// An optional UUID the request's contract has checked
/// ([`canonical_uuid`]); blank is absent.
pub fn canonical_uuid_opt(checked: &Option<String>) -> Option<String> {
    Check::optional(checked).map(|u| canonical_uuid(&u))
}

/// ISO 4217 codes in use (funds and precious metals left out).
const CURRENCIES: &str = "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN BWP BYN BZD CAD CDF CHF CLP \
    CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD \
    JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK \
    NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP \
    TRY TTD TWD TZS UAH UGX USD UYU UZS VED VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW ZWG";

/// Whether `code` is an ISO 4217 currency code in use (`EUR`, `USD`, ...):
/// the currency of every amount kept in minor units (offers, deals).
pub fn is_currency(code: &str) -> bool {
    CURRENCIES.split_whitespace().any(|k| k == code)
}

/// An amount in minor units and its currency, as a resource keeps them:
/// a known ISO 4217 `currency`, and both or neither. `amount` names the
/// amount's field (`amount_minor`, `price_minor`) and `given` says whether
/// it has a value; each problem goes to `check`.
pub fn money(check: &mut Check, amount: &str, given: bool, currency: Option<&str>) {
    match (currency, given) {
        (Some(c), _) if !is_currency(c) => check.fail("currency must be an ISO 4217 code (EUR, USD, ...)"),
        (None, true) => check.fail(format!("currency is required with {amount}")),
        (Some(_), false) => check.fail(format!("{amount} is required with currency")),
        _ => {}
    }
}

/// The form rule of a request string, stated once: the `pattern` the
/// document publishes for it (`#[schema(pattern = r"...")]` on a request
/// type's field, `pattern = r"..."` on a path parameter of a
/// `#[utoipa::path]`; utoipa takes a literal only, so the attribute is the
/// one statement), compiled from that very schema for the handler that
/// checks it. What the document promises and what the handler accepts
/// cannot drift. A pattern is spelt so that ECMA 262 (the document's
/// dialect, which clients and fuzzers generate from) and Rust read it
/// alike: anchored (`^...$`) where it states the whole value's form, with
/// explicit classes (`[0-9]`, not `\d`; white space as the list of its
/// characters, not `\s`); the handler matches the value as sent,
/// untrimmed, as a client's validator does.
///
/// A field or parameter without a pattern is a programming error: the
/// first check of it panics (every such check is tested).
pub struct Pattern {
    schema: fn(&str) -> Option<serde_json::Value>,
    field: &'static str,
    regex: std::sync::OnceLock<regex::Regex>,
}

impl Pattern {
    /// The pattern `T`'s schema states for its property `field`
    /// (`field[]`: for the items of that array property).
    pub const fn of<T: utoipa::PartialSchema>(field: &'static str) -> Pattern {
        Pattern { schema: property::<T>, field, regex: std::sync::OnceLock::new() }
    }

    /// The pattern the query type `T` states for its parameter `name`
    /// (`#[param(pattern = r"...")]`).
    pub const fn query<T: utoipa::IntoParams>(name: &'static str) -> Pattern {
        Pattern { schema: query_parameter::<T>, field: name, regex: std::sync::OnceLock::new() }
    }

    /// The pattern the operation `P` (the `__path_<handler>` type
    /// `#[utoipa::path]` generates) states for its parameter `name`.
    pub const fn param<P: utoipa::Path>(name: &'static str) -> Pattern {
        Pattern { schema: parameter::<P>, field: name, regex: std::sync::OnceLock::new() }
    }

    /// The pattern's text, as the document publishes it.
    pub fn source(&self) -> &str {
        self.regex().as_str()
    }

    /// Whether `value`, as sent, matches the pattern.
    pub fn is_match(&self, value: &str) -> bool {
        self.regex().is_match(value)
    }

    fn regex(&self) -> &regex::Regex {
        self.regex.get_or_init(|| {
            let schema = (self.schema)(self.field).unwrap_or_default();
            let pattern = schema["pattern"].as_str().unwrap_or_else(|| panic!("{} states no pattern in the document", self.field));
            regex::Regex::new(pattern).unwrap_or_else(|e| panic!("the pattern of {}: {e}", self.field))
        })
    }
}

fn property<T: utoipa::PartialSchema>(field: &str) -> Option<serde_json::Value> {
    let schema = serde_json::to_value(T::schema()).ok()?;
    let (name, items) = field.strip_suffix("[]").map_or((field, false), |name| (name, true));
    let property = schema.get("properties")?.get(name)?;
    if items { property.get("items").cloned() } else { Some(property.clone()) }
}

fn query_parameter<T: utoipa::IntoParams>(name: &str) -> Option<serde_json::Value> {
    let parameters = T::into_params(|| Some(utoipa::openapi::path::ParameterIn::Query));
    let parameter = parameters.into_iter().find(|p| p.name == name)?;
    serde_json::to_value(parameter.schema?).ok()
}

fn parameter<P: utoipa::Path>(name: &str) -> Option<serde_json::Value> {
    let operation = serde_json::to_value(P::operation()).ok()?;
    operation.get("parameters")?.as_array()?.iter().find(|p| p["name"] == name)?.get("schema").cloned()
}

#[derive(Default)]
pub struct Check {
    errors: Vec<String>,
}

impl Check {
    pub fn new() -> Self {
        Self::default()
    }

    /// A required string: trimmed, non-blank.
    pub fn required(&mut self, name: &str, value: &Option<String>) -> String {
        match value.as_deref().map(str::trim) {
            Some(v) if !v.is_empty() => v.to_string(),
            _ => {
                self.errors.push(format!("{name} is required"));
                String::new()
            }
        }
    }

    /// An optional string: trimmed; blank counts as absent.
    pub fn optional(value: &Option<String>) -> Option<String> {
        value.as_deref().map(str::trim).filter(|v| !v.is_empty()).map(str::to_string)
    }

    /// An optional string ([`Check::optional`]) of at most `max`
    /// characters.
    pub fn optional_bounded(&mut self, name: &str, value: &Option<String>, max: usize) -> Option<String> {
        let v = Self::optional(value);
        if v.as_ref().is_some_and(|v| v.chars().count() > max) {
            self.errors.push(format!("{name} must be at most {max} characters"));
        }
        v
    }

    /// A required UUID field of a body or query.
    pub fn required_uuid(&mut self, name: &str, value: &Option<String>) -> Option<Uuid> {
        let v = self.required(name, value);
        if v.is_empty() {
            return None;
        }
        self.uuid(name, &v)
    }

    /// An optional UUID field: absent, or a UUID (blank is not one, as the
    /// document's `format: uuid` says).
    pub fn optional_uuid(&mut self, name: &str, value: &Option<String>) -> Option<Uuid> {
        value.as_deref().and_then(|v| self.uuid(name, v.trim()))
    }

    fn uuid(&mut self, name: &str, v: &str) -> Option<Uuid> {
        match Uuid::parse_str(v) {
            Ok(id) => Some(id),
            Err(_) => {
                self.errors.push(format!("{name} must be a UUID"));
                None
            }
        }
    }

    /// An optional time at which something happened ([`observed_time`]),
    /// normalised to the stored form (UTC, microseconds); blank is absent.
    pub fn optional_time(&mut self, name: &str, value: &Option<String>) -> Option<String> {
        let v = Self::optional(value)?;
        match observed_time(name, &v) {
            Ok(t) => Some(crate::db::format_time(t)),
            Err(e) => {
                self.errors.push(e);
                None
            }
        }
    }

    /// An optional time at which something happened that defaults to now.
    pub fn time_or_now(&mut self, name: &str, value: &Option<String>) -> String {
        self.optional_time(name, value).unwrap_or_else(crate::db::now)
    }

    /// An optional expiry a client reports (past or future), normalised to
    /// the stored form; blank is absent.
    pub fn optional_expiry(&mut self, name: &str, value: &Option<String>) -> Option<String> {
        let v = Self::optional(value)?;
        match crate::db::parse_time(&v) {
            Some(t) => Some(crate::db::format_time(t)),
            None => {
                self.errors.push(format!("{name} must be an RFC 3339 timestamp"));
                None
            }
        }
    }

    /// An optional positive integer JSON field (absent or null: `None`).
    pub fn optional_positive_int(&mut self, name: &str, value: Option<&serde_json::Value>) -> Option<i64> {
        match value {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => match v.as_i64() {
                Some(n) if n > 0 => Some(n),
                _ => {
                    self.errors.push(format!("{name} must be a positive integer"));
                    None
                }
            },
        }
    }

    /// An optional duration in whole seconds from 1 to `max` (absent or
    /// null: `None`). Every client-supplied duration is bounded here, so
    /// the time arithmetic done with it can neither overflow nor panic.
    pub fn optional_seconds(&mut self, name: &str, value: Option<&serde_json::Value>, max: i64) -> Option<i64> {
        self.optional_int(name, value, 1, max)
    }

    /// An optional JSON integer from `min` to `max` (absent or null:
    /// `None`).
    pub fn optional_int(&mut self, name: &str, value: Option<&serde_json::Value>, min: i64, max: i64) -> Option<i64> {
        match value {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => match v.as_i64() {
                Some(n) if (min..=max).contains(&n) => Some(n),
                _ => {
                    self.errors.push(format!("{name} must be an integer from {min} to {max}"));
                    None
                }
            },
        }
    }

    /// An optional RFC 3339 JSON field that must lie in the future (an
    /// expiry), normalised to the stored form.
    pub fn optional_future_time(&mut self, name: &str, value: Option<&serde_json::Value>) -> Option<String> {
        match value {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => match v.as_str().and_then(crate::db::parse_time) {
                Some(t) if t > chrono::Utc::now() => Some(crate::db::format_time(t)),
                Some(_) => {
                    self.errors.push(format!("{name} must be in the future"));
                    None
                }
                None => {
                    self.errors.push(format!("{name} must be an RFC 3339 timestamp"));
                    None
                }
            },
        }
    }

    /// A string field of a JSON body validated by hand: blank counts as
    /// absent; a value that is not a string is a problem.
    pub fn text(&mut self, body: &serde_json::Value, name: &str) -> Option<String> {
        match body.get(name) {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(s)) => Check::optional(&Some(s.clone())),
            Some(_) => {
                self.errors.push(format!("{name} must be a string"));
                None
            }
        }
    }

    /// A required string field of a JSON body validated by hand: absent,
    /// null or blank is "required" (a value of the wrong type was reported
    /// by `text` already); `""` then.
    pub fn required_text(&mut self, body: &serde_json::Value, name: &str) -> String {
        match self.text(body, name) {
            Some(v) => v,
            None => {
                if matches!(body.get(name), None | Some(serde_json::Value::Null | serde_json::Value::String(_))) {
                    self.errors.push(format!("{name} is required"));
                }
                String::new()
            }
        }
    }

    /// An optional JSON object field: absent or null is `{}`; anything but
    /// an object is a problem.
    pub fn optional_object(&mut self, name: &str, value: Option<&serde_json::Value>) -> serde_json::Value {
        match value {
            None | Some(serde_json::Value::Null) => serde_json::json!({}),
            Some(v @ serde_json::Value::Object(_)) => v.clone(),
            Some(_) => {
                self.errors.push(format!("{name} must be an object"));
                serde_json::Value::Null
            }
        }
    }

    /// A required JSON number.
    pub fn required_number(&mut self, name: &str, value: Option<&serde_json::Value>) -> f64 {
        match value {
            Some(serde_json::Value::Number(n)) => n.as_f64().unwrap_or_default(),
            None | Some(serde_json::Value::Null) => {
                self.errors.push(format!("{name} is required"));
                0.0
            }
            Some(_) => {
                self.errors.push(format!("{name} must be a number"));
                0.0
            }
        }
    }

    /// An enumerated value; the error lists the allowed values.
    pub fn one_of(&mut self, name: &str, value: &str, allowed: &[&str]) {
        if !value.is_empty() && !allowed.contains(&value) {
            self.errors.push(format!("{name} must be one of: {}", allowed.join(", ")));
        }
    }

    /// A string of the form `pattern` states, as sent (untrimmed); `rule`
    /// is the problem when it is not. Blank is a value here, which a
    /// pattern refuses: an optional string with a pattern is not absent
    /// when blank, as one with a format is not (the contract leaves it to
    /// this check).
    pub fn matches(&mut self, value: &str, pattern: &Pattern, rule: impl Into<String>) {
        if !pattern.is_match(value) {
            self.errors.push(rule.into());
        }
    }

    /// Records an arbitrary problem.
    pub fn fail(&mut self, msg: impl Into<String>) {
        self.errors.push(msg.into());
    }

    pub fn finish(self) -> ApiResult<()> {
        if self.errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(self.errors)) }
    }
}

/// A path identifier: anything that is not a UUID cannot exist, so it is
/// 404 rather than 400 (RULINGS 1).
pub fn path_id(raw: &str) -> ApiResult<Uuid> {
    Uuid::parse_str(raw).map_err(|_| ApiError::NotFound)
}

/// Parses a `limit`/`offset`-style query parameter, naming it on failure.
pub fn query_int(name: &str, raw: Option<&str>, default: i64) -> ApiResult<i64> {
    match raw.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(default),
        Some(s) => s.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| ApiError::invalid(format!("{name} must be a non-negative integer"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(dead_code)]
    #[derive(utoipa::ToSchema)]
    struct Patterned {
        #[schema(pattern = r"^[a-z]{2}$")]
        code: String,
        #[schema(pattern = r"^[0-9]+$")]
        digits: Option<Vec<String>>,
        plain: String,
    }

    #[utoipa::path(put, path = "/things/{sku}", params(("sku" = String, Path, pattern = r"^[A-Z]{3}$")), responses((status = 200)))]
    #[allow(dead_code)]
    async fn put_thing() {}

    #[test]
    fn a_pattern_is_the_one_the_document_states_matched_as_sent() {
        static CODE: Pattern = Pattern::of::<Patterned>("code");
        static DIGIT: Pattern = Pattern::of::<Patterned>("digits[]");
        static SKU: Pattern = Pattern::param::<__path_put_thing>("sku");
        assert_eq!((CODE.source(), DIGIT.source(), SKU.source()), ("^[a-z]{2}$", "^[0-9]+$", "^[A-Z]{3}$"));
        assert!(CODE.is_match("nl") && !CODE.is_match(" nl") && !CODE.is_match("nl\n") && !CODE.is_match(""));
        assert!(DIGIT.is_match("042") && !DIGIT.is_match("4 2"));
        assert!(SKU.is_match("ABC") && !SKU.is_match("abc"));
        let mut check = Check::new();
        check.matches("nl", &CODE, "code must be two letters");
        check.matches("", &CODE, "code must be two letters");
        check.matches(" nl ", &CODE, "code must be two letters");
        let Err(ApiError::Validation(problems)) = check.finish() else { panic!("refused") };
        assert_eq!(problems, ["code must be two letters", "code must be two letters"]);
    }

    #[test]
    #[should_panic(expected = "plain states no pattern in the document")]
    fn a_field_without_a_pattern_is_a_programming_error() {
        static PLAIN: Pattern = Pattern::of::<Patterned>("plain");
        PLAIN.is_match("x");
    }

    #[test]
    fn money_is_a_known_currency_and_an_amount_both_or_neither() {
        let problems = |given: bool, currency: Option<&str>| {
            let mut check = Check::new();
            money(&mut check, "price_minor", given, currency);
            match check.finish() {
                Ok(()) => Vec::new(),
                Err(ApiError::Validation(problems)) => problems,
                Err(e) => panic!("{e:?}"),
            }
        };
        assert!(problems(true, Some("EUR")).is_empty() && problems(false, None).is_empty());
        assert_eq!(problems(true, None), ["currency is required with price_minor"]);
        assert_eq!(problems(false, Some("JPY")), ["price_minor is required with currency"]);
        assert_eq!(problems(true, Some("eur")), ["currency must be an ISO 4217 code (EUR, USD, ...)"]);
        assert_eq!(problems(false, Some("XXX")), ["currency must be an ISO 4217 code (EUR, USD, ...)"]);
    }

    #[test]
    fn an_event_time_may_run_ahead_by_the_skew_and_no_more() {
        let at = |minutes: i64| (Utc::now() + TimeDelta::minutes(minutes)).to_rfc3339();
        assert!(observed_time("taken_at", &at(-60 * 24 * 365)).is_ok());
        assert!(observed_time("taken_at", &at(4)).is_ok());
        assert_eq!(observed_time("taken_at", &at(6)), Err("taken_at must not be more than 5 minutes in the future".to_string()));
        assert_eq!(observed_time("taken_at", "2099-01-01T00:00:00Z").map(|_| ()), Err("taken_at must not be more than 5 minutes in the future".to_string()));
        assert_eq!(observed_time("taken_at", "soon").map(|_| ()), Err("taken_at must be an RFC 3339 timestamp".to_string()));
    }
}
