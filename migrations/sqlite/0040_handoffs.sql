-- sdk-handoff: deals handed from one persona of the tenant to another,
-- pending until accepted or declined; an accepted one is completed.
CREATE TABLE handoff_handoff (
    handoff_id       TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    deal_id          TEXT NOT NULL,
    from_persona_id  TEXT NOT NULL,
    to_persona_id    TEXT NOT NULL,
    notes            TEXT,
    status           TEXT NOT NULL,
    status_reason    TEXT,
    created_by       TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
);
CREATE INDEX handoff_handoff_recent ON handoff_handoff (tenant_id, updated_at, handoff_id);
CREATE INDEX handoff_handoff_by_status ON handoff_handoff (tenant_id, status, updated_at, handoff_id);
CREATE INDEX handoff_handoff_by_deal ON handoff_handoff (tenant_id, deal_id, updated_at, handoff_id);
