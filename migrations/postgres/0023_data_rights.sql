-- sdk-data-rights: data subject requests (GDPR Art. 15-22) and the
-- executions that carry them out, each ending in one terminal outcome.
CREATE TABLE data_rights_request (
    request_id   TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    subject      TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('access', 'erasure', 'rectification', 'portability', 'restriction', 'objection')),
    status       TEXT NOT NULL CHECK (status IN ('received', 'in_progress', 'completed', 'failed')),
    details      TEXT NOT NULL,
    due_at       TEXT NOT NULL,
    created_by   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);
CREATE INDEX data_rights_request_by_tenant ON data_rights_request (tenant_id, created_at);

CREATE TABLE data_rights_execution (
    execution_id    TEXT PRIMARY KEY,
    request_id      TEXT NOT NULL REFERENCES data_rights_request (request_id),
    tenant_id       TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('running', 'succeeded', 'failed')),
    executor        TEXT NOT NULL,
    audit_entry_id  TEXT,
    error_detail    TEXT,
    started_at      TEXT NOT NULL,
    finished_at     TEXT
);
CREATE INDEX data_rights_execution_by_request ON data_rights_execution (request_id, started_at);
