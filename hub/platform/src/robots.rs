//! Per-robot credentials: the `Robot` extractor of the stream and ack
//! routes, verification for the QUIC endpoint, and the re-check an open
//! stream makes when woken, over the credential rows of `asset`. (The
//! gate lets robot routes through to this extractor: `gate::is_robot_route`.)

use std::sync::Arc;

use axum::{extract::FromRequestParts, http::request::Parts};

use hub_kernel::{
    crypto,
    error::{ApiError, ApiResult},
    gate::{bearer, keys::tenant_open, rate::count_use},
    state::AppState,
};

use crate::asset;

/// The prefix of every robot credential's secret.
pub const CREDENTIAL_PREFIX: &str = "rc_";

/// What the stream and ack routes know of a per-robot credential.
#[derive(Clone, Debug)]
pub struct RobotCredential {
    pub credential_id: String,
    pub asset_id: String,
    pub tenant_id: String,
    pub secret_hash: String,
    pub rate_limit_rpm: Option<i64>,
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
    pub status: String,
}

impl RobotCredential {
    /// Active and not expired.
    pub fn is_usable(&self) -> bool {
        self.status == "active" && self.expires_at.is_none_or(|t| t > chrono::Utc::now())
    }
}

/// Finds the live credential whose secret is `secret` and counts the use
/// against its rate limit. Unknown, expired or revoked: 401.
pub async fn authenticate(state: &AppState, secret: &str) -> ApiResult<Arc<RobotCredential>> {
    if !secret.starts_with(CREDENTIAL_PREFIX) {
        return Err(ApiError::Unauthorized("invalid robot credential"));
    }
    let hash = crypto::sha256_hex(secret.as_bytes());
    let cred = asset::credential_by_hash(&state.db, &hash).await?.ok_or(ApiError::Unauthorized("invalid robot credential"))?;
    // The index lookup found it by hash; compare again in constant time.
    if !crypto::constant_time_eq(cred.secret_hash.as_bytes(), hash.as_bytes()) {
        return Err(ApiError::Unauthorized("invalid robot credential"));
    }
    if !cred.is_usable() {
        return Err(ApiError::Unauthorized("robot credential expired or revoked"));
    }
    tenant_open(state, &cred.tenant_id).await?;
    count_use(state, &cred.credential_id, cred.rate_limit_rpm).await?;
    Ok(Arc::new(cred))
}

/// Whether the credential of an open stream may go on: still active, not
/// expired, and its tenant not offboarded. A stream asks when woken and
/// before each delivery.
pub async fn still_usable(state: &AppState, credential_id: &str) -> ApiResult<bool> {
    let Some(cred) = asset::credential_by_id(&state.db, credential_id).await? else { return Ok(false) };
    match tenant_open(state, &cred.tenant_id).await {
        Ok(()) => Ok(cred.is_usable()),
        Err(ApiError::Unauthorized(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The verified robot credential of a stream or ack route; a missing or
/// malformed header, or a credential that is unknown, revoked or expired,
/// is 401.
pub struct Robot(pub Arc<RobotCredential>);

impl FromRequestParts<AppState> for Robot {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let secret = match bearer(&parts.headers) {
            Some(Ok(v)) => v,
            Some(Err(())) => return Err(ApiError::Unauthorized("malformed Authorization header")),
            None => return Err(ApiError::Unauthorized("missing robot credential")),
        };
        Ok(Robot(authenticate(state, secret).await?))
    }
}
