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
use hub_kernel::{crypto::envelope, prelude::*};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(encrypt)).routes(routes!(decrypt))
}

/// The largest plaintext sealed in one call, bytes.
const MAX_PLAINTEXT: usize = 1024 * 1024;
const NONCE: usize = envelope::NONCE;
const TAG: usize = envelope::TAG;

/// A base64 field the contract found present, decoded (empty when it is
/// not of the form its pattern states, canonical padded base64, which
/// `check` reports).
fn decoded_b64(check: &mut Check, name: &str, value: &str, form: &Pattern) -> Vec<u8> {
    match B64.decode(value) {
        Ok(bytes) if form.is_match(value) => bytes,
        _ => {
            check.fail(format!("{name} must be base64"));
            Vec::new()
        }
    }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = VaultEncryptRequest)]
struct EncryptRequest {
    /// What the envelope is for; decrypting needs the same.
    #[schema(max_length = 256)]
    r#ref: String,
    /// The plaintext, base64 (at most 1 MiB decoded).
    #[schema(pattern = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$")]
    plaintext_b64: String,
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
    extensions(("x-concurrency" = json!({"outcome": "independent", "body": {"ref": "v-{unique}", "plaintext_b64": "aGVsbG8="}}))),
    responses((status = 200, description = "the envelope", body = Data<Envelope>)))]
async fn encrypt(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<EncryptRequest>) -> ApiResult<Data<Envelope>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let reference = body.r#ref.trim();
    static PLAINTEXT: Pattern = Pattern::of::<EncryptRequest>("plaintext_b64");
    let plaintext = decoded_b64(&mut check, "plaintext_b64", &body.plaintext_b64, &PLAINTEXT);
    if plaintext.len() > MAX_PLAINTEXT {
        check.fail(format!("plaintext_b64 must decode to at most {MAX_PLAINTEXT} bytes"));
    }
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let sealed = envelope::seal(&state.master, &mut tx, &ctx.tenant_id, reference, &plaintext).await?;
    let envelope = Envelope {
        r#ref: sealed.reference,
        ciphertext_b64: sealed.ciphertext_b64,
        wrapped_dek_b64: sealed.wrapped_dek_b64,
        iv_b64: sealed.iv_b64,
        tag_b64: sealed.tag_b64,
    };
    audit::record(&mut tx, &ctx, events::VAULT_ENVELOPE_ENCRYPTED, json!({ "ref": reference, "bytes": plaintext.len() })).await?;
    tx.commit().await?;
    Ok(ok(envelope))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = VaultDecryptRequest)]
struct DecryptRequest {
    #[schema(max_length = 256)]
    r#ref: String,
    /// Base64, as `encrypt` answered them.
    #[schema(pattern = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$")]
    ciphertext_b64: String,
    #[schema(pattern = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$")]
    wrapped_dek_b64: String,
    /// 12 bytes, base64.
    #[schema(pattern = r"^[A-Za-z0-9+/]{16}$")]
    iv_b64: String,
    /// 16 bytes, base64.
    #[schema(pattern = r"^[A-Za-z0-9+/]{21}[AQgw]==$")]
    tag_b64: String,
}

/// An opened envelope's plaintext.
#[derive(Serialize, ToSchema)]
#[schema(as = VaultPlaintext)]
struct Plaintext {
    plaintext_b64: String,
}

/// Opens an envelope `encrypt` made for this tenant and `ref`.
#[utoipa::path(post, path = "/api/vault/decrypt", tag = "sdk-vault", request_body = DecryptRequest,
    extensions(("x-concurrency" = json!({"outcome": "independent", "given": [["POST", "/api/vault/encrypt", {"ref": "v-{unique}", "plaintext_b64": "aGVsbG8="}]], "body": {"ref": "{ref}", "ciphertext_b64": "{ciphertext_b64}", "wrapped_dek_b64": "{wrapped_dek_b64}", "iv_b64": "{iv_b64}", "tag_b64": "{tag_b64}"}}))),
    responses((status = 200, description = "the plaintext", body = Data<Plaintext>)))]
async fn decrypt(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<DecryptRequest>) -> ApiResult<Data<Plaintext>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let reference = body.r#ref.trim().to_string();
    static CIPHERTEXT: Pattern = Pattern::of::<DecryptRequest>("ciphertext_b64");
    static WRAPPED_DEK: Pattern = Pattern::of::<DecryptRequest>("wrapped_dek_b64");
    let ciphertext = decoded_b64(&mut check, "ciphertext_b64", &body.ciphertext_b64, &CIPHERTEXT);
    let wrapped = decoded_b64(&mut check, "wrapped_dek_b64", &body.wrapped_dek_b64, &WRAPPED_DEK);
    // The patterns of iv_b64 and tag_b64 are canonical base64 of 12 and
    // 16 bytes: base64 (the ciphertext's pattern), then the length, each
    // named by its own message.
    let iv = decoded_b64(&mut check, "iv_b64", &body.iv_b64, &CIPHERTEXT);
    let tag = decoded_b64(&mut check, "tag_b64", &body.tag_b64, &CIPHERTEXT);
    if !iv.is_empty() && iv.len() != NONCE {
        check.fail(format!("iv_b64 must decode to {NONCE} bytes"));
    }
    if !tag.is_empty() && tag.len() != TAG {
        check.fail(format!("tag_b64 must decode to {TAG} bytes"));
    }
    check.finish()?;
    let sealed = envelope::Envelope {
        reference: reference.clone(),
        ciphertext_b64: B64.encode(ciphertext),
        wrapped_dek_b64: B64.encode(wrapped),
        iv_b64: B64.encode(iv),
        tag_b64: B64.encode(tag),
    };
    let mut tx = state.db.begin().await?;
    let plaintext = envelope::open(&state.master, &mut tx, &ctx.tenant_id, &sealed)
        .await?
        .ok_or_else(|| ApiError::invalid("the envelope does not open for this tenant and ref"))?;
    audit::record(&mut tx, &ctx, events::VAULT_ENVELOPE_DECRYPTED, json!({ "ref": reference, "bytes": plaintext.len() })).await?;
    tx.commit().await?;
    Ok(ok(Plaintext { plaintext_b64: B64.encode(plaintext) }))
}
