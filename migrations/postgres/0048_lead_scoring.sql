-- sdk-lead-scoring: scoring models numbered per (tenant, vertical); at most
-- one active per (tenant, vertical), which the unique partial index keeps.
CREATE TABLE lead_scoring_model (
    model_id      TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    vertical      TEXT NOT NULL,
    name          TEXT NOT NULL,
    version       INTEGER NOT NULL,
    weights       TEXT NOT NULL,          -- JSON object: signal -> number
    threshold     INTEGER NOT NULL,
    active        INTEGER NOT NULL,       -- 0/1
    activated_at  TEXT,
    created_by    TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    UNIQUE (tenant_id, vertical, version)
);
CREATE UNIQUE INDEX lead_scoring_model_one_active ON lead_scoring_model (tenant_id, vertical) WHERE active = 1;
