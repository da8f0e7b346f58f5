-- sdk-vault: each tenant's vault key, a data key (wrapped by the master
-- key) created on the tenant's first encryption. Envelopes are not stored:
-- the caller keeps them.
CREATE TABLE vault_tenant_key (
    tenant_id    TEXT PRIMARY KEY REFERENCES tenant_tenant (tenant_id),
    data_key_id  TEXT NOT NULL REFERENCES crypto_data_key (key_id),
    created_at   TEXT NOT NULL
);
