-- sdk-tenant-lifecycle: a tenant's offboarding, started once. The tenant's
-- credentials stop working at deadline_at; completed_at is stamped (and
-- tenant.offboarding.completed.v1 recorded) by the sweep that notices.
CREATE TABLE tenant_offboarding (
    tenant_id             TEXT PRIMARY KEY REFERENCES tenant_tenant (tenant_id),
    reason                TEXT,
    started_by            TEXT NOT NULL,
    started_by_tenant_id  TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    started_at            TEXT NOT NULL,
    deadline_at           TEXT NOT NULL,
    completed_at          TEXT
);
CREATE INDEX tenant_offboarding_due ON tenant_offboarding (deadline_at) WHERE completed_at IS NULL;
