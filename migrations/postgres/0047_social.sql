-- sdk-social: handles the tenant has authorised, each bound to the persona
-- that authorised it; one row a (network, handle) of a tenant.
CREATE TABLE social_handle (
    handle_id              TEXT PRIMARY KEY,
    tenant_id              TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    network                TEXT NOT NULL,
    external_handle_id     TEXT NOT NULL,
    display_name           TEXT,
    authorized_persona_id  TEXT NOT NULL,
    status                 TEXT NOT NULL CHECK (status IN ('authorised')),
    authorized_by          TEXT NOT NULL,
    authorized_at          TEXT NOT NULL,
    UNIQUE (tenant_id, network, external_handle_id)
);
CREATE INDEX social_handle_by_authorized ON social_handle (tenant_id, authorized_at);
