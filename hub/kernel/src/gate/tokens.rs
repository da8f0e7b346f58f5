//! The six-layer JWT: its claims, minting (ES256 with the current key's
//! `kid`) and verification with a cache of verified tokens, so a repeated
//! token costs no signature check.
//!
//! Signatures are ES256 in low-S form only. ECDSA signatures are malleable:
//! (r, n - s) verifies wherever (r, s) does, so a stock library accepts two
//! spellings of every token. The hub mints low S and refuses high S, so a
//! token has exactly one form (one cache entry, one identity in logs and
//! any deny list).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
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
    claims.exp = now.checked_add(ttl_seconds).ok_or_else(|| anyhow::anyhow!("token lifetime out of range"))?;
    claims.jti = db::new_id();
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(keys.current_kid.clone());
    let token = jsonwebtoken::encode(&header, &claims, &keys.encoding)?;
    Ok((low_s(&token)?, claims))
}

/// The order n of P-256, big-endian.
const P256_N: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xbc, 0xe6, 0xfa, 0xad, 0xa7, 0x17, 0x9e, 0x84, 0xf3, 0xb9,
    0xca, 0xc2, 0xfc, 0x63, 0x25, 0x51,
];
/// n / 2, rounded down: the largest s of a low-S signature.
const P256_HALF_N: [u8; 32] = [
    0x7f, 0xff, 0xff, 0xff, 0x80, 0x00, 0x00, 0x00, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xde, 0x73, 0x7d, 0x56, 0xd3, 0x8b, 0xcf, 0x42, 0x79, 0xdc,
    0xe5, 0x61, 0x7e, 0x31, 0x92, 0xa8,
];

/// The s half of a JWS ES256 signature (`r || s`, 32 bytes each), or
/// `None` when the signature is not 64 bytes of base64url.
fn signature_s(token: &str) -> Option<[u8; 32]> {
    let (_, sig) = token.rsplit_once('.')?;
    let bytes = URL_SAFE_NO_PAD.decode(sig).ok()?;
    (bytes.len() == 64).then(|| bytes[32..].try_into().expect("32 bytes"))
}

/// The token with its signature's twin: s replaced by n - s.
fn flip_s(token: &str) -> Option<String> {
    let s = signature_s(token)?;
    let (signed, sig) = token.rsplit_once('.')?;
    let mut bytes = URL_SAFE_NO_PAD.decode(sig).ok()?;
    let mut borrow = 0u16;
    for i in (0..32).rev() {
        let (digit, under) = u16::from(P256_N[i]).overflowing_sub(u16::from(s[i]) + borrow);
        bytes[32 + i] = digit as u8;
        borrow = u16::from(under);
    }
    Some(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(bytes)))
}

/// Rewrites a freshly signed token's signature to low S; the signing
/// library leaves about half of them high.
fn low_s(token: &str) -> anyhow::Result<String> {
    match signature_s(token) {
        Some(s) if s <= P256_HALF_N => Ok(token.to_string()),
        Some(_) => flip_s(token).ok_or_else(|| anyhow::anyhow!("flipping an ES256 signature")),
        None => anyhow::bail!("an ES256 signature is 64 bytes"),
    }
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
    // Only the low-S spelling is a token (see the module doc); big-endian
    // arrays of one length compare as the numbers they spell.
    if signature_s(token).is_none_or(|s| s > P256_HALF_N) {
        return Err(Refusal::Invalid);
    }
    let key = keys.verifier(&kid).ok_or(Refusal::UnknownKey)?;
    let mut validation = Validation::new(Algorithm::ES256);
    validation.set_issuer(&[issuer]);
    validation.leeway = 0;
    validation.validate_aud = false;
    jsonwebtoken::decode::<Claims>(token, &key.decoding, &validation).map(|d| d.claims).map_err(|_| Refusal::Invalid)
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
    use jsonwebtoken::{DecodingKey, EncodingKey};

    use super::*;
    use crate::crypto::signing::VerifyKey;

    fn keys() -> KeySet {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
        let public = pair.public_key().as_ref();
        let (x, y) = (URL_SAFE_NO_PAD.encode(&public[1..33]), URL_SAFE_NO_PAD.encode(&public[33..65]));
        let decoding = DecodingKey::from_ec_components(&x, &y).unwrap();
        let key = VerifyKey { kid: "k".into(), x, y, decoding, verify_until: None };
        KeySet { current_kid: "k".into(), encoding: EncodingKey::from_ec_der(pkcs8.as_ref()), verify: HashMap::from([("k".to_string(), key)]) }
    }

    fn claims() -> Claims {
        Claims {
            iss: String::new(),
            sub: "person".into(),
            iat: 0,
            exp: 0,
            jti: String::new(),
            email: None,
            display_name: None,
            tenant: None,
            actor: Actor { kind: "human".into() },
            amr: vec![],
            scopes: None,
            key_id: None,
            application_id: None,
            key_rotated_at: None,
        }
    }

    #[test]
    fn minted_tokens_are_low_s_and_their_high_s_twins_are_refused() {
        let keys = keys();
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_issuer(&["iss"]);
        // Enough tokens that the signer must have produced high S often.
        for _ in 0..32 {
            let (token, _) = mint(&keys, "iss", 60, claims()).unwrap();
            assert!(signature_s(&token).unwrap() <= P256_HALF_N, "minted high S");
            assert!(verify(&keys, "iss", &token).is_ok());
            let twin = flip_s(&token).unwrap();
            assert!(signature_s(&twin).unwrap() > P256_HALF_N);
            // The library takes the twin as a valid signature; the hub does not.
            assert!(jsonwebtoken::decode::<Claims>(&twin, &keys.verify["k"].decoding, &validation).is_ok());
            assert!(matches!(verify(&keys, "iss", &twin), Err(Refusal::Invalid)));
        }
    }

    #[test]
    fn a_lifetime_beyond_the_clock_is_an_error_not_a_panic() {
        assert!(mint(&keys(), "iss", i64::MAX, claims()).is_err());
    }
}
