//! Field helpers the operator sections share, for bodies their request
//! types have checked already (`Body::checked`).

use hub_kernel::prelude::*;

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

/// A value another area keeps as text (an id, a time, a state), as its
/// type; text that is not one is a 500, as a row that fails to decode.
pub(crate) fn stored<T: std::str::FromStr<Err = String>>(text: &str) -> ApiResult<T> {
    text.parse().map_err(|why: String| ApiError::Internal(anyhow::anyhow!(why)))
}
