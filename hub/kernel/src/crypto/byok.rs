//! Customer-managed keys (BYOK). A tenant's binding names a key of the
//! customer's KMS (`customer_kms_key_arn`) and the tenant key under it
//! (`tenant_key_id`). The hub's key service holds a key-encryption key
//! (KEK) for each tenant key, sealed under the master key, and unwraps
//! with it only while the binding's grant is `active`: every data key of
//! the tenant (`crypto_data_key.tenant_id`, the vault key among them) is
//! wrapped under the KEK of its binding (`wrapped_by`), so once the grant
//! is revoked nothing of the tenant's opens, on any replica (no replica
//! keeps an unwrapped tenant key beyond the request that loaded it).
//! Rotation re-wraps the tenant's data keys from the previous tenant key
//! to a new one in one transaction; envelopes sealed under those data keys
//! stay as they are (`leaf_reencryption_needed` false).

use serde::Serialize;
use serde_json::json;
use sqlx::FromRow;
use zeroize::Zeroizing;

use super::{MasterKey, open, random_bytes, seal};
use crate::{
    audit::{self, events},
    db::{self, Db, Tx, rows::Flag},
    error::{ApiError, ApiResult},
};

/// The providers a binding may name.
pub const PROVIDERS: [&str; 3] = ["aws-kms", "gcp-kms", "hsm-pkcs11"];

/// A data key's customer-managed key is not granted to the hub (its
/// binding is revoking or revoked).
#[derive(Debug, thiserror::Error)]
#[error("the customer-managed key {0} is not granted to the hub")]
pub struct NotGranted(pub String);

const NOT_GRANTED: &str = "the tenant's customer-managed key is not granted to the hub: its BYOK binding is revoked";

/// The answer to a data key that did not load: 409 `UndecryptableError`
/// when its customer-managed key is not granted, 500 otherwise.
pub fn refusal(e: anyhow::Error) -> ApiError {
    if e.downcast_ref::<NotGranted>().is_some() { ApiError::Undecryptable(NOT_GRANTED.into()) } else { ApiError::Internal(e) }
}

fn kek_aad(tenant_key_id: &str) -> Vec<u8> {
    format!("byok-kek:{tenant_key_id}").into_bytes()
}

pub(crate) fn open_kek(master: &MasterKey, tenant_key_id: &str, sealed: &[u8]) -> anyhow::Result<Zeroizing<[u8; 32]>> {
    let kek: [u8; 32] = master.open(sealed, &kek_aad(tenant_key_id))?.try_into().map_err(|_| anyhow::anyhow!("a KEK of the wrong length"))?;
    Ok(Zeroizing::new(kek))
}

/// A new KEK for `tenant_key_id`, stored for `binding_id`.
async fn insert_kek(tx: &mut Tx, master: &MasterKey, binding_id: &str, tenant_key_id: &str) -> ApiResult<Zeroizing<[u8; 32]>> {
    let kek: [u8; 32] = random_bytes(32).try_into().expect("32 bytes");
    sqlx::query("INSERT INTO crypto_byok_key (tenant_key_id, binding_id, kek_sealed, created_at) VALUES ($1, $2, $3, $4)")
        .bind(tenant_key_id)
        .bind(binding_id)
        .bind(master.seal(&kek, &kek_aad(tenant_key_id)))
        .bind(db::now())
        .execute(&mut **tx)
        .await?;
    Ok(Zeroizing::new(kek))
}

/// The KEK new data keys of a tenant are wrapped under: `None` without a
/// binding; 409 when the tenant's latest binding is not active.
pub(crate) async fn tenant_kek(tx: &mut Tx, master: &MasterKey, tenant_id: &str) -> ApiResult<Option<(String, Zeroizing<[u8; 32]>)>> {
    let row: Option<(String, String, Option<Vec<u8>>)> = sqlx::query_as(
        "SELECT b.grant_status, b.tenant_key_id, k.kek_sealed FROM crypto_byok_binding b LEFT JOIN crypto_byok_key k ON k.tenant_key_id = b.tenant_key_id \
         WHERE b.tenant_id = $1 ORDER BY b.bound_at DESC LIMIT 1",
    )
    .bind(tenant_id)
    .fetch_optional(&mut **tx)
    .await?;
    match row {
        None => Ok(None),
        Some((status, _, _)) if status != "active" => Err(ApiError::Undecryptable(NOT_GRANTED.into())),
        Some((_, tenant_key_id, Some(sealed))) => {
            let kek = open_kek(master, &tenant_key_id, &sealed)?;
            Ok(Some((tenant_key_id, kek)))
        }
        Some((_, tenant_key_id, None)) => Err(ApiError::Internal(anyhow::anyhow!("no KEK for the tenant key {tenant_key_id}"))),
    }
}

/// A tenant's binding to a customer-managed key.
#[derive(Debug, Clone, FromRow, Serialize, utoipa::ToSchema)]
#[schema(as = AdminByokBinding)]
pub struct Binding {
    pub binding_id: String,
    pub tenant_id: String,
    /// `aws-kms`, `gcp-kms` or `hsm-pkcs11`.
    pub provider: String,
    pub customer_kms_key_arn: String,
    /// The tenant key the tenant's data keys are wrapped under now.
    pub tenant_key_id: String,
    /// `active`, `revoking` or `revoked`.
    pub grant_status: String,
    pub bound_at: String,
    pub revoked_at: Option<String>,
    pub sla_revoke_propagation_seconds: i64,
    pub siem_forwarder_endpoint: Option<String>,
}

const BINDING_COLUMNS: &str = "binding_id, tenant_id, provider, customer_kms_key_arn, tenant_key_id, grant_status, bound_at, revoked_at, sla_revoke_propagation_seconds, siem_forwarder_endpoint";

/// What a binding is made of (validated by the caller).
pub struct NewBinding<'a> {
    pub tenant_id: &'a str,
    pub provider: &'a str,
    pub customer_kms_key_arn: &'a str,
    pub tenant_key_id: &'a str,
    pub operator_id: &'a str,
    pub sla_revoke_propagation_seconds: i64,
    pub siem_forwarder_endpoint: Option<&'a str>,
}

async fn key_in_use(tx: &mut Tx, tenant_key_id: &str) -> ApiResult<bool> {
    let found: Option<String> =
        sqlx::query_scalar("SELECT tenant_key_id FROM crypto_byok_key WHERE tenant_key_id = $1").bind(tenant_key_id).fetch_optional(&mut **tx).await?;
    Ok(found.is_some())
}

/// Binds a tenant to a customer-managed key: its KEK is made and every
/// data key of the tenant wrapped under the master key is re-wrapped under
/// it. 409 when the tenant has a binding in force or the tenant key was
/// used before. Event `security.byok.bound.v1` in the tenant's chain.
pub async fn bind(db: &Db, master: &MasterKey, actor: &str, b: NewBinding<'_>) -> ApiResult<Binding> {
    let mut tx = db.begin().await?;
    let binding_id = db::new_id();
    // The one binding in force a tenant may have is decided by its unique
    // index: of two bindings at once, one is made and the other is 409.
    let sql = format!(
        "INSERT INTO crypto_byok_binding (binding_id, tenant_id, provider, customer_kms_key_arn, tenant_key_id, grant_status, bound_at, \
         sla_revoke_propagation_seconds, siem_forwarder_endpoint, operator_id) VALUES ($1, $2, $3, $4, $5, 'active', $6, $7, $8, $9) \
         ON CONFLICT (tenant_id) WHERE grant_status <> 'revoked' DO NOTHING RETURNING {BINDING_COLUMNS}"
    );
    let binding: Option<Binding> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&binding_id)
        .bind(b.tenant_id)
        .bind(b.provider)
        .bind(b.customer_kms_key_arn)
        .bind(b.tenant_key_id)
        .bind(db::now())
        .bind(b.sla_revoke_propagation_seconds)
        .bind(b.siem_forwarder_endpoint)
        .bind(b.operator_id)
        .fetch_optional(&mut *tx)
        .await?;
    let binding = binding.ok_or_else(|| ApiError::Conflict("the tenant already has a BYOK binding in force".into()))?;
    // A tenant key used before (by any tenant) is refused; two bindings of
    // one new key at once meet at the key's primary key.
    if key_in_use(&mut tx, b.tenant_key_id).await? {
        return Err(ApiError::Conflict(format!("tenant_key_id {} is already in use", b.tenant_key_id)));
    }
    let kek = insert_kek(&mut tx, master, &binding_id, b.tenant_key_id).await?;
    let keys: Vec<(String, Vec<u8>)> =
        sqlx::query_as("SELECT key_id, wrapped_key FROM crypto_data_key WHERE tenant_id = $1 AND wrapped_by IS NULL AND wrapped_key IS NOT NULL")
            .bind(b.tenant_id)
            .fetch_all(&mut *tx)
            .await?;
    for (key_id, wrapped) in &keys {
        let key = Zeroizing::new(master.open(wrapped, key_id.as_bytes())?);
        rewrap(&mut tx, key_id, &seal(&kek, &key, key_id.as_bytes()), b.tenant_key_id).await?;
    }
    let payload = json!({ "binding_id": binding_id, "provider": b.provider, "customer_kms_key_arn": b.customer_kms_key_arn,
        "tenant_key_id": b.tenant_key_id, "operator_id": b.operator_id, "wrapped_keys": keys.len() });
    audit::record_operator_in(&mut tx, b.tenant_id, actor, events::SECURITY_BYOK_BOUND, payload).await?;
    tx.commit().await?;
    Ok(binding)
}

async fn rewrap(tx: &mut Tx, key_id: &str, wrapped: &[u8], tenant_key_id: &str) -> ApiResult<()> {
    sqlx::query("UPDATE crypto_data_key SET wrapped_key = $2, wrapped_by = $3 WHERE key_id = $1")
        .bind(key_id)
        .bind(wrapped)
        .bind(tenant_key_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

async fn find(exec: &mut Tx, binding_id: &str) -> ApiResult<Binding> {
    let sql = format!("SELECT {BINDING_COLUMNS} FROM crypto_byok_binding WHERE binding_id = $1");
    let found: Option<Binding> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(binding_id).fetch_optional(&mut **exec).await?;
    found.ok_or(ApiError::Missing("binding not found"))
}

/// The tenant's latest binding, if any.
pub async fn binding_of_tenant(db: &Db, tenant_id: &str) -> ApiResult<Option<Binding>> {
    let sql = format!("SELECT {BINDING_COLUMNS} FROM crypto_byok_binding WHERE tenant_id = $1 ORDER BY bound_at DESC LIMIT 1");
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).fetch_optional(&db.read).await?)
}

/// Revokes a binding's grant: `active` → `revoking` (from that commit no
/// unwrap of the tenant's keys succeeds, on any replica; event
/// `security.byok.revoked.v1`), then, the refusal being in force
/// everywhere, `revoked` with `revoked_at`. A binding left `revoking` (a
/// crash between the two) is completed by revoking it again; a revoked
/// one is 409.
pub async fn revoke(db: &Db, actor: &str, binding_id: &str, reason: &str, operator_id: &str) -> ApiResult<Binding> {
    let mut tx = db.begin().await?;
    // The first step is decided by its write: of several revocations at
    // once, one moves the grant to `revoking` and records the event.
    let moved: Option<(String, String)> = sqlx::query_as(
        "UPDATE crypto_byok_binding SET grant_status = 'revoking', revoke_requested_at = $2, revoke_reason = $3, revoked_by = $4 \
         WHERE binding_id = $1 AND grant_status = 'active' RETURNING tenant_id, tenant_key_id",
    )
    .bind(binding_id)
    .bind(db::now())
    .bind(reason)
    .bind(operator_id)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some((tenant_id, tenant_key_id)) = moved {
        let payload = json!({ "binding_id": binding_id, "tenant_key_id": tenant_key_id, "reason": reason, "operator_id": operator_id });
        audit::record_operator_in(&mut tx, &tenant_id, actor, events::SECURITY_BYOK_REVOKED, payload).await?;
    } else {
        // Read after the write: 404 unknown; a `revoking` binding (left by a
        // crash, or being completed now) goes on to the second step.
        find(&mut tx, binding_id).await?;
    }
    tx.commit().await?;
    // The second step decides which revocation answers: the one that
    // completes it; any other finds it revoked (409).
    let sql = format!(
        "UPDATE crypto_byok_binding SET grant_status = 'revoked', revoked_at = $2 WHERE binding_id = $1 AND grant_status = 'revoking' RETURNING {BINDING_COLUMNS}"
    );
    let done: Option<Binding> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(binding_id).bind(db::now()).fetch_optional(db.writer()).await?;
    done.ok_or_else(|| ApiError::Conflict("the binding is already revoked".into()))
}

/// A rotation of a binding's tenant key.
#[derive(Debug, FromRow, Serialize, utoipa::ToSchema)]
#[schema(as = AdminByokRotation)]
pub struct Rotation {
    pub rotation_id: String,
    pub binding_id: String,
    pub started_at: String,
    pub completed_at: String,
    pub previous_tenant_key_id: String,
    pub new_tenant_key_id: String,
    /// False: the data keys are re-wrapped; what they seal is unchanged.
    #[sqlx(try_from = "i64")]
    #[schema(value_type = bool)]
    pub leaf_reencryption_needed: Flag,
    /// How many data keys were re-wrapped.
    pub rewrapped_keys: i64,
}

const ROTATION_COLUMNS: &str =
    "rotation_id, binding_id, started_at, completed_at, previous_tenant_key_id, new_tenant_key_id, leaf_reencryption_needed, rewrapped_keys";

/// Rotates a binding from `previous` to `new`: a KEK is made for the new
/// tenant key and every data key wrapped under the previous one is
/// re-wrapped under it, in one transaction. 404 unknown binding; 409
/// `UndecryptableError` when the binding is not active or its keys are not
/// wrapped under `previous` (a repeat of a rotation); 409 when `new` was
/// used before. Event `security.byok.rotated.v1` in the tenant's chain.
pub async fn rotate(db: &Db, master: &MasterKey, actor: &str, binding_id: &str, previous: &str, new: &str, operator_id: &str) -> ApiResult<Rotation> {
    let started_at = db::now();
    let mut tx = db.begin().await?;
    // The move from `previous` to `new` is decided by its write: of two
    // rotations at once, one moves the binding and the other is refused
    // with the state the winner left, read after the write.
    let moved: Option<String> = sqlx::query_scalar(
        "UPDATE crypto_byok_binding SET tenant_key_id = $3 WHERE binding_id = $1 AND tenant_key_id = $2 AND grant_status = 'active' RETURNING tenant_id",
    )
    .bind(binding_id)
    .bind(previous)
    .bind(new)
    .fetch_optional(&mut *tx)
    .await?;
    let not_under = |current: &str| ApiError::Undecryptable(format!("the tenant's keys are wrapped under {current}, not {previous}"));
    let Some(tenant_id) = moved else {
        let binding = find(&mut tx, binding_id).await?;
        if binding.grant_status != "active" {
            return Err(ApiError::Undecryptable(format!("the binding's grant is {}: its keys cannot be unwrapped", binding.grant_status)));
        }
        return Err(not_under(&binding.tenant_key_id));
    };
    if key_in_use(&mut tx, new).await? {
        return Err(ApiError::Conflict(format!("new_tenant_key_id {new} is already in use")));
    }
    let sealed: Vec<u8> = sqlx::query_scalar("SELECT kek_sealed FROM crypto_byok_key WHERE tenant_key_id = $1").bind(previous).fetch_one(&mut *tx).await?;
    let old = open_kek(master, previous, &sealed)?;
    let kek = insert_kek(&mut tx, master, binding_id, new).await?;
    let keys: Vec<(String, Vec<u8>)> = sqlx::query_as("SELECT key_id, wrapped_key FROM crypto_data_key WHERE wrapped_by = $1 AND wrapped_key IS NOT NULL")
        .bind(previous)
        .fetch_all(&mut *tx)
        .await?;
    for (key_id, wrapped) in &keys {
        let key = Zeroizing::new(open(&old, wrapped, key_id.as_bytes()).map_err(|_| not_under(previous))?);
        rewrap(&mut tx, key_id, &seal(&kek, &key, key_id.as_bytes()), new).await?;
    }
    let sql = format!(
        "INSERT INTO crypto_byok_rotation (rotation_id, binding_id, started_at, completed_at, previous_tenant_key_id, new_tenant_key_id, \
         leaf_reencryption_needed, rewrapped_keys, operator_id) VALUES ($1, $2, $3, $4, $5, $6, 0, $7, $8) RETURNING {ROTATION_COLUMNS}"
    );
    let rotation: Rotation = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(binding_id)
        .bind(&started_at)
        .bind(db::now())
        .bind(previous)
        .bind(new)
        .bind(keys.len() as i64)
        .bind(operator_id)
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "binding_id": binding_id, "rotation_id": rotation.rotation_id, "previous_tenant_key_id": previous,
        "new_tenant_key_id": new, "rewrapped_keys": keys.len(), "operator_id": operator_id });
    audit::record_operator_in(&mut tx, &tenant_id, actor, events::SECURITY_BYOK_ROTATED, payload).await?;
    tx.commit().await?;
    Ok(rotation)
}
