-- sdk-policy: versioned, immutable policy bundles in the Cedar language.
-- At most one bundle of a tenant is active: the gate's ABAC step
-- evaluates it on every request of the tenant.
CREATE TABLE policy_bundle (
    bundle_id     TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    name          TEXT NOT NULL,
    version       TEXT NOT NULL,
    iql_source    TEXT NOT NULL,
    policy_ids    TEXT NOT NULL,             -- JSON array, in source order
    obligations   TEXT NOT NULL,             -- JSON object
    status        TEXT NOT NULL CHECK (status IN ('inactive', 'active')),
    created_by    TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    activated_at  TEXT,
    UNIQUE (tenant_id, name, version)
);
CREATE UNIQUE INDEX policy_bundle_one_active ON policy_bundle (tenant_id) WHERE status = 'active';
CREATE INDEX policy_bundle_by_created ON policy_bundle (tenant_id, created_at);
