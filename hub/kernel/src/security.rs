//! The operator's key ceremonies, each recorded in its chain in its own
//! transaction: binding a tenant to a customer-managed key, revoking and
//! rotating that binding (over `crypto::byok`'s keys and rows), and the
//! emergency rotation of the token signing key (over `crypto::signing`).
//! Above `crypto/`, so that `crypto/` writes keys and records nothing.

use serde_json::json;
use zeroize::Zeroizing;

use crate::{
    audit::{self, events},
    crypto::{
        MasterKey,
        byok::{BINDING_COLUMNS, Binding, NewBinding, ROTATION_COLUMNS, Rotation, find, insert_kek, key_in_use, open_kek, rewrap},
        open, seal, signing,
    },
    db::{self, Db},
    error::{ApiError, ApiResult},
};

/// The operator's rotation (`POST /admin/security/rotate-signing-key` and
/// `hub rotate-signing-key`): an emergency rotation with the given grace
/// window, recorded in the platform chain as `security.signing_key.rotated.v1`
/// (the operator as actor; `reason` and `actor_id` in the payload) in the
/// rotation's own transaction.
pub async fn rotate_signing_key(
    db: &Db,
    master: &MasterKey,
    grace: chrono::Duration,
    operator: &str,
    reason: &str,
    actor_id: &str,
) -> ApiResult<signing::Rotation> {
    let mut tx = db.begin().await?;
    let rotation = signing::rotate_in(&mut tx, master, grace, true).await?;
    let payload = json!({ "reason": reason, "actor_id": actor_id, "fingerprint_current": rotation.fingerprint_current,
        "fingerprint_previous": rotation.fingerprint_previous, "grace_window_ms": rotation.grace_window_ms, "emergency": rotation.emergency });
    audit::record_operator(&mut tx, operator, events::SECURITY_SIGNING_KEY_ROTATED, payload).await?;
    tx.commit().await?;
    Ok(rotation)
}

/// Binds a tenant to a customer-managed key: its KEK is made and every
/// data key of the tenant wrapped under the master key is re-wrapped under
/// it. 409 when the tenant has a binding in force or the tenant key was
/// used before. Event `security.byok.bound.v1` in the tenant's chain.
pub async fn bind_byok(db: &Db, master: &MasterKey, actor: &str, b: NewBinding<'_>) -> ApiResult<Binding> {
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

/// Revokes a binding's grant: `active` → `revoking` (from that commit no
/// unwrap of the tenant's keys succeeds, on any replica; event
/// `security.byok.revoked.v1`), then, the refusal being in force
/// everywhere, `revoked` with `revoked_at`. A binding left `revoking` (a
/// crash between the two) is completed by revoking it again; a revoked
/// one is 409.
pub async fn revoke_byok(db: &Db, actor: &str, binding_id: &str, reason: &str, operator_id: &str) -> ApiResult<Binding> {
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

/// Rotates a binding from `previous` to `new`: a KEK is made for the new
/// tenant key and every data key wrapped under the previous one is
/// re-wrapped under it, in one transaction. 404 unknown binding; 409
/// `UndecryptableError` when the binding is not active or its keys are not
/// wrapped under `previous` (a repeat of a rotation); 409 when `new` was
/// used before. Event `security.byok.rotated.v1` in the tenant's chain.
pub async fn rotate_byok(db: &Db, master: &MasterKey, actor: &str, binding_id: &str, previous: &str, new: &str, operator_id: &str) -> ApiResult<Rotation> {
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
