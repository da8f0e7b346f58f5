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

/// A nullable DOUBLE PRECISION to bind: `Option<f64>` binds the same
/// parameter type whether it holds a number or not.
///
/// sqlx 0.9's Any driver hands PostgreSQL a null `Option<f64>` as a
/// `real` (float4) null but a number as a `double precision`: one SQL text
/// then arrives with two parameter types, and a connection that prepared
/// it with the first refuses the other (`incorrect binary data format in
/// bind parameter`). `Real` binds its null as the driver's float8 null
/// (which it keeps under the float4 name). The workload and identity-link
/// tests alternate both on PostgreSQL, so a driver that changes this
/// fails them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Real(pub Option<f64>);

impl sqlx::Type<sqlx::Any> for Real {
    fn type_info() -> sqlx::any::AnyTypeInfo {
        <f64 as sqlx::Type<sqlx::Any>>::type_info()
    }
}

impl<'q> sqlx::Encode<'q, sqlx::Any> for Real {
    fn encode_by_ref(&self, buf: &mut <sqlx::Any as sqlx::Database>::ArgumentBuffer) -> Result<sqlx::encode::IsNull, Box<dyn std::error::Error + Send + Sync>> {
        match self.0 {
            Some(v) => <f64 as sqlx::Encode<'q, sqlx::Any>>::encode_by_ref(&v, buf),
            None => <Option<f32> as sqlx::Encode<'q, sqlx::Any>>::encode_by_ref(&None, buf),
        }
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
