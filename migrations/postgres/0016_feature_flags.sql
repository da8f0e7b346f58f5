-- sdk-feature-flags: flags with their kill switch, and their rollouts. A
-- flag belongs to a tenant, or (tenant_id NULL) to the platform, whose
-- flags every tenant evaluates after its own flag of the same key.
CREATE TABLE feature_flag (
    flag_id                 TEXT PRIMARY KEY,
    tenant_id               TEXT REFERENCES tenant_tenant (tenant_id),
    flag_key                TEXT NOT NULL,
    description             TEXT,
    default_value           TEXT NOT NULL,      -- JSON: no rollout matched
    off_value               TEXT NOT NULL,      -- JSON: the kill switch is engaged
    kill_switch_engaged     INTEGER NOT NULL CHECK (kill_switch_engaged IN (0, 1)),
    kill_switch_reason      TEXT,
    kill_switch_changed_at  TEXT,
    created_by              TEXT NOT NULL,
    created_at              TEXT NOT NULL,
    updated_at              TEXT NOT NULL
);
CREATE UNIQUE INDEX feature_flag_key ON feature_flag (COALESCE(tenant_id, ''), flag_key);

CREATE TABLE feature_flag_rollout (
    rollout_id   TEXT PRIMARY KEY,
    flag_id      TEXT NOT NULL REFERENCES feature_flag (flag_id),
    tenant_id    TEXT REFERENCES tenant_tenant (tenant_id),  -- the flag's
    priority     BIGINT NOT NULL,
    predicate    TEXT NOT NULL,                  -- JSON array of constraints
    percentage   BIGINT NOT NULL CHECK (percentage BETWEEN 0 AND 100),
    stickiness   TEXT NOT NULL,
    group_id     TEXT NOT NULL,
    value        TEXT NOT NULL,                  -- JSON
    active       INTEGER NOT NULL CHECK (active IN (0, 1)),
    created_by   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);
CREATE INDEX feature_flag_rollout_by_flag ON feature_flag_rollout (flag_id, priority);
CREATE INDEX feature_flag_rollout_by_tenant ON feature_flag_rollout (tenant_id, active);
