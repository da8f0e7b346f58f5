-- Tenants the operator suspended: while a row stands, every credential of
-- the tenant (and of its sandbox) answers 423; nothing else changes.
CREATE TABLE tenant_suspension (
    tenant_id     TEXT PRIMARY KEY REFERENCES tenant_tenant (tenant_id),
    reason        TEXT NOT NULL,
    suspended_by  TEXT NOT NULL,
    suspended_at  TEXT NOT NULL
);
