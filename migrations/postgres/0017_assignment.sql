-- sdk-assignment: versioned rule sets, recorded routing decisions, the
-- round-robin cursors, personas' workloads, simulations, and assignment
-- records with the history of their offers. JSON documents are TEXT.
CREATE TABLE assignment_rule_set (
    rule_set_id   TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    name          TEXT NOT NULL,
    version       BIGINT NOT NULL,
    rules         TEXT NOT NULL,
    active        INTEGER NOT NULL CHECK (active IN (0, 1)),
    published_by  TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    activated_at  TEXT
);
CREATE UNIQUE INDEX assignment_rule_set_version ON assignment_rule_set (tenant_id, name, version);
-- One active version a name: a racing second activation fails here.
CREATE UNIQUE INDEX assignment_rule_set_active ON assignment_rule_set (tenant_id, name) WHERE active = 1;

CREATE TABLE assignment_decision (
    decision_id          TEXT PRIMARY KEY,
    tenant_id            TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    kind                 TEXT NOT NULL CHECK (kind IN ('route', 'task')),
    strategy             TEXT NOT NULL,
    outcome              TEXT NOT NULL CHECK (outcome IN ('ASSIGNED', 'FALLBACK', 'REVIEW', 'UNROUTABLE')),
    persona_id           TEXT,
    rule_set_name        TEXT,
    rule_version         BIGINT,
    matched_rule         TEXT,
    subject_ref          TEXT,
    subject              TEXT NOT NULL,
    task_id              TEXT,
    pool_key             TEXT,
    candidates           TEXT NOT NULL,
    persona_specialties  TEXT NOT NULL,
    evaluation           TEXT NOT NULL,
    created_by           TEXT NOT NULL,
    created_at           TEXT NOT NULL
);
CREATE INDEX assignment_decision_by_rule_set ON assignment_decision (tenant_id, rule_set_name, created_at);
CREATE INDEX assignment_decision_by_persona ON assignment_decision (tenant_id, persona_id, created_at);

CREATE TABLE assignment_rotation (
    tenant_id        TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    pool_key         TEXT NOT NULL,
    last_persona_id  TEXT,
    turns            BIGINT NOT NULL,
    updated_at       TEXT NOT NULL,
    PRIMARY KEY (tenant_id, pool_key)
);

CREATE TABLE assignment_workload (
    persona_id        TEXT PRIMARY KEY REFERENCES persona_persona (persona_id),
    tenant_id         TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    skills            TEXT NOT NULL,
    available_from    TEXT,
    available_to      TEXT,
    capacity_per_day  BIGINT,
    lat               DOUBLE PRECISION,
    lng               DOUBLE PRECISION,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL
);

CREATE TABLE assignment_simulation (
    simulation_id      TEXT PRIMARY KEY,
    tenant_id          TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    rule_set_name      TEXT NOT NULL,
    candidate_version  BIGINT NOT NULL,
    skew_tolerance     DOUBLE PRECISION NOT NULL,
    within_tolerance   INTEGER NOT NULL CHECK (within_tolerance IN (0, 1)),
    report             TEXT NOT NULL,
    created_by         TEXT NOT NULL,
    created_at         TEXT NOT NULL
);
CREATE INDEX assignment_simulation_newest ON assignment_simulation (tenant_id, created_at);

-- state: offered | reassigned (pending with current_persona_id, or with
-- both primary and backup when stage is 'simultaneous') | accepted |
-- declined | expired. revision guards every transition (compare and set).
CREATE TABLE assignment_record (
    record_id                  TEXT PRIMARY KEY,
    tenant_id                  TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    subject_ref                TEXT NOT NULL,
    state                      TEXT NOT NULL CHECK (state IN ('offered', 'reassigned', 'accepted', 'declined', 'expired')),
    stage                      TEXT NOT NULL CHECK (stage IN ('primary', 'backup', 'simultaneous', 'reassigned')),
    primary_persona_id         TEXT NOT NULL,
    backup_persona_id          TEXT,
    manager_persona_id         TEXT,
    current_persona_id         TEXT,
    acceptance_window_minutes  BIGINT NOT NULL,
    offer_expires_at           TEXT,
    routing_decision_id        TEXT REFERENCES assignment_decision (decision_id),
    metadata                   TEXT NOT NULL,
    source_timestamp           TEXT,
    revision                   BIGINT NOT NULL,
    created_by                 TEXT NOT NULL,
    created_at                 TEXT NOT NULL,
    updated_at                 TEXT NOT NULL
);
CREATE INDEX assignment_record_due ON assignment_record (tenant_id, state, offer_expires_at);

CREATE TABLE assignment_history (
    record_id   TEXT NOT NULL REFERENCES assignment_record (record_id),
    seq         BIGINT NOT NULL,
    tenant_id   TEXT NOT NULL,
    event       TEXT NOT NULL,
    from_state  TEXT,
    to_state    TEXT NOT NULL,
    persona_id  TEXT,
    actor       TEXT NOT NULL,
    reason      TEXT,
    at          TEXT NOT NULL,
    PRIMARY KEY (record_id, seq)
);
