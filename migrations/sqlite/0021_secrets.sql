-- sdk-secrets: references to secrets kept elsewhere (a KMS or secret
-- manager): where the secret lives and its rotation, never the secret.
CREATE TABLE secrets_reference (
    tenant_id             TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    ref                   TEXT NOT NULL,
    scope                 TEXT NOT NULL CHECK (scope IN ('tenant', 'app', 'service', 'app_user')),
    kms_key_id            TEXT NOT NULL,
    version               BIGINT NOT NULL,
    rotation_period_days  BIGINT,
    last_rotated_at       TEXT NOT NULL,
    created_by            TEXT NOT NULL,
    created_at            TEXT NOT NULL,
    updated_at            TEXT NOT NULL,
    PRIMARY KEY (tenant_id, ref)
);
