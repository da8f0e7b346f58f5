//! Field helpers the operator sections share, for bodies their request
//! types have checked already (`Body::checked`).

use hub_kernel::prelude::*;

/// A UUID its schema checked (`format: uuid`), in its canonical form.
pub(crate) fn uuid(raw: &str) -> String {
    let raw = raw.trim();
    uuid::Uuid::parse_str(raw).map_or_else(|_| raw.to_string(), |u| u.to_string())
}

/// An RFC 3339 time its schema checked (`format: date-time`).
pub(crate) fn time(name: &str, raw: &str) -> ApiResult<chrono::DateTime<chrono::Utc>> {
    db::parse_time(raw.trim()).ok_or_else(|| ApiError::invalid(format!("{name} must be an RFC 3339 timestamp")))
}

/// Whether the row `sql` selects (`SELECT 1 FROM … WHERE … = $1`) exists,
/// read from the writer: the resource of a path is found before its body
/// is looked at.
pub(crate) async fn exists(state: &AppState, sql: &'static str, id: &str) -> ApiResult<bool> {
    let found: Option<i64> = sqlx::query_scalar(sql).bind(id).fetch_optional(state.db.writer()).await?;
    Ok(found.is_some())
}
