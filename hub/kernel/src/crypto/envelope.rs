//! The vault's envelopes (sdk-vault): a plaintext sealed under a fresh
//! data-encryption key (AES-256-GCM), that key wrapped under the tenant's
//! vault key (a data key wrapped by the master key). Both seals are bound
//! to the tenant and a `ref`, so an envelope opens only for the tenant and
//! the ref it was made for. Here rather than in the vault's area because
//! other areas keep envelopes too (the AI gateway's provider credentials).

use base64::{Engine, engine::general_purpose::STANDARD as B64};

use super::{DataKey, MasterKey, open as open_with, random_bytes, seal as seal_with};
use crate::{
    db::{self, Tx},
    error::{ApiError, ApiResult},
};

pub const NONCE: usize = 12;
pub const TAG: usize = 16;

/// An envelope's parts, each base64 (the vault's wire form).
#[derive(Clone, Debug)]
pub struct Envelope {
    pub reference: String,
    pub ciphertext_b64: String,
    pub wrapped_dek_b64: String,
    pub iv_b64: String,
    pub tag_b64: String,
}

/// The tenant's vault key, made on first use.
async fn tenant_key(master: &MasterKey, tx: &mut Tx, tenant_id: &str) -> ApiResult<DataKey> {
    let existing: Option<String> =
        sqlx::query_scalar("SELECT data_key_id FROM vault_tenant_key WHERE tenant_id = $1").bind(tenant_id).fetch_optional(&mut **tx).await?;
    let key_id = match existing {
        Some(id) => id,
        None => {
            let key = DataKey::create_for_tenant(tx, master, tenant_id).await?;
            let made = sqlx::query("INSERT INTO vault_tenant_key (tenant_id, data_key_id, created_at) VALUES ($1, $2, $3) ON CONFLICT (tenant_id) DO NOTHING")
                .bind(tenant_id)
                .bind(&key.key_id)
                .bind(db::now())
                .execute(&mut **tx)
                .await?;
            if made.rows_affected() == 1 {
                return Ok(key);
            }
            // Another request made it first: use that one.
            DataKey::destroy(tx, &key.key_id).await?;
            sqlx::query_scalar("SELECT data_key_id FROM vault_tenant_key WHERE tenant_id = $1").bind(tenant_id).fetch_one(&mut **tx).await?
        }
    };
    // A key under a revoked customer-managed key (BYOK) answers 409.
    DataKey::load(&mut **tx, master, &key_id)
        .await
        .map_err(super::byok::refusal)?
        .ok_or_else(|| ApiError::Conflict("the tenant's vault key was destroyed".into()))
}

fn aad(kind: &str, tenant_id: &str, reference: &str) -> Vec<u8> {
    format!("vault-{kind}:{tenant_id}:{reference}").into_bytes()
}

/// Seals `plaintext` for the tenant and `reference`.
pub async fn seal(master: &MasterKey, tx: &mut Tx, tenant_id: &str, reference: &str, plaintext: &[u8]) -> ApiResult<Envelope> {
    let key = tenant_key(master, tx, tenant_id).await?;
    let dek: [u8; 32] = random_bytes(32).try_into().expect("32 bytes");
    let sealed = seal_with(&dek, plaintext, &aad("data", tenant_id, reference));
    let wrapped = key.seal(&dek, &aad("dek", tenant_id, reference));
    let (iv, rest) = sealed.split_at(NONCE);
    let (ciphertext, tag) = rest.split_at(rest.len() - TAG);
    Ok(Envelope {
        reference: reference.to_string(),
        ciphertext_b64: B64.encode(ciphertext),
        wrapped_dek_b64: B64.encode(wrapped),
        iv_b64: B64.encode(iv),
        tag_b64: B64.encode(tag),
    })
}

/// Opens an envelope `seal` made for the tenant and its `reference`: the
/// plaintext, or `None` when it does not open (another tenant's or ref's,
/// altered, or malformed).
pub async fn open(master: &MasterKey, tx: &mut Tx, tenant_id: &str, envelope: &Envelope) -> ApiResult<Option<Vec<u8>>> {
    let parts: Option<Vec<Vec<u8>>> =
        [&envelope.ciphertext_b64, &envelope.wrapped_dek_b64, &envelope.iv_b64, &envelope.tag_b64].iter().map(|p| B64.decode(p.as_bytes()).ok()).collect();
    let Some([ciphertext, wrapped, iv, tag]) = parts.and_then(|p| <[Vec<u8>; 4]>::try_from(p).ok()) else {
        return Ok(None);
    };
    if iv.len() != NONCE || tag.len() != TAG {
        return Ok(None);
    }
    let key = tenant_key(master, tx, tenant_id).await?;
    let reference = &envelope.reference;
    let Some(dek) = key.open(&wrapped, &aad("dek", tenant_id, reference)).ok().and_then(|d| <[u8; 32]>::try_from(d).ok()) else {
        return Ok(None);
    };
    let sealed = [iv.as_slice(), ciphertext.as_slice(), tag.as_slice()].concat();
    Ok(open_with(&dek, &sealed, &aad("data", tenant_id, reference)).ok())
}
