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
use sqlx::FromRow;
use zeroize::Zeroizing;

use super::{MasterKey, random_bytes};
use crate::{
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
pub(crate) async fn insert_kek(tx: &mut Tx, master: &MasterKey, binding_id: &str, tenant_key_id: &str) -> ApiResult<Zeroizing<[u8; 32]>> {
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

pub(crate) const BINDING_COLUMNS: &str = "binding_id, tenant_id, provider, customer_kms_key_arn, tenant_key_id, grant_status, bound_at, revoked_at, sla_revoke_propagation_seconds, siem_forwarder_endpoint";

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

pub(crate) async fn key_in_use(tx: &mut Tx, tenant_key_id: &str) -> ApiResult<bool> {
    let found: Option<String> =
        sqlx::query_scalar("SELECT tenant_key_id FROM crypto_byok_key WHERE tenant_key_id = $1").bind(tenant_key_id).fetch_optional(&mut **tx).await?;
    Ok(found.is_some())
}

pub(crate) async fn rewrap(tx: &mut Tx, key_id: &str, wrapped: &[u8], tenant_key_id: &str) -> ApiResult<()> {
    sqlx::query("UPDATE crypto_data_key SET wrapped_key = $2, wrapped_by = $3 WHERE key_id = $1")
        .bind(key_id)
        .bind(wrapped)
        .bind(tenant_key_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

pub(crate) async fn find(exec: &mut Tx, binding_id: &str) -> ApiResult<Binding> {
    let sql = format!("SELECT {BINDING_COLUMNS} FROM crypto_byok_binding WHERE binding_id = $1");
    let found: Option<Binding> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(binding_id).fetch_optional(&mut **exec).await?;
    found.ok_or(ApiError::Missing("binding not found"))
}

/// The tenant's latest binding, if any.
pub async fn binding_of_tenant(db: &Db, tenant_id: &str) -> ApiResult<Option<Binding>> {
    let sql = format!("SELECT {BINDING_COLUMNS} FROM crypto_byok_binding WHERE tenant_id = $1 ORDER BY bound_at DESC LIMIT 1");
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).fetch_optional(&db.read).await?)
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

pub(crate) const ROTATION_COLUMNS: &str =
    "rotation_id, binding_id, started_at, completed_at, previous_tenant_key_id, new_tenant_key_id, leaf_reencryption_needed, rewrapped_keys";
