//! The contract of a request body: the JSON schema its Rust type derives
//! (the one `/openapi.json` publishes), compiled once per type and checked
//! against the body before the body is deserialised into the type.
//!
//! So the document and the server cannot disagree about what a body may
//! hold: a field the type requires is required, a bound or an enumeration
//! the type declares is enforced, and every problem is named at once in
//! one `ValidationError` (serde would stop at the first), with the path of
//! the field (`steps[0].template_id`). Deserialising a body that passed
//! then cannot fail on anything the schema says.
//!
//! The rules of the platform that the schema's vocabulary cannot say
//! directly (RULINGS 1):
//! - a required string that is blank is missing, and the document says
//!   `minLength: 1` for it ([`non_blank_required_strings`]);
//! - a required field that takes any JSON value is not null, and the
//!   document says `not: { type: null }` for it ([`required_values_not_null`]);
//! - an optional string sent blank is absent, unless it has a format or an
//!   enumeration, which blank is not;
//! - null is absent, for an optional field;
//! - fields the type does not name are ignored (a body's `tenant_id` is
//!   the gate's, checked against the caller by `Body`).

use std::{
    any::TypeId,
    collections::HashMap,
    sync::{LazyLock, RwLock},
};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use utoipa::{
    IntoParams, ToSchema,
    openapi::{Required, path::ParameterIn},
};

use crate::error::{ApiError, ApiResult};

/// `T` from a JSON value, after the value is checked against `T`'s schema:
/// 400 naming every problem, or the typed value.
pub fn parse<T: DeserializeOwned + ToSchema + 'static>(mut value: Value) -> ApiResult<T> {
    let contract = compiled::<T>();
    contract.integral(&contract.root, &mut value);
    let problems = check::<T>(&value);
    if !problems.is_empty() {
        return Err(ApiError::Validation(problems));
    }
    serde_json::from_value(value).map_err(|e| ApiError::invalid(e.to_string()))
}

/// Every problem of `value` against `T`'s schema, in field order.
pub fn check<T: ToSchema + 'static>(value: &Value) -> Vec<String> {
    let contract = compiled::<T>();
    let mut problems = Vec::new();
    contract.check(&contract.root, "", value, &mut problems);
    problems
}

static CONTRACTS: LazyLock<RwLock<HashMap<TypeId, &'static Contract>>> = LazyLock::new(Default::default);
static QUERIES: LazyLock<RwLock<HashMap<TypeId, &'static Contract>>> = LazyLock::new(Default::default);

/// `T` from a query string's name-value pairs, after they are checked
/// against the parameters `T` derives (`IntoParams`, the ones the document
/// lists for the route) as a body is against its schema: a required
/// parameter absent or blank, a value outside its enumeration, format or
/// bounds, an integer or a boolean that is not one: 400 naming every
/// problem at once. A value is read as the type its schema says (so
/// `limit=5` is the integer 5); an optional parameter sent blank is
/// absent; names `T` does not declare are left to the route's other
/// extractors (`Page`).
pub fn parse_query<T: DeserializeOwned + IntoParams + 'static>(pairs: &[(String, String)]) -> ApiResult<T> {
    let contract = compiled_query::<T>();
    let Rule::Object { fields, .. } = &contract.root else { unreachable!("a query's contract is an object") };
    let mut object = Map::new();
    for (name, raw) in pairs {
        let value = match fields.iter().find(|f| &f.name == name) {
            Some(field) => contract.query_value(&field.rule, raw),
            None => Value::String(raw.clone()),
        };
        object.insert(name.clone(), value);
    }
    let value = Value::Object(object);
    let mut problems = Vec::new();
    contract.check(&contract.root, "", &value, &mut problems);
    if !problems.is_empty() {
        return Err(ApiError::Validation(problems));
    }
    let Value::Object(mut object) = value else { unreachable!() };
    // An optional parameter sent blank is absent, unless its pattern
    // refuses blank (the handler's `Check::matches` says so).
    object.retain(|name, v| {
        !(v.as_str().is_some_and(|s| s.trim().is_empty()) && fields.iter().any(|f| &f.name == name && !f.required && !contract.is_patterned(&f.rule)))
    });
    serde_json::from_value(Value::Object(object)).map_err(|e| ApiError::invalid(format!("query parameters: {e}")))
}

fn compiled_query<T: IntoParams + 'static>() -> &'static Contract {
    let id = TypeId::of::<T>();
    if let Some(c) = QUERIES.read().expect("contracts lock").get(&id) {
        return c;
    }
    let fields = T::into_params(|| Some(ParameterIn::Query))
        .into_iter()
        .map(|p| {
            let required = matches!(p.required, Required::True);
            let rule = p.schema.as_ref().map(|s| Rule::of(&Json::of(s))).unwrap_or(Rule::Any);
            Field { name: p.name, required, rule }
        })
        .collect();
    let contract: &'static Contract = Box::leak(Box::new(Contract { root: Rule::Object { fields, rest: None }, named: HashMap::new() }));
    QUERIES.write().expect("contracts lock").entry(id).or_insert(contract)
}

/// `T`'s contract, compiled on first use and kept for the process (one per
/// request type: a bounded set).
fn compiled<T: ToSchema + 'static>() -> &'static Contract {
    let id = TypeId::of::<T>();
    if let Some(c) = CONTRACTS.read().expect("contracts lock").get(&id) {
        return c;
    }
    let mut components = Vec::new();
    T::schemas(&mut components);
    let components: Vec<(String, Json)> = components.into_iter().map(|(name, schema)| (name, Json::of(&schema))).collect();
    let contract: &'static Contract = Box::leak(Box::new(Contract::new(&Json::of(&T::schema()), &components)));
    CONTRACTS.write().expect("contracts lock").entry(id).or_insert(contract)
}

/// The schema of a type as rules, with the named schemas it refers to.
struct Contract {
    root: Rule,
    named: HashMap<String, Rule>,
}

#[derive(Debug)]
enum Rule {
    Any,
    Null,
    Bool,
    Integer {
        min: Option<f64>,
        max: Option<f64>,
    },
    Number {
        min: Option<f64>,
        max: Option<f64>,
    },
    Text(Text),
    Array {
        items: Box<Rule>,
        min: Option<usize>,
        max: Option<usize>,
    },
    Object {
        fields: Vec<Field>,
        rest: Option<Box<Rule>>,
    },
    /// A value that is null or the inner rule (an `Option` of the type).
    Nullable(Box<Rule>),
    /// One of several forms (a tagged enum): the value must be one of them.
    OneOf(Vec<Rule>),
    AllOf(Vec<Rule>),
    Ref(String),
}

#[derive(Debug, Default)]
struct Text {
    min: Option<usize>,
    max: Option<usize>,
    format: Option<String>,
    one_of: Option<Vec<String>>,
    /// Whether the schema states a `pattern`: then blank is not absent
    /// (the pattern refuses it, and the handler's `Check::matches`, which
    /// enforces the pattern, says so).
    patterned: bool,
}

#[derive(Debug)]
struct Field {
    name: String,
    required: bool,
    rule: Rule,
}

impl Contract {
    fn new(root: &Json, components: &[(String, Json)]) -> Contract {
        let named = components.iter().map(|(name, schema)| (name.clone(), Rule::of(schema))).collect();
        Contract { root: Rule::of(root), named }
    }

    fn resolve<'a>(&'a self, rule: &'a Rule) -> &'a Rule {
        let mut rule = rule;
        // A reference to a reference is followed a bounded number of times.
        for _ in 0..8 {
            match rule {
                Rule::Ref(name) => rule = self.named.get(name).unwrap_or(&Rule::Any),
                _ => return rule,
            }
        }
        &Rule::Any
    }

    fn check(&self, rule: &Rule, path: &str, value: &Value, out: &mut Vec<String>) {
        let rule = self.resolve(rule);
        let name = if path.is_empty() { "request body" } else { path };
        match rule {
            Rule::Any => {}
            Rule::Null => {
                if !value.is_null() {
                    out.push(format!("{name} must be null"));
                }
            }
            Rule::Bool => {
                if !value.is_boolean() {
                    out.push(format!("{name} must be true or false"));
                }
            }
            Rule::Integer { min, max } => {
                let n = value.as_i64().map(|n| n as f64).or_else(|| value.as_u64().map(|n| n as f64));
                if !n.is_some_and(|n| min.is_none_or(|m| n >= m) && max.is_none_or(|m| n <= m)) {
                    out.push(format!("{name} must be {}", bounded("an integer", *min, *max)));
                }
            }
            Rule::Number { min, max } => {
                if !value.as_f64().is_some_and(|n| min.is_none_or(|m| n >= m) && max.is_none_or(|m| n <= m)) {
                    out.push(format!("{name} must be {}", bounded("a number", *min, *max)));
                }
            }
            Rule::Text(text) => text.check(name, value, out),
            Rule::Array { items, min, max } => {
                let Some(array) = value.as_array() else {
                    out.push(format!("{name} must be an array"));
                    return;
                };
                if min.is_some_and(|m| array.len() < m) || max.is_some_and(|m| array.len() > m) {
                    let span = match (min, max) {
                        (Some(a), Some(b)) => format!("{a} to {b}"),
                        (Some(a), None) => format!("at least {a}"),
                        (None, Some(b)) => format!("at most {b}"),
                        (None, None) => unreachable!(),
                    };
                    out.push(format!("{name} must hold {span} items"));
                }
                for (i, item) in array.iter().enumerate() {
                    self.check(items, &format!("{path}[{i}]"), item, out);
                }
            }
            Rule::Object { fields, rest } => {
                let Some(object) = value.as_object() else {
                    out.push(format!("{name} must be a JSON object"));
                    return;
                };
                for field in fields {
                    let at = if path.is_empty() { field.name.clone() } else { format!("{path}.{}", field.name) };
                    match object.get(&field.name) {
                        None | Some(Value::Null) if field.required => out.push(format!("{at} is required")),
                        None | Some(Value::Null) => {}
                        Some(Value::String(s)) if field.required && s.trim().is_empty() && self.is_text(&field.rule) => {
                            out.push(format!("{at} is required"));
                        }
                        Some(v) => self.check(&field.rule, &at, v, out),
                    }
                }
                if let Some(rest) = rest {
                    for (key, v) in object.iter().filter(|(k, _)| !fields.iter().any(|f| &f.name == *k)) {
                        let at = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                        self.check(rest, &at, v, out);
                    }
                }
            }
            Rule::Nullable(inner) => {
                if !value.is_null() {
                    self.check(inner, path, value, out);
                }
            }
            Rule::OneOf(forms) => {
                let mut first = None;
                for form in forms {
                    let mut problems = Vec::new();
                    self.check(form, path, value, &mut problems);
                    if problems.is_empty() {
                        return;
                    }
                    first.get_or_insert(problems);
                }
                match forms.iter().filter(|f| !matches!(self.resolve(f), Rule::Null)).count() {
                    // An optional value: its one form's problems.
                    1 => out.extend(first.unwrap_or_default()),
                    _ => out.push(format!("{name} matches none of its documented forms")),
                }
            }
            Rule::AllOf(parts) => {
                for part in parts {
                    self.check(part, path, value, out);
                }
            }
            Rule::Ref(_) => {}
        }
    }

    /// JSON Schema's integers are the numbers without a fraction, `3.0`
    /// as much as `3`: where the schema says integer, a number written
    /// with a zero fraction (in `i64`'s range) becomes the integer it is,
    /// so the type reads it.
    fn integral(&self, rule: &Rule, value: &mut Value) {
        match (self.resolve(rule), value) {
            (Rule::Integer { .. }, value @ Value::Number(_)) => {
                if value.as_i64().is_none()
                    && value.as_u64().is_none()
                    && let Some(n) = value.as_f64()
                    && n.fract() == 0.0
                    && (-9.223_372_036_854_775e18..9.223_372_036_854_775e18).contains(&n)
                {
                    *value = Value::from(n as i64);
                }
            }
            (Rule::Nullable(inner), value) => self.integral(inner, value),
            (Rule::Array { items, .. }, Value::Array(array)) => array.iter_mut().for_each(|v| self.integral(items, v)),
            (Rule::Object { fields, rest }, Value::Object(object)) => {
                for (key, v) in object.iter_mut() {
                    match fields.iter().find(|f| &f.name == key) {
                        Some(field) => self.integral(&field.rule, v),
                        None => {
                            if let Some(rest) = rest {
                                self.integral(rest, v);
                            }
                        }
                    }
                }
            }
            (Rule::AllOf(parts), value) => parts.iter().for_each(|p| self.integral(p, value)),
            _ => {}
        }
    }

    /// A query value as the JSON its parameter's schema says it is: an
    /// integer, a number or a boolean when it reads as one (otherwise the
    /// text, which the check then names), else the text.
    fn query_value(&self, rule: &Rule, raw: &str) -> Value {
        let text = || Value::String(raw.to_string());
        match self.resolve(rule) {
            Rule::Nullable(inner) => self.query_value(inner, raw),
            Rule::Integer { .. } => raw.trim().parse::<i64>().map(Value::from).unwrap_or_else(|_| text()),
            Rule::Number { .. } => raw.trim().parse::<f64>().ok().and_then(serde_json::Number::from_f64).map(Value::Number).unwrap_or_else(text),
            Rule::Bool => match raw.trim() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => text(),
            },
            _ => text(),
        }
    }

    /// Whether a field's rule is a string with a `pattern`.
    fn is_patterned(&self, rule: &Rule) -> bool {
        match self.resolve(rule) {
            Rule::Text(text) => text.patterned,
            Rule::Nullable(inner) => self.is_patterned(inner),
            _ => false,
        }
    }

    /// Whether a field's rule is a string (so that blank is missing).
    fn is_text(&self, rule: &Rule) -> bool {
        match self.resolve(rule) {
            Rule::Text(_) => true,
            Rule::Nullable(inner) => self.is_text(inner),
            _ => false,
        }
    }
}

impl Text {
    fn check(&self, name: &str, value: &Value, out: &mut Vec<String>) {
        let Some(s) = value.as_str() else {
            out.push(format!("{name} must be a string"));
            return;
        };
        let trimmed = s.trim();
        if trimmed.is_empty() && self.format.is_none() && self.one_of.is_none() && !self.patterned && self.min.unwrap_or(0) == 0 {
            // Blank is absent.
            return;
        }
        if let Some(choices) = &self.one_of {
            if !choices.iter().any(|c| c == s) {
                out.push(format!("{name} must be one of: {}", choices.join(", ")));
            }
            return;
        }
        let chars = s.chars().count();
        if let Some(max) = self.max.filter(|max| chars > *max) {
            out.push(format!("{name} must be at most {max} characters"));
        }
        if let Some(min) = self.min.filter(|min| trimmed.chars().count() < *min) {
            out.push(if min == 1 { format!("{name} is required") } else { format!("{name} must be at least {min} characters") });
        }
        match self.format.as_deref() {
            Some("uuid") if uuid::Uuid::parse_str(trimmed).is_err() => out.push(format!("{name} must be a UUID")),
            Some("date-time") if crate::db::parse_time(trimmed).is_none() => out.push(format!("{name} must be an RFC 3339 timestamp")),
            Some("date") if chrono::NaiveDate::parse_from_str(trimmed, "%Y-%m-%d").is_err() => out.push(format!("{name} must be a day, YYYY-MM-DD")),
            _ => {}
        }
    }
}

fn bounded(what: &str, min: Option<f64>, max: Option<f64>) -> String {
    match (min, max) {
        (Some(a), Some(b)) => format!("{what} from {a} to {b}"),
        (Some(a), None) => format!("{what} of at least {a}"),
        (None, Some(b)) => format!("{what} of at most {b}"),
        (None, None) => what.to_string(),
    }
}

impl Rule {
    /// The rule of a JSON schema as utoipa serialises it.
    fn of(schema: &Json) -> Rule {
        if let Some(r) = schema.get("$ref").and_then(Json::as_str) {
            return Rule::Ref(r.rsplit('/').next().unwrap_or(r).to_string());
        }
        if let Some(parts) = schema.get("allOf").and_then(Json::as_array) {
            return Rule::AllOf(parts.iter().map(Rule::of).collect());
        }
        if let Some(forms) = schema.get("oneOf").or_else(|| schema.get("anyOf")).and_then(Json::as_array) {
            let mut forms: Vec<Rule> = forms.iter().map(Rule::of).collect();
            // `[null, X]` is an optional X.
            if forms.len() == 2 && forms.iter().any(|f| matches!(f, Rule::Null)) {
                forms.retain(|f| !matches!(f, Rule::Null));
                return Rule::Nullable(Box::new(forms.remove(0)));
            }
            return Rule::OneOf(forms);
        }
        match schema.get("type") {
            Some(Json::Array(types)) => {
                let non_null: Vec<&str> = types.iter().filter_map(Json::as_str).filter(|t| *t != "null").collect();
                let nullable = non_null.len() < types.len();
                let mut forms: Vec<Rule> = non_null.iter().map(|t| Rule::typed(t, schema)).collect();
                let inner = if forms.len() == 1 { forms.remove(0) } else { Rule::OneOf(forms) };
                if nullable { Rule::Nullable(Box::new(inner)) } else { inner }
            }
            Some(Json::Str(t)) => Rule::typed(t, schema),
            _ if schema.get("properties").is_some() => Rule::typed("object", schema),
            _ if schema.get("enum").is_some() => Rule::typed("string", schema),
            _ => Rule::Any,
        }
    }

    fn typed(t: &str, schema: &Json) -> Rule {
        let number = |key: &str| schema.get(key).and_then(Json::as_f64);
        let size = |key: &str| schema.get(key).and_then(Json::as_f64).map(|n| n as usize);
        match t {
            "null" => Rule::Null,
            "boolean" => Rule::Bool,
            "integer" => Rule::Integer { min: number("minimum"), max: number("maximum") },
            "number" => Rule::Number { min: number("minimum"), max: number("maximum") },
            "string" => Rule::Text(Text {
                min: size("minLength"),
                max: size("maxLength"),
                format: schema.get("format").and_then(Json::as_str).map(str::to_string),
                one_of: schema.get("enum").and_then(Json::as_array).map(|e| e.iter().filter_map(Json::as_str).map(str::to_string).collect()),
                patterned: schema.get("pattern").is_some(),
            }),
            "array" => Rule::Array { items: Box::new(schema.get("items").map(Rule::of).unwrap_or(Rule::Any)), min: size("minItems"), max: size("maxItems") },
            "object" => {
                let required: Vec<&str> = schema.get("required").and_then(Json::as_array).into_iter().flatten().filter_map(Json::as_str).collect();
                let fields = match schema.get("properties") {
                    Some(Json::Object(props)) => {
                        props.iter().map(|(name, s)| Field { name: name.clone(), required: required.contains(&name.as_str()), rule: Rule::of(s) }).collect()
                    }
                    _ => Vec::new(),
                };
                let rest = match schema.get("additionalProperties") {
                    Some(s @ Json::Object(_)) => Some(Box::new(Rule::of(s))),
                    _ => None,
                };
                Rule::Object { fields, rest }
            }
            _ => Rule::Any,
        }
    }
}

/// A schema as JSON whose objects keep their keys in the order written
/// (`serde_json::Value` sorts them), so that the problems of a body come
/// in the order of its type's fields.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Json {
    Null,
    Bool(#[allow(dead_code)] bool),
    Number(f64),
    Str(String),
    Array(Vec<Json>),
    Object(Ordered),
}

struct Ordered(Vec<(String, Json)>);

impl<'de> serde::Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> serde::de::Visitor<'de> for Keys {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Ordered(entries))
            }
        }
        d.deserialize_map(Keys)
    }
}

impl Ordered {
    fn iter(&self) -> impl Iterator<Item = (&String, &Json)> {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl Json {
    /// A utoipa schema, its objects' keys in utoipa's order (its maps keep
    /// insertion order, and so does its JSON text).
    fn of(schema: &impl serde::Serialize) -> Json {
        let text = serde_json::to_string(schema).expect("a schema serialises");
        serde_json::from_str(&text).expect("a schema is JSON")
    }

    fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(o) => o.0.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Number(n) => Some(*n),
            _ => None,
        }
    }

    fn as_array(&self) -> Option<&Vec<Json>> {
        match self {
            Json::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// A character that is not white space as Rust's `str::trim` reads it
/// (Unicode's `White_Space`), the characters listed so that ECMA 262's
/// `\s` (which differs) plays no part: a string matching it is not blank.
pub const NON_BLANK_PATTERN: &str = r"[^\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]";

/// RULINGS 1 in the document: a required string is not blank, so every
/// required string property of every object schema of `doc`, and every
/// required string parameter, that states no `minLength` gets
/// `minLength: 1`, and one that states no `pattern` nor `format` the pattern of a
/// character that is not white space ([`NON_BLANK_PATTERN`]): a string of
/// white space is blank too (what [`check`] and the handlers' `Check`
/// enforce, trimming).
pub fn non_blank_required_strings(doc: &mut Value) {
    fn assert_non_blank(s: &mut Map<String, Value>) {
        s.entry("minLength").or_insert(Value::from(1));
        // A formatted string is no white space by its format (and a
        // `uuid` gets its own pattern, `formatted_strings_asserted`).
        if !s.contains_key("format") {
            s.entry("pattern").or_insert(Value::from(NON_BLANK_PATTERN));
        }
    }
    fn walk(schema: &mut Value) {
        match schema {
            Value::Object(map) => {
                if map.contains_key("in")
                    && map.get("required") == Some(&Value::Bool(true))
                    && let Some(Value::Object(s)) = map.get_mut("schema")
                    && is_plain_string(s)
                {
                    assert_non_blank(s);
                }
                let required: Vec<String> =
                    map.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect();
                if let Some(Value::Object(props)) = map.get_mut("properties") {
                    for name in &required {
                        if let Some(Value::Object(p)) = props.get_mut(name)
                            && is_plain_string(p)
                        {
                            assert_non_blank(p);
                        }
                    }
                }
                for v in map.values_mut() {
                    walk(v);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(doc);
}

/// The canonical text of a UUID, as the document's pattern says it.
pub const UUID_PATTERN: &str = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

/// What the schema's vocabulary says of a formatted string only as an
/// annotation, said as an assertion every JSON Schema validator (and
/// client generator, and fuzzer) applies: a string with a `uuid`,
/// `date-time` or `date` format is not blank (`minLength: 1`; blank is no
/// UUID, instant or day, and the hub refuses it), and a `uuid` has the
/// UUID's pattern.
pub fn formatted_strings_asserted(doc: &mut Value) {
    fn walk(schema: &mut Value) {
        match schema {
            Value::Object(map) => {
                let format = map.get("format").and_then(Value::as_str).map(str::to_string);
                if let Some(format) = format.filter(|f| ["uuid", "date-time", "date"].contains(&f.as_str()))
                    && is_plain_string(map)
                {
                    map.entry("minLength").or_insert(Value::from(1));
                    if format == "uuid" {
                        map.entry("pattern").or_insert(Value::from(UUID_PATTERN));
                    }
                }
                for v in map.values_mut() {
                    walk(v);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(doc);
}

/// RULINGS 1 for a field that takes any JSON value: null is missing, so
/// a required property of a request schema that states no type (any value)
/// gets `not: { type: null }`. Only the schemas request bodies reach
/// (through `$ref`s, transitively): an answer's untyped field may be null.
pub fn required_values_not_null(doc: &mut Value) {
    fn refs(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let Some(r) = map.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/components/schemas/")) {
                    out.push(r.to_string());
                }
                map.values().for_each(|v| refs(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let mut todo = Vec::new();
    for item in doc["paths"].as_object().into_iter().flat_map(|p| p.values()) {
        for op in item.as_object().into_iter().flat_map(|o| o.values()) {
            if let Some(body) = op.get("requestBody") {
                refs(body, &mut todo);
            }
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    while let Some(name) = todo.pop() {
        if seen.insert(name.clone())
            && let Some(schema) = doc["components"]["schemas"].get(&name)
        {
            refs(schema, &mut todo);
        }
    }
    fn walk(schema: &mut Value) {
        match schema {
            Value::Object(map) => {
                let required: Vec<String> =
                    map.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect();
                if let Some(Value::Object(props)) = map.get_mut("properties") {
                    for name in &required {
                        if let Some(Value::Object(p)) = props.get_mut(name)
                            && !["type", "$ref", "oneOf", "anyOf", "allOf", "enum", "const", "not"].iter().any(|k| p.contains_key(*k))
                        {
                            p.insert("not".to_string(), serde_json::json!({ "type": "null" }));
                        }
                    }
                }
                for v in map.values_mut() {
                    walk(v);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    for name in seen {
        if let Some(schema) = doc["components"]["schemas"].get_mut(&name) {
            walk(schema);
        }
    }
    for item in doc["paths"].as_object_mut().into_iter().flat_map(|p| p.values_mut()) {
        for op in item.as_object_mut().into_iter().flat_map(|o| o.values_mut()) {
            if let Some(body) = op.get_mut("requestBody") {
                walk(body);
            }
        }
    }
}

/// A string schema a blank value could satisfy: `type: string`, no
/// enumeration.
fn is_plain_string(p: &Map<String, Value>) -> bool {
    let string = match p.get("type") {
        Some(Value::String(t)) => t == "string",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
        _ => false,
    };
    string && !p.contains_key("enum")
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Deserialize, ToSchema)]
    #[allow(dead_code)]
    struct ProbeStep {
        #[schema(format = "uuid")]
        template_id: String,
        #[schema(minimum = 0, maximum = 30)]
        delay_days: Option<i64>,
    }

    #[derive(Deserialize, ToSchema)]
    #[serde(rename_all = "snake_case")]
    enum ProbeChannel {
        Email,
        Sms,
    }

    #[derive(Deserialize, ToSchema)]
    #[allow(dead_code)]
    struct ProbeSequence {
        #[schema(max_length = 10)]
        name: String,
        channel: ProbeChannel,
        note: Option<String>,
        #[schema(min_items = 1, max_items = 2)]
        steps: Vec<ProbeStep>,
        #[schema(format = DateTime)]
        when: Option<String>,
        attributes: Option<HashMap<String, i64>>,
    }

    #[test]
    fn every_problem_is_named_at_once_with_its_path() {
        let body = json!({
            "name": "a name much too long", "channel": "fax", "note": "  ",
            "steps": [{ "template_id": "nope", "delay_days": 31 }, { "delay_days": "x" }, {}],
            "when": "yesterday", "attributes": { "a": 1, "b": "two" },
        });
        assert_eq!(
            check::<ProbeSequence>(&body),
            vec![
                "name must be at most 10 characters",
                "channel must be one of: email, sms",
                "steps must hold 1 to 2 items",
                "steps[0].template_id must be a UUID",
                "steps[0].delay_days must be an integer from 0 to 30",
                "steps[1].template_id is required",
                "steps[1].delay_days must be an integer from 0 to 30",
                "steps[2].template_id is required",
                "when must be an RFC 3339 timestamp",
                "attributes.b must be an integer",
            ]
        );
    }

    #[test]
    fn blank_is_missing_when_required_and_absent_when_optional() {
        assert_eq!(check::<ProbeSequence>(&json!({ "name": " ", "channel": "sms", "steps": [] })), vec!["name is required", "steps must hold 1 to 2 items"]);
        assert_eq!(check::<ProbeSequence>(&json!([1])), vec!["request body must be a JSON object"]);
        let ok = json!({ "name": "n", "channel": "sms", "note": "", "when": null, "steps": [{ "template_id": "0190d6a4-4c1e-7000-8000-000000000000" }] });
        assert!(check::<ProbeSequence>(&ok).is_empty());
        let parsed: ProbeSequence = parse(ok).unwrap();
        assert!(matches!(parsed.channel, ProbeChannel::Sms));
    }

    #[derive(Deserialize, IntoParams)]
    #[allow(dead_code)]
    struct ProbeQuery {
        #[param(format = "uuid")]
        subject_id: String,
        #[param(inline)]
        channel: Option<ProbeChannel>,
        #[param(minimum = 1, maximum = 9)]
        rung: Option<i64>,
        open: Option<bool>,
        note: Option<String>,
    }

    fn query(q: &str) -> ApiResult<ProbeQuery> {
        parse_query::<ProbeQuery>(&serde_urlencoded::from_str::<Vec<(String, String)>>(q).unwrap())
    }

    #[test]
    fn a_query_is_checked_against_its_parameters_then_typed() {
        let Err(ApiError::Validation(problems)) = query("channel=fax&rung=10&open=yes&other=1") else { panic!() };
        assert_eq!(
            problems,
            ["subject_id is required", "channel must be one of: email, sms", "rung must be an integer from 1 to 9", "open must be true or false",]
        );
        let Err(ApiError::Validation(problems)) = query("subject_id=%20&rung=x") else { panic!() };
        assert_eq!(problems, ["subject_id is required", "rung must be an integer from 1 to 9"]);
        let Err(ApiError::Validation(problems)) = query("subject_id=nope&channel=") else { panic!() };
        assert_eq!(problems, ["subject_id must be a UUID", "channel must be one of: email, sms"]);
        let q = query("subject_id=0190d6a4-4c1e-7000-8000-000000000000&channel=sms&rung=3&open=false&note=%20&page=2").unwrap();
        assert!(matches!(q.channel, Some(ProbeChannel::Sms)));
        assert_eq!((q.rung, q.open, q.note), (Some(3), Some(false), None), "a blank optional parameter is absent");
    }

    #[test]
    fn formatted_strings_are_asserted_not_blank_and_uuids_patterned() {
        let mut doc = json!({ "properties": {
            "id": { "type": "string", "format": "uuid" },
            "at": { "type": ["string", "null"], "format": "date-time" },
            "day": { "type": "string", "format": "date", "minLength": 10 },
            "url": { "type": "string", "format": "uri" },
        } });
        formatted_strings_asserted(&mut doc);
        let p = &doc["properties"];
        assert_eq!((p["id"]["minLength"].clone(), p["id"]["pattern"].as_str()), (json!(1), Some(UUID_PATTERN)));
        assert_eq!((p["at"]["minLength"].clone(), p["at"].get("pattern")), (json!(1), None));
        assert_eq!(p["day"]["minLength"], 10);
        assert!(p["url"].get("minLength").is_none());
    }

    #[test]
    fn an_integer_written_with_a_zero_fraction_is_that_integer() {
        let v: ProbeSequence =
            parse(json!({ "name": "n", "channel": "sms", "steps": [{ "template_id": "01a21c8b-3379-70cf-bdae-c576dc68ae15", "delay_days": 3.0 }] })).unwrap();
        assert_eq!(v.steps[0].delay_days, Some(3));
        let Err(ApiError::Validation(problems)) = parse::<ProbeSequence>(
            json!({ "name": "n", "channel": "sms", "steps": [{ "template_id": "01a21c8b-3379-70cf-bdae-c576dc68ae15", "delay_days": 2.5 }] }),
        ) else {
            panic!("a fraction is no integer")
        };
        assert_eq!(problems, ["steps[0].delay_days must be an integer from 0 to 30"]);
    }

    #[test]
    fn required_untyped_request_fields_are_not_null() {
        let mut doc = json!({
            "paths": { "/x": { "post": { "requestBody": { "content": { "application/json": { "schema": { "$ref": "#/components/schemas/In" } } } } } } },
            "components": { "schemas": {
                "In": { "type": "object", "required": ["any", "typed", "inner"],
                    "properties": { "any": { "description": "any" }, "typed": { "type": "string" }, "loose": {}, "inner": { "$ref": "#/components/schemas/Inner" } } },
                "Inner": { "type": "object", "required": ["v"], "properties": { "v": {} } },
                "Out": { "type": "object", "required": ["v"], "properties": { "v": {} } },
            } },
        });
        required_values_not_null(&mut doc);
        let s = &doc["components"]["schemas"];
        assert_eq!(s["In"]["properties"]["any"]["not"], json!({ "type": "null" }));
        assert!(s["In"]["properties"]["typed"].get("not").is_none());
        assert!(s["In"]["properties"]["loose"].get("not").is_none(), "optional: null is absent");
        assert_eq!(s["Inner"]["properties"]["v"]["not"], json!({ "type": "null" }));
        assert!(s["Out"]["properties"]["v"].get("not").is_none(), "answers may hold null");
    }

    #[test]
    fn the_document_says_required_strings_are_not_blank() {
        let mut doc = json!({ "components": { "schemas": { "S": {
            "type": "object", "required": ["a", "b", "c"],
            "properties": { "a": { "type": "string" }, "b": { "type": "string", "enum": ["x"] }, "c": { "type": "string", "minLength": 3 }, "d": { "type": "string" } },
        } } } });
        non_blank_required_strings(&mut doc);
        let props = &doc["components"]["schemas"]["S"]["properties"];
        assert_eq!((props["a"]["minLength"].clone(), props["a"]["pattern"].as_str()), (json!(1), Some(NON_BLANK_PATTERN)));
        assert_eq!(props["c"]["pattern"].as_str(), Some(NON_BLANK_PATTERN));
        assert!(props["b"].get("minLength").is_none());
        assert_eq!(props["c"]["minLength"], 3);
        assert!(props["d"].get("minLength").is_none());
        let mut op = json!({ "parameters": [
            { "name": "q", "in": "query", "required": true, "schema": { "type": "string" } },
            { "name": "r", "in": "query", "required": false, "schema": { "type": "string" } },
        ] });
        non_blank_required_strings(&mut op);
        assert_eq!(op["parameters"][0]["schema"]["minLength"], 1);
        assert!(op["parameters"][1]["schema"].get("minLength").is_none());
    }
}
