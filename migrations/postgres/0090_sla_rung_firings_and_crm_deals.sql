-- sdk-sla: a rung fired for a clock, recorded once per (clock, rung) by
-- the background sweep, whichever replica gets there first (the primary
-- key decides); kept when the rung is removed later, as the history of
-- what was notified. The sweep reads the running clocks by deadline.
CREATE TABLE sla_rung_firing (
    clock_id           TEXT NOT NULL REFERENCES sla_clock (clock_id),
    rung_id            TEXT NOT NULL,
    tenant_id          TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    offset_minutes     INTEGER NOT NULL,
    severity           TEXT NOT NULL CHECK (severity IN ('low', 'medium', 'high', 'critical')),
    notify_persona_id  TEXT,
    fires_at           TEXT NOT NULL,
    fired_at           TEXT NOT NULL,
    PRIMARY KEY (clock_id, rung_id)
);
CREATE INDEX sla_clock_running_by_due ON sla_clock (due_at) WHERE state = 'running';

-- sdk-crm: deals, about a contact of the tenant, a company or both, with
-- an amount in its currency's minor units (with its ISO 4217 code, or
-- neither), open until won or lost (final).
CREATE TABLE crm_deal (
    deal_id           TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    name              TEXT NOT NULL,
    contact_id        TEXT REFERENCES crm_contact (contact_id),
    company           TEXT,
    amount_minor      BIGINT,
    currency          TEXT,
    stage             TEXT NOT NULL CHECK (stage IN ('open', 'won', 'lost')),
    owner_persona_id  TEXT,
    stage_reason      TEXT,
    closed_at         TEXT,
    created_by        TEXT NOT NULL,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL
);
CREATE INDEX crm_deal_newest ON crm_deal (tenant_id, created_at, deal_id);
CREATE INDEX crm_deal_by_stage ON crm_deal (tenant_id, stage, created_at);
CREATE INDEX crm_deal_by_owner ON crm_deal (tenant_id, owner_persona_id, created_at);
CREATE INDEX crm_deal_by_contact ON crm_deal (tenant_id, contact_id, created_at);
