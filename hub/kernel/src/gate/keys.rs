//! API keys at the gate: verification of a secret (cached, compared in
//! constant time), the key behind an exchanged token, the sweep of rate
//! windows (counted in `rate`), and permission resolution.
//! The rows come from the identity area through `KeyDirectory`.

use super::directory::TenantStanding;
use std::sync::Arc;

use serde_json::Value;

use super::{TenantCtx, scope};
use crate::{
    crypto,
    error::{ApiError, ApiResult},
    state::AppState,
};

/// What the gate knows of an API key.
#[derive(Debug, Clone)]
pub struct KeyRecord {
    pub key_id: String,
    pub key_hash: String,
    pub application_id: String,
    pub tenant_id: String,
    pub app_id: String,
    pub org_id: String,
    pub prefix: String,
    pub last4: String,
    pub scopes: Vec<String>,
    pub rate_limit_rpm: Option<i64>,
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
    pub status: String,
    pub application_status: String,
    pub environment: String,
    pub synthetic_persona_id: String,
    pub parent_tenant_id: Option<String>,
    pub root_tenant_id: Option<String>,
    pub reseller_id: Option<String>,
    pub admin_pool_index: i64,
    pub app_pool_index: Value,
    /// When the secret was last replaced; exchanged tokens carry it.
    pub rotated_at: Option<String>,
}

impl KeyRecord {
    /// The key as shown in messages: prefix and last four characters.
    pub fn masked(&self) -> String {
        format!("{}…{}", self.prefix, self.last4)
    }

    /// Active key of an active application, not expired.
    pub fn is_usable(&self) -> bool {
        self.status == "active" && self.application_status == "active" && self.expires_at.is_none_or(|t| t > chrono::Utc::now())
    }
}

/// Finds the usable key whose secret is `secret`.
pub async fn authenticate(state: &AppState, secret: &str) -> ApiResult<Arc<KeyRecord>> {
    let hash = crypto::sha256_hex(secret.as_bytes());
    let key = match state.api_keys.get(&hash) {
        Some(k) => k,
        None => {
            let generation = state.api_keys.generation();
            let found = state.directories.keys.key_by_hash(&state.db, &hash).await?;
            let key = Arc::new(found.ok_or(ApiError::Unauthorized("invalid API key"))?);
            state.api_keys.put(generation, hash.clone(), key.clone());
            key
        }
    };
    // The index lookup found it by hash; compare again in constant time.
    if !crypto::constant_time_eq(key.key_hash.as_bytes(), hash.as_bytes()) {
        return Err(ApiError::Unauthorized("invalid API key"));
    }
    if !key.is_usable() {
        return Err(ApiError::Unauthorized("API key revoked, disabled or expired"));
    }
    Ok(key)
}

/// Why a credential of an offboarded tenant is refused.
pub const OFFBOARDED: &str = "the tenant of this credential was offboarded";

/// Refuses (401) every credential of a tenant whose offboarding deadline
/// has passed. The deadline is cached per tenant like the gate's other
/// lookups: starting an offboarding drops the cache on every replica, and
/// the deadline passing needs no invalidation, since each request compares
/// it with the clock.
pub async fn tenant_open(state: &AppState, tenant_id: &str) -> ApiResult<()> {
    let standing = match state.tenant_deadlines.get(tenant_id) {
        Some(d) => d,
        None => {
            let generation = state.tenant_deadlines.generation();
            let d = state.directories.keys.tenant_standing(&state.db, tenant_id).await?;
            state.tenant_deadlines.put(generation, tenant_id.to_string(), d);
            d
        }
    };
    match standing {
        TenantStanding { deadline: Some(t), .. } if t <= chrono::Utc::now() => Err(ApiError::Unauthorized(OFFBOARDED)),
        TenantStanding { suspended: true, .. } => Err(ApiError::Locked("the tenant of this credential is suspended")),
        _ => Ok(()),
    }
}

/// The key record behind an exchanged machine token.
pub async fn by_id(state: &AppState, key_id: &str) -> ApiResult<Arc<KeyRecord>> {
    if let Some(k) = state.api_keys_by_id.get(&key_id.to_string()) {
        return Ok(k);
    }
    let generation = state.api_keys_by_id.generation();
    let found = state.directories.keys.key_by_id(&state.db, key_id).await?;
    let key = Arc::new(found.ok_or(ApiError::Unauthorized("invalid token"))?);
    state.api_keys_by_id.put(generation, key_id.to_string(), key.clone());
    Ok(key)
}

/// Deletes rate windows that can no longer matter.
pub async fn sweep_rate_windows(state: &AppState) -> Result<u64, sqlx::Error> {
    let before = chrono::Utc::now().timestamp() / 60 - 2;
    let done = sqlx::query("DELETE FROM credential_rate_window WHERE window_start < $1").bind(before).execute(state.db.writer()).await?;
    Ok(done.rows_affected())
}

/// The effective permissions of a persona, cached until a role changes.
pub async fn permissions(state: &AppState, persona_id: &str) -> ApiResult<Arc<Vec<String>>> {
    if let Some(p) = state.permissions.get(&persona_id.to_string()) {
        return Ok(p);
    }
    let generation = state.permissions.generation();
    let perms = Arc::new(state.directories.keys.permissions(&state.db, persona_id).await?);
    state.permissions.put(generation, persona_id.to_string(), perms.clone());
    Ok(perms)
}

/// Routes that administer identity (and command approval) consult the
/// acting persona's role grants, for people and machines alike
/// (Authentication 8): an API key's synthetic persona holds nothing until
/// a role is assigned to it.
pub async fn require_grant(state: &AppState, ctx: &TenantCtx, required: &str) -> ApiResult<()> {
    let perms = permissions(state, &ctx.persona_id).await?;
    if scope::any_covers(&perms, required) {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!("the acting persona {} holds no role that allows this; grant one with POST /api/role-assignments", ctx.persona_id)))
    }
}
