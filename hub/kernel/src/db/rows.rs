//! Adapters for the row types groups read with `query_as`: JSON kept as
//! TEXT and booleans kept as 0/1 integers (the one SQL serves SQLite and
//! PostgreSQL alike). A field takes one with
//! `#[sqlx(try_from = "String")] field: JsonText` or
//! `#[sqlx(try_from = "i64")] field: Flag`, and serialises as the JSON
//! value or boolean it holds.

use serde::Serialize;
use serde_json::Value;

/// A JSON document stored as TEXT. Text that does not parse (never
/// written by the hub) reads as `null` rather than failing the whole row.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct JsonText(pub Value);

impl From<String> for JsonText {
    fn from(text: String) -> Self {
        JsonText(serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

impl From<Option<String>> for JsonText {
    fn from(text: Option<String>) -> Self {
        text.map(JsonText::from).unwrap_or_default()
    }
}

/// A boolean stored as an INTEGER 0 or 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Flag(pub bool);

impl From<i64> for Flag {
    fn from(n: i64) -> Self {
        Flag(n != 0)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn json_text_reads_documents_and_serialises_as_them() {
        assert_eq!(serde_json::to_value(JsonText::from(r#"{"a":[1,2]}"#.to_string())).unwrap(), json!({ "a": [1, 2] }));
        assert_eq!(JsonText::from(None::<String>).0, Value::Null);
        assert_eq!(JsonText::from("not json".to_string()).0, Value::Null);
    }

    #[test]
    fn flags_are_booleans() {
        assert_eq!(serde_json::to_value(Flag::from(1)).unwrap(), json!(true));
        assert_eq!(serde_json::to_value(Flag::from(0)).unwrap(), json!(false));
    }
}
