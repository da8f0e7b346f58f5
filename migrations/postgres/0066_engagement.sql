-- sdk-engagement: encounters, open -> closed -> sealed; closing stamps the
-- retention deadline from the policy's days.
CREATE TABLE engagement_encounter (
    encounter_id          TEXT PRIMARY KEY,
    tenant_id             TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    state                 TEXT NOT NULL CHECK (state IN ('open', 'closed', 'sealed')),
    kind                  TEXT NOT NULL,
    vault_key_ref         TEXT,
    retention_policy      TEXT NOT NULL CHECK (retention_policy IN ('operational', 'regulated', 'custom')),
    retention_days        INTEGER NOT NULL,
    retention_expires_at  TEXT,
    parent_encounter_id   TEXT REFERENCES engagement_encounter (encounter_id),
    address_id            TEXT REFERENCES geo_address (address_id),
    billing_ref           TEXT,
    contact_id            TEXT REFERENCES crm_contact (contact_id),
    opened_by             TEXT NOT NULL,
    opened_at             TEXT NOT NULL,
    closed_at             TEXT,
    sealed_at             TEXT,
    updated_at            TEXT NOT NULL
);
CREATE INDEX engagement_encounter_by_opened ON engagement_encounter (tenant_id, opened_at);
CREATE INDEX engagement_encounter_by_state ON engagement_encounter (tenant_id, state, opened_at);
CREATE INDEX engagement_encounter_by_contact ON engagement_encounter (tenant_id, contact_id, opened_at);
