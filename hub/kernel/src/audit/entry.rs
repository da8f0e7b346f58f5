//! An audit entry read back whole, as the tenant (`GET /api/audit/entries/{entry_id}`,
//! its own chains only) and the operator (`GET /admin/audit/entries/{entry_id}`)
//! see it: stored documents as JSON, bytes as lowercase hex.

use serde::Serialize;
use serde_json::Value;
use sqlx::FromRow;
use utoipa::ToSchema;

use crate::{
    error::ApiResult,
    types::{Id, Timestamp},
};

/// One entry whole, hashes as lowercase hex.
#[derive(Debug, FromRow, Serialize, ToSchema)]
pub struct AuditEntry {
    pub entry_id: Id,
    pub tenant_id: String,
    pub pool_index: i64,
    pub seq: i64,
    pub event_type: String,
    pub actor_kind: String,
    pub actor_id: String,
    /// An agent run's provenance, when the entry has one.
    #[sqlx(try_from = "Option<String>")]
    #[schema(value_type = Option<Value>)]
    pub actor_chain: Document,
    pub occurred_at: Timestamp,
    pub retention_class: String,
    /// Null once shredded.
    #[sqlx(try_from = "Option<String>")]
    #[schema(value_type = Option<Value>)]
    pub payload: Document,
    /// SHA-256 of the payload text, kept after shredding.
    #[sqlx(try_from = "Vec<u8>")]
    #[schema(value_type = String)]
    pub payload_digest: Hex,
    pub shredded_at: Option<Timestamp>,
    #[sqlx(try_from = "Vec<u8>")]
    #[schema(value_type = String)]
    pub prev_hash: Hex,
    #[sqlx(try_from = "Vec<u8>")]
    #[schema(value_type = String)]
    pub entry_hash: Hex,
}

/// A JSON document stored as text, shown as the document; text that is not
/// JSON is shown as the text itself (what is stored), and an absent one (a
/// shredded payload) as null.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct Document(Option<Value>);

impl From<Option<String>> for Document {
    fn from(text: Option<String>) -> Self {
        Document(text.map(|s| serde_json::from_str(&s).unwrap_or(Value::String(s))))
    }
}

/// Bytes shown as lowercase hex.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct Hex(String);

impl From<Vec<u8>> for Hex {
    fn from(bytes: Vec<u8>) -> Self {
        Hex(hex::encode(bytes))
    }
}

/// The entry `entry_id`, of `tenant_id` when one is given (another
/// tenant's entry is then none).
pub async fn find(read: &sqlx::AnyPool, entry_id: &str, tenant_id: Option<&str>) -> ApiResult<Option<AuditEntry>> {
    Ok(sqlx::query_as(
        "SELECT entry_id, tenant_id, pool_index, seq, event_type, actor_kind, actor_id, actor_chain, occurred_at, retention_class, \
         payload, payload_digest, shredded_at, prev_hash, entry_hash FROM audit_entry WHERE entry_id = $1 AND ($2 IS NULL OR tenant_id = $2)",
    )
    .bind(entry_id)
    .bind(tenant_id)
    .fetch_optional(read)
    .await?)
}
