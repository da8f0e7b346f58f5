//! Extractors every group shares for the query string: `Params<T>` (typed
//! parameters whose rejections are the platform's 400 envelope naming the
//! parameter) and `Page` (the `limit`/`offset` of a list route, with the
//! route's default and maximum); `list`, the list envelope; and
//! `Page::list`, which reads one page of a group's rows with the count of
//! all that match.

use std::collections::HashSet;

use axum::{extract::FromRequestParts, http::request::Parts};
use serde::{Serialize, de::DeserializeOwned};
use utoipa::IntoParams;

use sqlx::{AnyPool, FromRow, any::AnyRow};

use crate::{
    catalogue::ListOf,
    error::{ApiError, ApiResult},
};

/// The query string as name-value pairs; a name given twice is 400 (which
/// value was meant cannot be told), as is a string that does not parse,
/// and one whose names or values hold a NUL (`%00`).
fn pairs(parts: &Parts) -> ApiResult<Vec<(String, String)>> {
    let query = parts.uri.query().unwrap_or("");
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).map_err(|e| ApiError::invalid(format!("malformed query string: {e}")))?;
    crate::nul::check_pairs(&pairs, "query parameter")?;
    let mut seen = HashSet::new();
    let repeated: Vec<&str> = pairs.iter().filter(|(k, _)| !seen.insert(k.as_str())).map(|(k, _)| k.as_str()).collect();
    if !repeated.is_empty() {
        return Err(ApiError::Validation(repeated.iter().map(|k| format!("query parameter {k} is given more than once")).collect()));
    }
    Ok(pairs)
}

/// Typed query parameters: the query string checked against the
/// parameters `T` declares for the document (`contract::parse_query`),
/// then deserialised into `T`; refused with the platform's envelope.
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + IntoParams + 'static> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> ApiResult<Self> {
        crate::contract::parse_query(&pairs(parts)?).map(Params)
    }
}

/// The page of a list route: `limit` (default `DEFAULT`, from 1 to `MAX`)
/// and `offset` (default 0). A value that is not an integer, or one out of
/// its range, is 400 naming the parameter, as the document's bounds say;
/// with `CLAMP` (a group whose document says its limit is clamped) a
/// `limit` out of range is brought into it instead, and the document says
/// that.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Page<const DEFAULT: i64 = 50, const MAX: i64 = 500, const CLAMP: bool = false> {
    pub limit: i64,
    pub offset: i64,
}

impl<S: Send + Sync, const DEFAULT: i64, const MAX: i64, const CLAMP: bool> FromRequestParts<S> for Page<DEFAULT, MAX, CLAMP> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> ApiResult<Self> {
        let pairs = pairs(parts)?;
        let get = |name: &str| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.trim());
        let mut problems = Vec::new();
        let mut int = |name: &str, default: i64| match get(name).map(str::parse::<i64>) {
            None => default,
            Some(Ok(n)) => n,
            Some(Err(_)) => {
                problems.push(format!("{name} must be an integer"));
                default
            }
        };
        let limit = int("limit", DEFAULT);
        let offset = int("offset", 0);
        if CLAMP && limit < 0 {
            problems.push("limit must be 0 or more".to_string());
        } else if !CLAMP && !(1..=MAX).contains(&limit) {
            problems.push(format!("limit must be an integer from 1 to {MAX}"));
        }
        if offset < 0 {
            problems.push("offset must be 0 or more".to_string());
        }
        if !problems.is_empty() {
            return Err(ApiError::Validation(problems));
        }
        Ok(Page { limit: limit.clamp(1, MAX), offset })
    }
}

/// The list envelope: `{ success: true, data: [...], total }`, `total`
/// counting every matching row, not only this page's.
pub fn list<T: Serialize>(data: Vec<T>, total: i64) -> ListOf<T> {
    ListOf { success: true, data, total }
}

/// What a list route reads: the group's table, the columns of its row
/// type, a filter over `$1..$n` and the order. Every part is a constant of
/// the group, never request text; the values go in as bound arguments.
pub struct Listing {
    pub table: &'static str,
    pub columns: &'static str,
    pub filter: &'static str,
    pub order: &'static str,
}

/// The rows of `table` matching `filter` (constant parts of the group,
/// its `$1..$n` bound to `args` in order).
pub async fn count(pool: &AnyPool, table: &str, filter: &str, args: &[&str]) -> ApiResult<i64> {
    let mut count = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table} WHERE {filter}")));
    for a in args {
        count = count.bind(*a);
    }
    Ok(count.fetch_one(pool).await?)
}

impl<const DEFAULT: i64, const MAX: i64, const CLAMP: bool> Page<DEFAULT, MAX, CLAMP> {
    /// This page of the rows matching `listing.filter` (its `$1..$n` bound
    /// to `args` in order), as the list envelope with the count of all
    /// matching rows.
    pub async fn list<T>(self, pool: &AnyPool, listing: &Listing, args: &[&str]) -> ApiResult<ListOf<T>>
    where
        T: for<'r> FromRow<'r, AnyRow> + Serialize + Send + Unpin,
    {
        let total = count(pool, listing.table, listing.filter, args).await?;
        self.list_counted::<T>(pool, listing, listing.filter, args, total).await
    }

    /// This page of the rows of `listing` matching `filter` (which the
    /// caller composed of constant parts, in place of `listing.filter`),
    /// with a `total` the caller knows without counting the rows.
    pub async fn list_counted<T>(self, pool: &AnyPool, listing: &Listing, filter: &str, args: &[&str], total: i64) -> ApiResult<ListOf<T>>
    where
        T: for<'r> FromRow<'r, AnyRow> + Serialize + Send + Unpin,
    {
        let Listing { table, columns, order, .. } = listing;
        let (l, o) = (args.len() + 1, args.len() + 2);
        let mut rows =
            sqlx::query_as::<_, T>(sqlx::AssertSqlSafe(format!("SELECT {columns} FROM {table} WHERE {filter} ORDER BY {order} LIMIT ${l} OFFSET ${o}")));
        for a in args {
            rows = rows.bind(*a);
        }
        let rows = rows.bind(self.limit).bind(self.offset).fetch_all(pool).await?;
        Ok(list(rows, total))
    }
}

#[cfg(test)]
mod tests {
    use axum::http::Request;

    use super::*;

    async fn page(query: &str) -> ApiResult<Page<50, 500>> {
        let (mut parts, _) = Request::builder().uri(format!("/x?{query}")).body(()).unwrap().into_parts();
        Page::from_request_parts(&mut parts, &()).await
    }

    #[tokio::test]
    async fn pages_default_clamp_and_refuse_what_cannot_be_a_page() {
        assert_eq!(page("").await.unwrap(), Page { limit: 50, offset: 0 });
        assert_eq!(page("limit=500&offset=3").await.unwrap(), Page { limit: 500, offset: 3 });
        assert_eq!(page("limit=1").await.unwrap().limit, 1);
        let Err(ApiError::Validation(d)) = page("limit=ten&offset=-1").await else { panic!() };
        assert_eq!(d, vec!["limit must be an integer", "offset must be 0 or more"]);
        for outside in ["limit=-5", "limit=0", "limit=501"] {
            let Err(ApiError::Validation(d)) = page(outside).await else { panic!("{outside}") };
            assert_eq!(d, vec!["limit must be an integer from 1 to 500"], "{outside}");
        }
        let Err(ApiError::Validation(d)) = page("limit=1&limit=2").await else { panic!() };
        assert_eq!(d, vec!["query parameter limit is given more than once"]);
    }

    #[tokio::test]
    async fn a_clamped_page_brings_its_limit_into_range() {
        let clamped = |query: &'static str| async move {
            let (mut parts, _) = Request::builder().uri(format!("/x?{query}")).body(()).unwrap().into_parts();
            Page::<50, 500, true>::from_request_parts(&mut parts, &()).await.unwrap().limit
        };
        assert_eq!([clamped("limit=0").await, clamped("limit=100000").await, clamped("limit=7").await], [1, 500, 7]);
        let (mut parts, _) = Request::builder().uri("/x?limit=-1").body(()).unwrap().into_parts();
        assert!(Page::<50, 500, true>::from_request_parts(&mut parts, &()).await.is_err(), "a negative limit is still refused");
    }
}
