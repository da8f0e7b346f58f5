//! Operator credentials: the break-glass environment secret
//! (`ADMIN_OPS_TOKEN`, compared in constant time, never revocable) and
//! database operator tokens (only their SHA-256 is stored; the plaintext
//! is shown once). A token's row is cached per replica for
//! `ADMIN_OPS_TOKEN_CACHE_TTL_MS`; minting and revoking wipe the cache on
//! every replica (the `ops_tokens` invalidation), so a revocation holds at
//! once in practice and within the TTL at worst. This module owns the
//! `admin_ops_token` table.

use std::{sync::Arc, time::Instant};

use axum::http::HeaderMap;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use sqlx::FromRow;

use crate::{
    audit,
    catalogue::ListOf,
    crypto, db,
    db::Db,
    error::{ApiError, ApiResult},
    extract::{Listing, Page},
    state::{AppState, Invalidation},
    types::{Id, Timestamp},
};

/// The chain operator actions are recorded in (`audit::PLATFORM_CHAIN`).
pub use crate::audit::PLATFORM_CHAIN;
/// The identity of the environment secret in the audit trail.
pub const BREAK_GLASS: &str = "break-glass";

/// A database operator token as stored (never its secret).
#[derive(Clone, Debug, FromRow, Serialize, utoipa::ToSchema)]
#[schema(as = AdminOpsToken)]
pub struct OpsToken {
    pub id: String,
    pub label: String,
    /// `active` or `revoked`.
    pub status: String,
    pub expires_at: Option<String>,
    pub reason: Option<String>,
    pub created_by: Option<String>,
    pub minted_by: String,
    pub created_at: String,
    pub revoked_at: Option<String>,
}

const COLUMNS: &str = "id, label, status, expires_at, reason, created_by, minted_by, created_at, revoked_at";

/// The operator behind the header: `break-glass`, or `<label> (<id>)` of
/// a usable database token; None otherwise.
pub async fn operator(state: &AppState, headers: &HeaderMap) -> Option<Arc<str>> {
    let given = headers.get("x-admin-ops-token").and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty())?;
    let digest = crypto::sha256(given.as_bytes());
    if let Some(expected) = state.config.admin_ops_token.as_deref().filter(|t| !t.is_empty()) {
        // Compare digests so the comparison's time depends on neither length.
        if crypto::constant_time_eq(&digest, &crypto::sha256(expected.as_bytes())) {
            return Some(Arc::from(BREAK_GLASS));
        }
    }
    let hash = hex::encode(digest);
    let ttl = std::time::Duration::from_millis(state.config.ops_token_cache_ttl_ms);
    let cached = state.ops_tokens.get(&hash).filter(|(at, _)| at.elapsed() < ttl);
    let token = match cached {
        Some((_, token)) => token,
        None => {
            let generation = state.ops_tokens.generation();
            let sql = format!("SELECT {COLUMNS} FROM admin_ops_token WHERE token_hash = $1");
            let found: Option<OpsToken> = match sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&hash).fetch_optional(&state.db.read).await {
                Ok(found) => found,
                Err(e) => {
                    tracing::error!(error = %e, "reading an operator token");
                    return None;
                }
            };
            let found = found.map(Arc::new);
            state.ops_tokens.put(generation, hash, (Instant::now(), found.clone()));
            found
        }
    }?;
    let live = token.status == "active" && token.expires_at.as_deref().and_then(|e| DateTime::parse_from_rfc3339(e).ok()).is_none_or(|e| e > Utc::now());
    live.then(|| Arc::from(format!("{} ({})", token.label, token.id)))
}

/// Mints a database token; answers its row and the plaintext (shown once).
/// The cache is wiped and the wipe broadcast before the event is recorded.
pub async fn mint(
    state: &AppState,
    operator: &str,
    label: &str,
    ttl_seconds: Option<i64>,
    reason: Option<String>,
    created_by: Option<String>,
) -> ApiResult<(OpsToken, String)> {
    let plaintext = format!("ops_{}", crypto::random_base62(32));
    let hash = crypto::sha256_hex(plaintext.as_bytes());
    let expires = ttl_seconds.map(|s| db::format_time(Utc::now() + chrono::TimeDelta::seconds(s)));
    let sql = format!(
        "INSERT INTO admin_ops_token (id, label, token_hash, status, expires_at, reason, created_by, minted_by, created_at) \
         VALUES ($1, $2, $3, 'active', $4, $5, $6, $7, $8) RETURNING {COLUMNS}"
    );
    let token: OpsToken = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(label)
        .bind(&hash)
        .bind(&expires)
        .bind(&reason)
        .bind(&created_by)
        .bind(operator)
        .bind(db::now())
        .fetch_one(state.db.writer())
        .await?;
    state.invalidate(Invalidation::OpsTokens).await;
    let mut tx = state.db.begin().await?;
    let payload = json!({ "id": token.id, "label": token.label, "expires_at": token.expires_at, "minted_by": operator });
    audit::record_operator(&mut tx, operator, audit::events::ADMIN_OPS_TOKEN_ISSUED, payload).await?;
    tx.commit().await?;
    Ok((token, plaintext))
}

/// Revokes an active token (404 when unknown or already revoked).
pub async fn revoke(state: &AppState, operator: &str, id: &str) -> ApiResult<OpsToken> {
    let sql = format!("UPDATE admin_ops_token SET status = 'revoked', revoked_at = $2 WHERE id = $1 AND status = 'active' RETURNING {COLUMNS}");
    let token: OpsToken = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .bind(db::now())
        .fetch_optional(state.db.writer())
        .await?
        .ok_or_else(|| ApiError::Missing("token not found or already revoked"))?;
    state.invalidate(Invalidation::OpsTokens).await;
    let mut tx = state.db.begin().await?;
    audit::record_operator(&mut tx, operator, audit::events::ADMIN_OPS_TOKEN_REVOKED, json!({ "id": token.id, "label": token.label, "revoked_by": operator }))
        .await?;
    tx.commit().await?;
    Ok(token)
}

crate::stored_enum! {
    /// Where a database operator token stands: `active` until it is
    /// revoked (`revoked`) or its `expires_at` passes (`expired`).
    #[schema(as = AdminOpsTokenState)]
    pub enum TokenState { Active = "active", Revoked = "revoked", Expired = "expired" }
}

/// A database operator token as the operator lists it: never its secret
/// nor its hash. The hub keeps no time of last use.
#[derive(Debug, FromRow, Serialize, utoipa::ToSchema)]
#[schema(as = AdminOpsTokenRow)]
pub struct Listed {
    pub id: Id,
    pub label: String,
    /// `revoked` once revoked, else `expired` once `expires_at` has
    /// passed, else `active`.
    pub status: TokenState,
    /// Null: it never expires.
    pub expires_at: Option<Timestamp>,
    /// Why it was minted, as given.
    pub reason: Option<String>,
    /// Who asked for it, as given.
    pub created_by: Option<String>,
    /// The operator credential that minted it: `break-glass` or
    /// `<label> (<id>)` of a database token.
    pub minted_by: String,
    pub created_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
}

/// The state of a row, as of `$1` (now): the stored `status` knows only
/// `active` and `revoked`.
macro_rules! state_sql {
    () => {
        "(CASE WHEN status = 'revoked' THEN 'revoked' WHEN expires_at IS NOT NULL AND expires_at <= $1 THEN 'expired' ELSE 'active' END)"
    };
}

const LISTED: Listing = Listing {
    table: "admin_ops_token",
    columns: concat!("id, label, ", state_sql!(), " AS status, expires_at, reason, created_by, minted_by, created_at, revoked_at"),
    filter: concat!("($2 = '' OR ", state_sql!(), " = $2)"),
    order: "created_at DESC, id DESC",
};

/// A page of the database tokens, newest first, all of them or those in
/// `state`, with the count of all that match.
pub async fn list(db: &Db, page: Page, state: Option<TokenState>) -> ApiResult<ListOf<Listed>> {
    page.list::<Listed>(&db.read, &LISTED, &[&db::now(), state.map(TokenState::as_str).unwrap_or_default()]).await
}
