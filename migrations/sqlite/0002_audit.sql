-- Audit: tenant-registered event types, hash chains keyed by
-- (tenant_id, pool_index) with their heads, and the agent runtime.
-- The platform baseline of event types is a data file in the hub, not rows.

CREATE TABLE audit_event_type (
    tenant_id         TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    event_type        TEXT NOT NULL,
    retention_class   TEXT NOT NULL CHECK (retention_class IN ('transient', 'operational', 'regulated')),
    conflict_policy   TEXT NOT NULL CHECK (conflict_policy IN ('crdt', 'lww', 'merge', 'event-sourcing', 'human-review')),
    schema_state      TEXT NOT NULL,
    compaction_policy TEXT NOT NULL,
    schema_version    INTEGER NOT NULL,
    created_at        TEXT NOT NULL,
    PRIMARY KEY (tenant_id, event_type)
);

-- One row per chain; `seq` and `head_hash` are those of the chain's last
-- entry (0 and 32 zero bytes before the first).
CREATE TABLE audit_chain_head (
    tenant_id  TEXT NOT NULL,
    pool_index INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    head_hash  BLOB NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, pool_index)
);

CREATE TABLE audit_entry (
    entry_id        TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    pool_index      INTEGER NOT NULL,
    seq             INTEGER NOT NULL,
    event_type      TEXT NOT NULL,
    actor_kind      TEXT NOT NULL,
    actor_id        TEXT NOT NULL,
    actor_chain     TEXT,                -- JSON provenance (an agent run's chain)
    occurred_at     TEXT NOT NULL,
    retention_class TEXT NOT NULL,
    payload         TEXT,                -- JSON; NULL once shredded
    payload_digest  BLOB NOT NULL,       -- SHA-256 of the payload text, kept after shredding
    shredded_at     TEXT,
    prev_hash       BLOB NOT NULL,
    entry_hash      BLOB NOT NULL,
    UNIQUE (tenant_id, pool_index, seq)
);
CREATE INDEX audit_entry_occurred ON audit_entry (occurred_at);
CREATE INDEX audit_entry_tenant_occurred ON audit_entry (tenant_id, occurred_at);
-- Only unshredded rows: the sweeper never rescans what it has shredded.
CREATE INDEX audit_entry_retention ON audit_entry (retention_class, occurred_at) WHERE payload IS NOT NULL;

CREATE TABLE agent_definition (
    agent_id            TEXT PRIMARY KEY,
    tenant_id           TEXT REFERENCES tenant_tenant (tenant_id),
    name                TEXT NOT NULL,
    description         TEXT,
    acting_persona_id   TEXT NOT NULL REFERENCES persona_persona (persona_id),
    agent_scope         TEXT NOT NULL,   -- JSON array
    default_ttl_seconds INTEGER NOT NULL,
    tier                TEXT NOT NULL,
    kill_switch_flag_id TEXT,
    vector_namespace    TEXT NOT NULL,
    tool_manifest       TEXT NOT NULL,   -- JSON array of strings
    created_by          TEXT NOT NULL,
    status              TEXT NOT NULL,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL
);
CREATE INDEX agent_definition_tenant ON agent_definition (tenant_id, created_at);

CREATE TABLE agent_run (
    run_id         TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    agent_id       TEXT NOT NULL REFERENCES agent_definition (agent_id),
    persona_id     TEXT NOT NULL REFERENCES persona_persona (persona_id),
    trace_id       TEXT NOT NULL,
    parent_run_id  TEXT REFERENCES agent_run (run_id),
    ttl_seconds    INTEGER NOT NULL,
    ttl_deadline   TEXT NOT NULL,
    agent_chain    TEXT NOT NULL,        -- JSON array, root first, ending with this run
    actor_id       TEXT NOT NULL,
    actor_kind     TEXT NOT NULL,
    status         TEXT NOT NULL,
    audit_entry_id TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL
);
CREATE INDEX agent_run_tenant ON agent_run (tenant_id, created_at);
