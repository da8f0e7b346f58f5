//! The small value types rows and answers are made of, so that what a row
//! holds is its meaning and not its storage: `Timestamp` (an instant, kept
//! as RFC 3339 text), `Id` (a UUID, kept as text) and the `stored_enum!`
//! states (a closed set of words, kept as text). Each decodes from the
//! TEXT column both databases store it in, binds back as that text,
//! serialises as the text the document shows and describes itself in the
//! schema with its format or its enumeration. A comparison of two
//! instants or two states is then never a comparison of strings.

use std::{fmt, str::FromStr};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sqlx::{
    Any, Database, Decode, Encode, Type,
    any::{AnyTypeInfo, AnyValueRef},
    encode::IsNull,
    error::BoxDynError,
};
use utoipa::{
    PartialSchema, ToSchema,
    openapi::{
        RefOr,
        schema::{KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type as SchemaType},
    },
};
use uuid::Uuid;

/// The text a value is stored as: what `Type`, `Decode` and `Encode` of a
/// stored value delegate to.
pub fn text_type_info() -> AnyTypeInfo {
    <String as Type<Any>>::type_info()
}

pub fn text_compatible(ty: &AnyTypeInfo) -> bool {
    <String as Type<Any>>::compatible(ty)
}

pub fn decode_text(value: AnyValueRef<'_>) -> Result<String, BoxDynError> {
    <String as Decode<Any>>::decode(value)
}

pub fn encode_text(text: String, buf: &mut <Any as Database>::ArgumentBuffer) -> Result<IsNull, BoxDynError> {
    <String as Encode<Any>>::encode(text, buf)
}

fn string_schema(format: SchemaFormat) -> RefOr<Schema> {
    ObjectBuilder::new().schema_type(SchemaType::String).format(Some(format)).into()
}

/// An instant, UTC, written as RFC 3339 with microseconds and `Z` (the
/// form the hub stores every time in, `db::now()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub DateTime<Utc>);

impl Timestamp {
    pub fn now() -> Timestamp {
        Timestamp(Utc::now())
    }

    /// An RFC 3339 text in any offset, as the instant it names.
    pub fn parse(text: &str) -> Option<Timestamp> {
        crate::db::parse_time(text).map(Timestamp)
    }

    /// `seconds` later (earlier when negative), or `None` outside the
    /// calendar's range.
    pub fn plus_seconds(self, seconds: i64) -> Option<Timestamp> {
        crate::db::add_seconds(self.0, seconds).map(Timestamp)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::db::format_time(self.0))
    }
}

impl FromStr for Timestamp {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Timestamp::parse(s).ok_or_else(|| format!("{s:?} is not an RFC 3339 timestamp"))
    }
}

impl From<DateTime<Utc>> for Timestamp {
    fn from(t: DateTime<Utc>) -> Self {
        Timestamp(t)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl PartialSchema for Timestamp {
    fn schema() -> RefOr<Schema> {
        string_schema(SchemaFormat::KnownFormat(KnownFormat::DateTime))
    }
}

impl ToSchema for Timestamp {}

impl Type<Any> for Timestamp {
    fn type_info() -> AnyTypeInfo {
        text_type_info()
    }

    fn compatible(ty: &AnyTypeInfo) -> bool {
        text_compatible(ty)
    }
}

impl<'r> Decode<'r, Any> for Timestamp {
    fn decode(value: AnyValueRef<'r>) -> Result<Self, BoxDynError> {
        Ok(decode_text(value)?.parse()?)
    }
}

impl<'q> Encode<'q, Any> for Timestamp {
    fn encode_by_ref(&self, buf: &mut <Any as Database>::ArgumentBuffer) -> Result<IsNull, BoxDynError> {
        encode_text(self.to_string(), buf)
    }
}

/// Raw content of any media type, as a request body or an answer: the
/// document's `type: string, format: binary` (for `Vec<u8>` it would say
/// an array of integers, which no client sends). Documentation only: the
/// handlers read and write the bytes as a stream.
#[derive(utoipa::ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct BinaryContent(pub Vec<u8>);

/// A UUID, written in its lowercase hyphenated form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Id(pub Uuid);

impl Id {
    /// A new time-ordered id (`db::new_id`).
    pub fn new() -> Id {
        Id(Uuid::now_v7())
    }
}

impl Default for Id {
    fn default() -> Self {
        Id::new()
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

impl FromStr for Id {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Uuid::parse_str(s.trim()).map(Id).map_err(|_| format!("{s:?} is not a UUID"))
    }
}

impl PartialEq<str> for Id {
    fn eq(&self, other: &str) -> bool {
        other.parse::<Id>().is_ok_and(|o| o == *self)
    }
}

impl PartialEq<String> for Id {
    fn eq(&self, other: &String) -> bool {
        self == other.as_str()
    }
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl PartialSchema for Id {
    fn schema() -> RefOr<Schema> {
        string_schema(SchemaFormat::Custom("uuid".into()))
    }
}

impl ToSchema for Id {}

impl Type<Any> for Id {
    fn type_info() -> AnyTypeInfo {
        text_type_info()
    }

    fn compatible(ty: &AnyTypeInfo) -> bool {
        text_compatible(ty)
    }
}

impl<'r> Decode<'r, Any> for Id {
    fn decode(value: AnyValueRef<'r>) -> Result<Self, BoxDynError> {
        Ok(decode_text(value)?.parse()?)
    }
}

impl<'q> Encode<'q, Any> for Id {
    fn encode_by_ref(&self, buf: &mut <Any as Database>::ArgumentBuffer) -> Result<IsNull, BoxDynError> {
        encode_text(self.to_string(), buf)
    }
}

/// A closed set of words kept as TEXT: a resource's state, a kind, a
/// direction. Declares the enum with each variant's word, and gives it
/// serde (the word), its schema (an enumeration of the words), `as_str`,
/// `Display`, `FromStr`, `ALL`, and the sqlx `Type`/`Decode`/`Encode` of
/// the text column. A row holding a word outside the set fails to decode
/// (a 500, never a silent default): the set is the database's too.
///
/// ```ignore
/// stored_enum! {
///     /// Where a command is in its life.
///     #[schema(as = CommandState)]
///     pub enum CommandState { Queued = "queued", Delivered = "delivered" }
/// }
/// ```
#[macro_export]
macro_rules! stored_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:tt),+ $(,)? }) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ::serde::Serialize, ::serde::Deserialize, ::utoipa::ToSchema)]
        $(#[$meta])*
        $vis enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// Every word of the set, in declaration order.
            #[allow(dead_code)]
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The word stored and sent for this value.
            #[allow(dead_code)]
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = ::std::string::String;

            fn from_str(s: &str) -> ::std::result::Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(format!("{other:?} is not a {}", stringify!($name))),
                }
            }
        }

        impl ::sqlx::Type<::sqlx::Any> for $name {
            fn type_info() -> ::sqlx::any::AnyTypeInfo {
                $crate::types::text_type_info()
            }

            fn compatible(ty: &::sqlx::any::AnyTypeInfo) -> bool {
                $crate::types::text_compatible(ty)
            }
        }

        impl<'r> ::sqlx::Decode<'r, ::sqlx::Any> for $name {
            fn decode(value: ::sqlx::any::AnyValueRef<'r>) -> ::std::result::Result<Self, ::sqlx::error::BoxDynError> {
                Ok($crate::types::decode_text(value)?.parse::<$name>()?)
            }
        }

        impl<'q> ::sqlx::Encode<'q, ::sqlx::Any> for $name {
            fn encode_by_ref(
                &self,
                buf: &mut <::sqlx::Any as ::sqlx::Database>::ArgumentBuffer,
            ) -> ::std::result::Result<::sqlx::encode::IsNull, ::sqlx::error::BoxDynError> {
                $crate::types::encode_text(self.as_str().to_string(), buf)
            }
        }
    };
}

crate::stored_enum! {
    /// How a call ended: sdk-crm's word for a logged call (`crm.call.logged.v1`),
    /// whoever logs it (`POST /api/crm/calls`, a voice provider's webhook).
    #[schema(as = CrmCallDisposition)]
    pub enum CallDisposition { Answered = "answered", NoAnswer = "no_answer", Busy = "busy", Failed = "failed", Voicemail = "voicemail" }
}

impl CallDisposition {
    /// Whether the call reached nobody: its log is also `crm.call.missed.v1`.
    pub fn missed(self) -> bool {
        matches!(self, CallDisposition::NoAnswer | CallDisposition::Busy | CallDisposition::Failed)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    crate::stored_enum! {
        /// A test set.
        #[schema(as = TestLight)]
        pub enum Light { Red = "red", Amber = "amber", Green = "green" }
    }

    #[test]
    fn timestamps_read_any_offset_and_write_the_stored_form() {
        let t = Timestamp::parse("2026-11-27T08:00:00+02:00").unwrap();
        assert_eq!(t.to_string(), "2026-11-27T06:00:00.000000Z");
        assert_eq!(serde_json::to_value(t).unwrap(), json!("2026-11-27T06:00:00.000000Z"));
        assert!(Timestamp::parse("2026-11-27T06:00:00.5Z").unwrap() > t, "instants compare as instants");
        assert!(serde_json::from_value::<Timestamp>(json!("soon")).is_err());
        let schema = serde_json::to_value(Timestamp::schema()).unwrap();
        assert_eq!((schema["type"].as_str(), schema["format"].as_str()), (Some("string"), Some("date-time")));
    }

    #[test]
    fn ids_are_uuids_in_their_hyphenated_form() {
        let id: Id = "0192F3A4-7B1C-7D2E-8F90-A1B2C3D4E5F6".parse().unwrap();
        assert_eq!(id.to_string(), "0192f3a4-7b1c-7d2e-8f90-a1b2c3d4e5f6");
        assert!(id == *"0192f3a4-7b1c-7d2e-8f90-a1b2c3d4e5f6");
        assert!("x".parse::<Id>().is_err());
    }

    #[test]
    fn a_stored_enum_is_its_words() {
        assert_eq!(Light::ALL.iter().map(|l| l.as_str()).collect::<Vec<_>>(), ["red", "amber", "green"]);
        assert_eq!("amber".parse::<Light>(), Ok(Light::Amber));
        assert!("blue".parse::<Light>().is_err());
        assert_eq!(serde_json::to_value(Light::Green).unwrap(), json!("green"));
        let schema = serde_json::to_value(<Light as PartialSchema>::schema()).unwrap();
        assert_eq!(schema["enum"], json!(["red", "amber", "green"]));
        assert_eq!(<Light as ToSchema>::name(), "TestLight");
    }

    #[tokio::test]
    async fn each_reads_from_and_binds_as_its_text_column() {
        sqlx::any::install_default_drivers();
        let pool = sqlx::AnyPool::connect("sqlite::memory:").await.unwrap();
        let (at, id, light): (Timestamp, Id, Light) = sqlx::query_as("SELECT $1, $2, $3")
            .bind(Timestamp::parse("2026-01-02T03:04:05Z").unwrap())
            .bind("0192f3a4-7b1c-7d2e-8f90-a1b2c3d4e5f6".parse::<Id>().unwrap())
            .bind(Light::Amber)
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(
            (at.to_string(), id.to_string(), light),
            ("2026-01-02T03:04:05.000000Z".into(), "0192f3a4-7b1c-7d2e-8f90-a1b2c3d4e5f6".into(), Light::Amber)
        );
        let text: String = sqlx::query_scalar("SELECT $1").bind(Light::Green).fetch_one(&pool).await.unwrap();
        assert_eq!(text, "green");
        let bad = sqlx::query_scalar::<_, Light>("SELECT 'blue'").fetch_one(&pool).await;
        assert!(bad.is_err(), "a word outside the set does not decode");
    }
}
