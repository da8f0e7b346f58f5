//! sdk-vault: envelope encryption for the tenant's own data. `encrypt`
//! seals the plaintext under a fresh data-encryption key (AES-256-GCM) and
//! wraps that key under the tenant's vault key (a data key wrapped by the
//! master key); `decrypt` is its inverse. Both bind the envelope to the
//! tenant and its `ref`, so an envelope opens only for the tenant and the
//! ref it was made for. Nothing of it is stored: the caller keeps the
//! envelope. A tenant bound to a customer-managed key (BYOK) has its vault
//! key wrapped under that key: once the binding is revoked, encrypt and
//! decrypt answer 409 `UndecryptableError`.

use base64::{Engine, engine::general_purpose::STANDARD as B64};
use hub_kernel::{crypto, crypto::DataKey, prelude::*};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(encrypt)).routes(routes!(decrypt))
}

/// The largest plaintext sealed in one call, bytes.
const MAX_PLAINTEXT: usize = 1024 * 1024;
const NONCE: usize = 12;
const TAG: usize = 16;

/// The tenant's vault key, made on first use.
async fn tenant_key(state: &AppState, tx: &mut Tx, tenant_id: &str) -> ApiResult<DataKey> {
    let existing: Option<String> =
        sqlx::query_scalar("SELECT data_key_id FROM vault_tenant_key WHERE tenant_id = $1").bind(tenant_id).fetch_optional(&mut **tx).await?;
    let key_id = match existing {
        Some(id) => id,
        None => {
            let key = DataKey::create_for_tenant(tx, &state.master, tenant_id).await?;
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
    DataKey::load(&mut **tx, &state.master, &key_id)
        .await
        .map_err(crypto::byok::refusal)?
        .ok_or_else(|| ApiError::Conflict("the tenant's vault key was destroyed".into()))
}

fn aad(kind: &str, tenant_id: &str, reference: &str) -> Vec<u8> {
    format!("vault-{kind}:{tenant_id}:{reference}").into_bytes()
}

fn check_ref(check: &mut Check, value: &Option<String>) -> String {
    let r = check.required("ref", value);
    if r.chars().count() > 256 {
        check.fail("ref must be at most 256 characters");
    }
    r
}

/// A required base64 field, decoded (empty when missing or malformed,
/// which `check` reports).
fn required_b64(check: &mut Check, name: &str, value: &Option<String>) -> Vec<u8> {
    let v = check.required(name, value);
    if v.is_empty() {
        return Vec::new();
    }
    B64.decode(&v).unwrap_or_else(|_| {
        check.fail(format!("{name} must be base64"));
        Vec::new()
    })
}

#[derive(Deserialize, ToSchema)]
#[schema(as = VaultEncryptRequest)]
struct EncryptRequest {
    /// What the envelope is for (at most 256 characters); decrypting needs
    /// the same.
    #[schema(required = true)]
    r#ref: Option<String>,
    /// The plaintext, base64 (at most 1 MiB decoded).
    #[schema(required = true)]
    plaintext_b64: Option<String>,
}

/// An envelope: everything `decrypt` needs besides the tenant's key.
#[derive(Serialize, ToSchema)]
#[schema(as = VaultEnvelope)]
struct Envelope {
    r#ref: String,
    ciphertext_b64: String,
    /// The data-encryption key, wrapped under the tenant's vault key.
    wrapped_dek_b64: String,
    iv_b64: String,
    tag_b64: String,
}

/// Seals a plaintext into an envelope bound to the tenant and `ref`.
#[utoipa::path(post, path = "/api/vault/encrypt", tag = "sdk-vault", request_body = EncryptRequest,
    responses((status = 200, description = "the envelope", body = Data<Envelope>)))]
async fn encrypt(State(state): State<AppState>, Tenant(ctx): Tenant, Body(body): Body<EncryptRequest>) -> ApiResult<Response> {
    let mut check = Check::new();
    let reference = check_ref(&mut check, &body.r#ref);
    let plaintext = required_b64(&mut check, "plaintext_b64", &body.plaintext_b64);
    if plaintext.len() > MAX_PLAINTEXT {
        check.fail(format!("plaintext_b64 must decode to at most {MAX_PLAINTEXT} bytes"));
    }
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let key = tenant_key(&state, &mut tx, &ctx.tenant_id).await?;
    let dek: [u8; 32] = crypto::random_bytes(32).try_into().expect("32 bytes");
    let sealed = crypto::seal(&dek, &plaintext, &aad("data", &ctx.tenant_id, &reference));
    let wrapped = key.seal(&dek, &aad("dek", &ctx.tenant_id, &reference));
    let (iv, rest) = sealed.split_at(NONCE);
    let (ciphertext, tag) = rest.split_at(rest.len() - TAG);
    let envelope = Envelope {
        r#ref: reference.clone(),
        ciphertext_b64: B64.encode(ciphertext),
        wrapped_dek_b64: B64.encode(wrapped),
        iv_b64: B64.encode(iv),
        tag_b64: B64.encode(tag),
    };
    audit::record(&mut tx, &ctx, events::VAULT_ENVELOPE_ENCRYPTED, json!({ "ref": reference, "bytes": plaintext.len() })).await?;
    tx.commit().await?;
    Ok(ok(envelope))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = VaultDecryptRequest)]
struct DecryptRequest {
    #[schema(required = true)]
    r#ref: Option<String>,
    #[schema(required = true)]
    ciphertext_b64: Option<String>,
    #[schema(required = true)]
    wrapped_dek_b64: Option<String>,
    #[schema(required = true)]
    iv_b64: Option<String>,
    #[schema(required = true)]
    tag_b64: Option<String>,
}

#[derive(Serialize, ToSchema)]
#[schema(as = VaultPlaintext)]
struct Plaintext {
    plaintext_b64: String,
}

/// Opens an envelope `encrypt` made for this tenant and `ref`.
#[utoipa::path(post, path = "/api/vault/decrypt", tag = "sdk-vault", request_body = DecryptRequest,
    responses((status = 200, description = "the plaintext", body = Data<Plaintext>)))]
async fn decrypt(State(state): State<AppState>, Tenant(ctx): Tenant, Body(body): Body<DecryptRequest>) -> ApiResult<Response> {
    let mut check = Check::new();
    let reference = check_ref(&mut check, &body.r#ref);
    let ciphertext = required_b64(&mut check, "ciphertext_b64", &body.ciphertext_b64);
    let wrapped = required_b64(&mut check, "wrapped_dek_b64", &body.wrapped_dek_b64);
    let iv = required_b64(&mut check, "iv_b64", &body.iv_b64);
    let tag = required_b64(&mut check, "tag_b64", &body.tag_b64);
    if !iv.is_empty() && iv.len() != NONCE {
        check.fail(format!("iv_b64 must decode to {NONCE} bytes"));
    }
    if !tag.is_empty() && tag.len() != TAG {
        check.fail(format!("tag_b64 must decode to {TAG} bytes"));
    }
    check.finish()?;
    let unopened = || ApiError::invalid("the envelope does not open for this tenant and ref");
    let mut tx = state.db.begin().await?;
    let key = tenant_key(&state, &mut tx, &ctx.tenant_id).await?;
    let dek: [u8; 32] = key.open(&wrapped, &aad("dek", &ctx.tenant_id, &reference)).ok().and_then(|d| d.try_into().ok()).ok_or_else(unopened)?;
    let sealed = [iv.as_slice(), ciphertext.as_slice(), tag.as_slice()].concat();
    let plaintext = crypto::open(&dek, &sealed, &aad("data", &ctx.tenant_id, &reference)).map_err(|_| unopened())?;
    audit::record(&mut tx, &ctx, events::VAULT_ENVELOPE_DECRYPTED, json!({ "ref": reference, "bytes": plaintext.len() })).await?;
    tx.commit().await?;
    Ok(ok(Plaintext { plaintext_b64: B64.encode(plaintext) }))
}
