-- sdk-taxonomy: extraction schemas per document kind, versioned. A
-- tenant's active schema for a kind overrides the platform's default
-- (tenant_id NULL), which the operator maintains; three defaults ship.
CREATE TABLE taxonomy_schema (
    schema_id      TEXT PRIMARY KEY,
    tenant_id      TEXT REFERENCES tenant_tenant (tenant_id),
    document_kind  TEXT NOT NULL,
    version        INTEGER NOT NULL,
    description    TEXT,
    fields         TEXT NOT NULL,            -- JSON: [{ name, type, required, values, description }]
    status         TEXT NOT NULL CHECK (status IN ('active', 'retired')),
    created_by     TEXT NOT NULL,
    created_at     TEXT NOT NULL
);
CREATE UNIQUE INDEX taxonomy_schema_version ON taxonomy_schema (COALESCE(tenant_id, ''), document_kind, version);
CREATE UNIQUE INDEX taxonomy_schema_one_active ON taxonomy_schema (COALESCE(tenant_id, ''), document_kind) WHERE status = 'active';

INSERT INTO taxonomy_schema (schema_id, tenant_id, document_kind, version, description, fields, status, created_by, created_at) VALUES
('0193a000-0000-7000-8000-000000000001', NULL, 'invoice', 1, 'A supplier invoice',
 '[{"name":"invoice_number","type":"string","required":true},{"name":"issue_date","type":"date","required":true},{"name":"due_date","type":"date","required":false},{"name":"supplier_name","type":"string","required":true},{"name":"total","type":"money","required":true},{"name":"currency","type":"string","required":true}]',
 'active', 'platform', '2026-11-24T00:00:00.000000Z'),
('0193a000-0000-7000-8000-000000000002', NULL, 'receipt', 1, 'A point-of-sale receipt',
 '[{"name":"merchant","type":"string","required":true},{"name":"purchased_at","type":"date","required":true},{"name":"total","type":"money","required":true},{"name":"payment_method","type":"enum","required":false,"values":["card","cash","other"]}]',
 'active', 'platform', '2026-11-24T00:00:00.000000Z'),
('0193a000-0000-7000-8000-000000000003', NULL, 'identity_document', 1, 'A passport or national identity card',
 '[{"name":"document_number","type":"string","required":true},{"name":"full_name","type":"string","required":true},{"name":"date_of_birth","type":"date","required":true},{"name":"expires_on","type":"date","required":true},{"name":"issuing_country","type":"string","required":true}]',
 'active', 'platform', '2026-11-24T00:00:00.000000Z');
