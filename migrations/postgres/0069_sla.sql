-- sdk-sla: policies (a target in minutes), their escalation rungs (an
-- offset from the deadline each) and clocks; the at-risk list reads the
-- running clocks of a tenant by deadline.
CREATE TABLE sla_policy (
    policy_id       TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    name            TEXT NOT NULL,
    description     TEXT,
    target_minutes  INTEGER NOT NULL,
    created_by      TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    UNIQUE (tenant_id, name)
);

CREATE TABLE sla_rung (
    rung_id            TEXT PRIMARY KEY,
    tenant_id          TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    policy_id          TEXT NOT NULL REFERENCES sla_policy (policy_id),
    offset_minutes     INTEGER NOT NULL,
    severity           TEXT NOT NULL CHECK (severity IN ('low', 'medium', 'high', 'critical')),
    notify_persona_id  TEXT,
    created_at         TEXT NOT NULL,
    UNIQUE (policy_id, offset_minutes)
);
CREATE INDEX sla_rung_by_policy ON sla_rung (tenant_id, policy_id, offset_minutes);

CREATE TABLE sla_clock (
    clock_id     TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    policy_id    TEXT NOT NULL REFERENCES sla_policy (policy_id),
    subject_ref  TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('running', 'stopped')),
    started_at   TEXT NOT NULL,
    due_at       TEXT NOT NULL,
    stopped_at   TEXT,
    breached     INTEGER NOT NULL,   -- 0/1
    created_by   TEXT NOT NULL
);
CREATE INDEX sla_clock_by_due ON sla_clock (tenant_id, state, due_at);
CREATE INDEX sla_clock_by_policy_due ON sla_clock (tenant_id, policy_id, state, due_at);
