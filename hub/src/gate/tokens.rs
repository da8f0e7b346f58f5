//! The six-layer JWT: its claims, minting (ES256 with the current key's
//! `kid`) and verification with a cache of verified tokens, so a repeated
//! token costs no signature check.

use std::{collections::HashMap, sync::{Arc, Mutex}};

use jsonwebtoken::{Algorithm, Header, Validation};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{crypto::signing::KeySet, db};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Actor {
    /// `human` for a person, `service` for a machine.
    pub kind: String,
}

/// The tenant context of a token (absent in a person-level token).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TenantClaims {
    pub org_id: String,
    pub app_id: String,
    pub tenant_id: String,
    pub bu_id: Option<String>,
    pub parent_tenant_id: Option<String>,
    pub root_tenant_id: Option<String>,
    pub reseller_id: Option<String>,
    pub primary_persona_id: String,
    pub all_persona_ids: Vec<String>,
    pub admin_pool_index: i64,
    pub app_pool_index: Value,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Claims {
    pub iss: String,
    /// person_id for a human; the key's synthetic persona for a machine.
    pub sub: String,
    pub iat: i64,
    pub exp: i64,
    pub jti: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<TenantClaims>,
    pub actor: Actor,
    #[serde(default)]
    pub amr: Vec<String>,
    /// Present only on machine tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application_id: Option<String>,
    /// On machine tokens: when the key had last been rotated at the
    /// exchange, so that a later rotation ends the token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_rotated_at: Option<String>,
}

impl Claims {
    pub fn is_machine(&self) -> bool {
        self.actor.kind == "service"
    }
}

/// Fills `iss`, `iat`, `exp`, `jti` and signs.
pub fn mint(keys: &KeySet, issuer: &str, ttl_seconds: i64, mut claims: Claims) -> anyhow::Result<(String, Claims)> {
    let now = chrono::Utc::now().timestamp();
    claims.iss = issuer.to_string();
    claims.iat = now;
    claims.exp = now + ttl_seconds;
    claims.jti = db::new_id();
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(keys.current_kid.clone());
    let token = jsonwebtoken::encode(&header, &claims, &keys.encoding)?;
    Ok((token, claims))
}

/// Why a token was refused.
#[derive(Debug)]
pub enum Refusal {
    /// Malformed, badly signed, expired or from another issuer.
    Invalid,
    /// Signed with a key this hub does not (yet) know.
    UnknownKey,
}

/// Verifies signature, issuer and expiry against the keys in force.
pub fn verify(keys: &KeySet, issuer: &str, token: &str) -> Result<Claims, Refusal> {
    let header = jsonwebtoken::decode_header(token).map_err(|_| Refusal::Invalid)?;
    if header.alg != Algorithm::ES256 {
        return Err(Refusal::Invalid);
    }
    let kid = header.kid.ok_or(Refusal::Invalid)?;
    let key = keys.verifier(&kid).ok_or(Refusal::UnknownKey)?;
    let mut validation = Validation::new(Algorithm::ES256);
    validation.set_issuer(&[issuer]);
    validation.leeway = 0;
    validation.validate_aud = false;
    jsonwebtoken::decode::<Claims>(token, &key.decoding, &validation)
        .map(|d| d.claims)
        .map_err(|_| Refusal::Invalid)
}

/// Tokens whose signature has been checked, until they expire.
#[derive(Default)]
pub struct TokenCache {
    inner: Mutex<HashMap<String, Arc<Claims>>>,
}

const TOKEN_CACHE_CAP: usize = 50_000;

impl TokenCache {
    pub fn get(&self, token: &str) -> Option<Arc<Claims>> {
        let map = self.inner.lock().expect("token cache");
        let claims = map.get(token)?;
        (claims.exp > chrono::Utc::now().timestamp()).then(|| claims.clone())
    }

    pub fn put(&self, token: &str, claims: Arc<Claims>) {
        let mut map = self.inner.lock().expect("token cache");
        if map.len() >= TOKEN_CACHE_CAP {
            // Dropping everything is cheap and rare; entries are re-verified.
            map.clear();
        }
        map.insert(token.to_string(), claims);
    }

    /// Forgets every token (after a signing-key change).
    pub fn clear(&self) {
        self.inner.lock().expect("token cache").clear();
    }
}
