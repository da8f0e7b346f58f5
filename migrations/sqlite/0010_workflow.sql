-- sdk-workflow: versioned workflow definitions, immutable per
-- (tenant, namespace, name, version).
CREATE TABLE workflow_definition (
    definition_id TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    namespace     TEXT NOT NULL,
    name          TEXT NOT NULL,
    version       INTEGER NOT NULL,
    step_specs    TEXT NOT NULL,
    created_by    TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    UNIQUE (tenant_id, namespace, name, version)
);
