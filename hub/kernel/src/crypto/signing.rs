//! ES256 signing keys: creation, storage sealed under the master key, the
//! JWKS document, and rotation with a grace window.
//!
//! `kid` is the hex SHA-256 of the uncompressed public point. The current key
//! signs; a rotated-out key keeps verifying until `verify_until`.

use std::{collections::HashMap, sync::Arc};

use anyhow::Context;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use jsonwebtoken::{DecodingKey, EncodingKey};
use serde_json::{Value, json};
use sqlx::Row;

use super::MasterKey;
use crate::db::{self, Db};

/// A public key that verifies tokens.
#[derive(Clone)]
pub struct VerifyKey {
    pub kid: String,
    pub x: String,
    pub y: String,
    pub decoding: DecodingKey,
    /// `None` for the current key; the end of the grace window otherwise.
    pub verify_until: Option<chrono::DateTime<chrono::Utc>>,
}

/// The keys in force: one that signs, every one that still verifies.
#[derive(Clone)]
pub struct KeySet {
    pub current_kid: String,
    pub encoding: EncodingKey,
    pub verify: HashMap<String, VerifyKey>,
}

impl KeySet {
    /// The RFC 7517 document of every key that still verifies.
    pub fn jwks(&self) -> Value {
        let now = chrono::Utc::now();
        let mut keys: Vec<&VerifyKey> = self.verify.values().filter(|k| k.verify_until.is_none_or(|t| t > now)).collect();
        keys.sort_by(|a, b| (a.kid != self.current_kid).cmp(&(b.kid != self.current_kid)).then(a.kid.cmp(&b.kid)));
        json!({
            "keys": keys.iter().map(|k| json!({
                "kty": "EC", "crv": "P-256", "x": k.x, "y": k.y,
                "kid": k.kid, "alg": "ES256", "use": "sig",
            })).collect::<Vec<_>>()
        })
    }

    /// Whether `other` holds the same keys: the same current key, and the
    /// same verifying keys with the same windows.
    pub fn same_keys(&self, other: &KeySet) -> bool {
        self.current_kid == other.current_kid
            && self.verify.len() == other.verify.len()
            && self.verify.iter().all(|(kid, k)| other.verify.get(kid).is_some_and(|o| o.verify_until == k.verify_until))
    }

    /// Whether moving from `before` to this set takes anything away: a key
    /// `before` verified with is gone or has a different window (so a token
    /// verified under it may no longer be good).
    pub fn narrows(&self, before: &KeySet) -> bool {
        before.verify.iter().any(|(kid, k)| self.verify.get(kid).is_none_or(|n| n.verify_until != k.verify_until))
    }

    /// The key that verifies `kid`, if it is still inside its window.
    pub fn verifier(&self, kid: &str) -> Option<&VerifyKey> {
        let k = self.verify.get(kid)?;
        match k.verify_until {
            Some(until) if until <= chrono::Utc::now() => None,
            _ => Some(k),
        }
    }
}

/// The outcome of a rotation.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
#[schema(as = SigningKeyRotation)]
pub struct Rotation {
    pub rotated_at: String,
    pub fingerprint_current: String,
    pub fingerprint_previous: Option<String>,
    pub grace_window_ms: i64,
    /// Whether the operator called it an emergency (a suspected leak).
    pub emergency: bool,
}

fn generate(master: &MasterKey) -> anyhow::Result<(String, Vec<u8>, String, String)> {
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).map_err(|_| anyhow::anyhow!("generating a P-256 key"))?;
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).map_err(|_| anyhow::anyhow!("parsing the generated key"))?;
    let public = pair.public_key().as_ref(); // 0x04 || x || y
    anyhow::ensure!(public.len() == 65 && public[0] == 4, "unexpected public key encoding");
    let kid = super::sha256_hex(public);
    let sealed = master.seal(pkcs8.as_ref(), kid.as_bytes());
    Ok((kid, sealed, URL_SAFE_NO_PAD.encode(&public[1..33]), URL_SAFE_NO_PAD.encode(&public[33..65])))
}

/// Stores a freshly generated key as the current one.
async fn insert_current<'e, E>(exec: E, master: &MasterKey, created_at: &str) -> anyhow::Result<String>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let (kid, sealed, x, y) = generate(master)?;
    sqlx::query(
        "INSERT INTO crypto_signing_key (kid, private_enc, public_x, public_y, status, created_at) \
         VALUES ($1, $2, $3, $4, 'current', $5)",
    )
    .bind(&kid)
    .bind(sealed)
    .bind(&x)
    .bind(&y)
    .bind(created_at)
    .execute(exec)
    .await?;
    Ok(kid)
}

/// Loads the keys in force, creating the first signing key when there is
/// none yet.
pub async fn load_or_create(db: &Db, master: &MasterKey) -> anyhow::Result<KeySet> {
    if let Some(set) = load(db, master).await? {
        return Ok(set);
    }
    let kid = insert_current(db.writer(), master, &db::now()).await;
    if let Err(e) = kid {
        // Another hub replica may have created it at the same moment.
        tracing::debug!(error = %e, "creating the first signing key");
    } else {
        tracing::warn!("created the first token signing key; it is stored sealed under the master key");
    }
    load(db, master).await?.context("no current signing key after creating one")
}

/// Loads the keys in force, or `None` when no current key exists.
pub async fn load(db: &Db, master: &MasterKey) -> anyhow::Result<Option<KeySet>> {
    let rows = sqlx::query(
        "SELECT kid, private_enc, public_x, public_y, status, verify_until FROM crypto_signing_key \
         WHERE status IN ('current', 'previous') ORDER BY created_at DESC",
    )
    .fetch_all(&db.read)
    .await?;
    let mut current: Option<(String, EncodingKey)> = None;
    let mut verify = HashMap::new();
    for row in rows {
        let kid: String = row.try_get("kid")?;
        let status: String = row.try_get("status")?;
        let x: String = row.try_get("public_x")?;
        let y: String = row.try_get("public_y")?;
        let until: Option<String> = row.try_get("verify_until")?;
        if status == "current" && current.is_none() {
            let sealed: Vec<u8> = row.try_get("private_enc")?;
            let pkcs8 = zeroize::Zeroizing::new(master.open(&sealed, kid.as_bytes()).context("opening the signing key: wrong master key?")?);
            current = Some((kid.clone(), EncodingKey::from_ec_der(&pkcs8)));
        }
        let decoding = DecodingKey::from_ec_components(&x, &y).context("signing key public part")?;
        let verify_until = if status == "current" { None } else { until.as_deref().and_then(db::parse_time) };
        verify.insert(kid.clone(), VerifyKey { kid, x, y, decoding, verify_until });
    }
    Ok(current.map(|(current_kid, encoding)| KeySet { current_kid, encoding, verify }))
}

/// Rotates the signing key: a new key becomes current; the old one keeps
/// verifying for `grace` so every token minted before the rotation stays
/// valid until it expires.
pub async fn rotate(db: &Db, master: &MasterKey, grace: chrono::Duration, emergency: bool) -> anyhow::Result<(Rotation, Arc<KeySet>)> {
    let mut tx = db.begin().await?;
    let rotation = rotate_in(&mut tx, master, grace, emergency).await?;
    tx.commit().await?;
    let set = load(db, master).await?.context("no current key after rotation")?;
    Ok((rotation, Arc::new(set)))
}

/// [`rotate`] inside the caller's transaction (which records the event
/// with it); the caller loads the keys once it has committed.
pub async fn rotate_in(tx: &mut db::Tx, master: &MasterKey, grace: chrono::Duration, emergency: bool) -> anyhow::Result<Rotation> {
    // Rotations queue: each demotes the current key the one before it made,
    // so one key is current whatever the number of replicas rotating.
    db::change::serialize(tx, "crypto_signing_key rotation").await.map_err(|e| anyhow::anyhow!("{e}"))?;
    let now = chrono::Utc::now();
    let previous: Option<String> =
        sqlx::query_scalar("SELECT kid FROM crypto_signing_key WHERE status = 'current' ORDER BY created_at DESC LIMIT 1").fetch_optional(&mut **tx).await?;
    // Keys whose window has closed are retired for good.
    sqlx::query("UPDATE crypto_signing_key SET status = 'retired' WHERE status = 'previous' AND verify_until <= $1")
        .bind(db::format_time(now))
        .execute(&mut **tx)
        .await?;
    sqlx::query("UPDATE crypto_signing_key SET status = 'previous', verify_until = $1 WHERE status = 'current'")
        .bind(db::format_time(now + grace))
        .execute(&mut **tx)
        .await?;
    let kid = insert_current(&mut **tx, master, &db::format_time(now)).await?;
    Ok(Rotation {
        rotated_at: db::format_time(now),
        fingerprint_current: kid,
        fingerprint_previous: previous,
        grace_window_ms: grace.num_milliseconds(),
        emergency,
    })
}
