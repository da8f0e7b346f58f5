-- Customer-managed keys (BYOK): a tenant's binding to a key of its KMS,
-- the key-encryption keys the hub's key service holds for it (sealed under
-- the master key, usable only while the binding's grant is active), and
-- the rotations. A tenant data key wrapped under such a key names it in
-- `wrapped_by` (NULL: wrapped under the master key).
CREATE TABLE crypto_byok_binding (
    binding_id                     TEXT PRIMARY KEY,
    tenant_id                      TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    provider                       TEXT NOT NULL,
    customer_kms_key_arn           TEXT NOT NULL,
    tenant_key_id                  TEXT NOT NULL,
    grant_status                   TEXT NOT NULL CHECK (grant_status IN ('active', 'revoking', 'revoked')),
    bound_at                       TEXT NOT NULL,
    revoke_requested_at            TEXT,
    revoked_at                     TEXT,
    revoke_reason                  TEXT,
    revoked_by                     TEXT,
    sla_revoke_propagation_seconds INTEGER NOT NULL,
    siem_forwarder_endpoint        TEXT,
    operator_id                    TEXT NOT NULL
);
CREATE INDEX crypto_byok_binding_by_tenant ON crypto_byok_binding (tenant_id, bound_at);
-- At most one binding of a tenant in force.
CREATE UNIQUE INDEX crypto_byok_binding_in_force ON crypto_byok_binding (tenant_id) WHERE grant_status <> 'revoked';

CREATE TABLE crypto_byok_key (
    tenant_key_id TEXT PRIMARY KEY,
    binding_id    TEXT NOT NULL REFERENCES crypto_byok_binding (binding_id),
    kek_sealed    BLOB NOT NULL,
    created_at    TEXT NOT NULL
);

CREATE TABLE crypto_byok_rotation (
    rotation_id              TEXT PRIMARY KEY,
    binding_id               TEXT NOT NULL REFERENCES crypto_byok_binding (binding_id),
    started_at               TEXT NOT NULL,
    completed_at             TEXT NOT NULL,
    previous_tenant_key_id   TEXT NOT NULL,
    new_tenant_key_id        TEXT NOT NULL,
    leaf_reencryption_needed INTEGER NOT NULL,
    rewrapped_keys           INTEGER NOT NULL,
    operator_id              TEXT NOT NULL
);

ALTER TABLE crypto_data_key ADD COLUMN tenant_id TEXT;
ALTER TABLE crypto_data_key ADD COLUMN wrapped_by TEXT;
CREATE INDEX crypto_data_key_by_tenant ON crypto_data_key (tenant_id);
CREATE INDEX crypto_data_key_by_wrapper ON crypto_data_key (wrapped_by);
UPDATE crypto_data_key SET tenant_id = (SELECT v.tenant_id FROM vault_tenant_key v WHERE v.data_key_id = crypto_data_key.key_id)
WHERE key_id IN (SELECT data_key_id FROM vault_tenant_key);
