-- sdk-config: values by key at four scopes. Platform rows have no tenant
-- (they are the operator's); a key has one active row per scope and scope
-- id, revoked rows stay as history.
CREATE TABLE config_value (
    config_id    TEXT PRIMARY KEY,
    tenant_id    TEXT REFERENCES tenant_tenant (tenant_id),
    scope        TEXT NOT NULL CHECK (scope IN ('platform', 'tenant', 'app', 'app_user')),
    scope_id     TEXT NOT NULL,
    key          TEXT NOT NULL,
    value        TEXT NOT NULL,          -- JSON; null once rotated
    secret_ref   TEXT,
    status       TEXT NOT NULL CHECK (status IN ('active', 'revoked')),
    version      BIGINT NOT NULL,
    updated_by   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    revoked_at   TEXT
);
CREATE UNIQUE INDEX config_value_active ON config_value (COALESCE(tenant_id, ''), scope, scope_id, key) WHERE status = 'active';
CREATE INDEX config_value_by_tenant ON config_value (tenant_id, scope, scope_id, status);
