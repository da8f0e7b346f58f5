-- The operator's pool map: a tenant's evidence pool and the map's
-- standing beside its admin and app pools; the tenant list, newest first.
ALTER TABLE tenant_tenant ADD COLUMN evidence_pool_index INTEGER;
ALTER TABLE tenant_tenant ADD COLUMN pool_status TEXT NOT NULL DEFAULT 'ACTIVE' CHECK (pool_status IN ('ACTIVE', 'MIGRATING', 'QUARANTINED'));
CREATE INDEX tenant_tenant_by_created ON tenant_tenant (created_at, tenant_id);
