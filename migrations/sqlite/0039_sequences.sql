-- sdk-sequence: message templates (one name per tenant) and sequences
-- (one name per tenant) whose steps, kept in order as JSON, each name a
-- template of the tenant (checked on write; templates are never deleted).
CREATE TABLE sequence_template (
    template_id  TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    name         TEXT NOT NULL,
    channel      TEXT NOT NULL,
    subject      TEXT,
    body         TEXT NOT NULL,
    created_by   TEXT NOT NULL,
    created_at   TEXT NOT NULL
);
CREATE UNIQUE INDEX sequence_template_name ON sequence_template (tenant_id, name);
CREATE INDEX sequence_template_newest ON sequence_template (tenant_id, created_at, template_id);
CREATE INDEX sequence_template_by_channel ON sequence_template (tenant_id, channel, created_at, template_id);

CREATE TABLE sequence_sequence (
    sequence_id  TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    name         TEXT NOT NULL,
    steps        TEXT NOT NULL,
    created_by   TEXT NOT NULL,
    created_at   TEXT NOT NULL
);
CREATE UNIQUE INDEX sequence_sequence_name ON sequence_sequence (tenant_id, name);
CREATE INDEX sequence_sequence_newest ON sequence_sequence (tenant_id, created_at, sequence_id);
