-- Lifecycle routes of sdk-secrets, sdk-consent, sdk-data-rights and
-- sdk-approval (issue 37).
--
-- sdk-secrets: when a reference's next rotation is due, kept by every
-- write of the reference, so the registry lists the references due. The
-- stored form keeps the microseconds and `Z` of `last_rotated_at`.
ALTER TABLE secrets_reference ADD COLUMN next_rotation_at TEXT;
UPDATE secrets_reference
    SET next_rotation_at = strftime('%Y-%m-%dT%H:%M:%S', last_rotated_at, '+' || rotation_period_days || ' days') || substr(last_rotated_at, 20)
    WHERE rotation_period_days IS NOT NULL;
CREATE INDEX secrets_reference_due ON secrets_reference (tenant_id, next_rotation_at);

-- sdk-consent: a purpose is retired (no longer offered: no new grant;
-- its records stay and withdrawals are still taken).
ALTER TABLE consent_purpose ADD COLUMN status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'retired'));
ALTER TABLE consent_purpose ADD COLUMN retired_at TEXT;

-- sdk-data-rights: the subject withdraws a request (`cancelled`). SQLite
-- cannot change a CHECK constraint: the request table is rebuilt, and its
-- executions' table with it, so that no row ever references a dropped
-- table (foreign keys stay enforced throughout). The rebuilt executions
-- reference `data_rights_request_new`, which the rename of that table
-- rewrites to `data_rights_request`.
CREATE TABLE data_rights_request_new (
    request_id   TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    subject      TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('access', 'erasure', 'rectification', 'portability', 'restriction', 'objection')),
    status       TEXT NOT NULL CHECK (status IN ('received', 'in_progress', 'completed', 'failed', 'cancelled')),
    details      TEXT NOT NULL,
    due_at       TEXT NOT NULL,
    created_by   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);
INSERT INTO data_rights_request_new (request_id, tenant_id, subject, kind, status, details, due_at, created_by, created_at, updated_at)
    SELECT request_id, tenant_id, subject, kind, status, details, due_at, created_by, created_at, updated_at FROM data_rights_request;
CREATE TABLE data_rights_execution_new (
    execution_id    TEXT PRIMARY KEY,
    request_id      TEXT NOT NULL REFERENCES data_rights_request_new (request_id),
    tenant_id       TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('running', 'succeeded', 'failed')),
    executor        TEXT NOT NULL,
    audit_entry_id  TEXT,
    error_detail    TEXT,
    started_at      TEXT NOT NULL,
    finished_at     TEXT
);
INSERT INTO data_rights_execution_new (execution_id, request_id, tenant_id, status, executor, audit_entry_id, error_detail, started_at, finished_at)
    SELECT execution_id, request_id, tenant_id, status, executor, audit_entry_id, error_detail, started_at, finished_at FROM data_rights_execution;
DROP TABLE data_rights_execution;
DROP TABLE data_rights_request;
ALTER TABLE data_rights_request_new RENAME TO data_rights_request;
ALTER TABLE data_rights_execution_new RENAME TO data_rights_execution;
CREATE INDEX data_rights_request_by_tenant ON data_rights_request (tenant_id, created_at);
CREATE INDEX data_rights_execution_by_request ON data_rights_execution (request_id, started_at);

-- sdk-approval: the requester withdraws a pending request (`cancelled`).
-- Rebuilt as above, with its steps.
CREATE TABLE approval_request_new (
    request_id    TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    route_id      TEXT NOT NULL REFERENCES approval_route (route_id),
    subject_kind  TEXT NOT NULL,
    subject_id    TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'cancelled')),
    reason        TEXT,
    requested_by  TEXT NOT NULL,
    requested_at  TEXT NOT NULL,
    resolved_at   TEXT
);
INSERT INTO approval_request_new (request_id, tenant_id, route_id, subject_kind, subject_id, status, reason, requested_by, requested_at, resolved_at)
    SELECT request_id, tenant_id, route_id, subject_kind, subject_id, status, reason, requested_by, requested_at, resolved_at FROM approval_request;
CREATE TABLE approval_step_new (
    step_id              TEXT PRIMARY KEY,
    request_id           TEXT NOT NULL REFERENCES approval_request_new (request_id),
    tenant_id            TEXT NOT NULL,
    seq                  INTEGER NOT NULL,
    name                 TEXT NOT NULL,
    approver_persona_id  TEXT NOT NULL,
    sla_minutes          INTEGER,
    status               TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'skipped')),
    comment              TEXT,
    decided_by           TEXT,
    decided_at           TEXT,
    UNIQUE (request_id, seq)
);
INSERT INTO approval_step_new (step_id, request_id, tenant_id, seq, name, approver_persona_id, sla_minutes, status, comment, decided_by, decided_at)
    SELECT step_id, request_id, tenant_id, seq, name, approver_persona_id, sla_minutes, status, comment, decided_by, decided_at FROM approval_step;
DROP TABLE approval_step;
DROP TABLE approval_request;
ALTER TABLE approval_request_new RENAME TO approval_request;
ALTER TABLE approval_step_new RENAME TO approval_step;
CREATE INDEX approval_request_inbox ON approval_request (tenant_id, status, requested_at);
CREATE INDEX approval_request_pending ON approval_request (status, requested_at);
CREATE INDEX approval_step_by_approver ON approval_step (tenant_id, approver_persona_id, status);
