-- sdk-approval: routes of ordered approval steps, requests that walk them,
-- and each step's decision. The operator routes (breaches, override, the
-- route list) read the same tables.
CREATE TABLE approval_route (
    route_id     TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    name         TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('active', 'retired')),
    steps        TEXT NOT NULL,             -- JSON: [{ name, approver_persona_id, sla_minutes }]
    sla_minutes  INTEGER NOT NULL,          -- the largest of the steps', 0 when none
    created_by   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    UNIQUE (tenant_id, name)
);
CREATE INDEX approval_route_by_created ON approval_route (created_at);

CREATE TABLE approval_request (
    request_id    TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    route_id      TEXT NOT NULL REFERENCES approval_route (route_id),
    subject_kind  TEXT NOT NULL,
    subject_id    TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
    reason        TEXT,
    requested_by  TEXT NOT NULL,
    requested_at  TEXT NOT NULL,
    resolved_at   TEXT
);
CREATE INDEX approval_request_inbox ON approval_request (tenant_id, status, requested_at);
CREATE INDEX approval_request_pending ON approval_request (status, requested_at);

CREATE TABLE approval_step (
    step_id              TEXT PRIMARY KEY,
    request_id           TEXT NOT NULL REFERENCES approval_request (request_id),
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
CREATE INDEX approval_step_by_approver ON approval_step (tenant_id, approver_persona_id, status);
