-- sdk-crm: contacts (their emails unique in the tenant), leads (linked to
-- a contact or not) and logged calls; a contact's timeline reads all three.
CREATE TABLE crm_contact (
    contact_id        TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    name              TEXT NOT NULL,
    emails            TEXT NOT NULL,        -- JSON array of lowercased addresses
    phones            TEXT NOT NULL,        -- JSON array of E.164 numbers
    company           TEXT,
    owner_persona_id  TEXT,
    attributes        TEXT NOT NULL,        -- JSON object
    created_by        TEXT NOT NULL,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL
);
CREATE INDEX crm_contact_by_created ON crm_contact (tenant_id, created_at);
CREATE INDEX crm_contact_by_owner ON crm_contact (tenant_id, owner_persona_id, created_at);
CREATE INDEX crm_contact_by_company ON crm_contact (tenant_id, company, created_at);

-- One row per address of a contact: an address names one contact of a tenant.
CREATE TABLE crm_contact_email (
    tenant_id   TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    email       TEXT NOT NULL,
    contact_id  TEXT NOT NULL REFERENCES crm_contact (contact_id),
    PRIMARY KEY (tenant_id, email)
);

CREATE TABLE crm_lead (
    lead_id           TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    contact_id        TEXT REFERENCES crm_contact (contact_id),
    name              TEXT NOT NULL,
    company           TEXT,
    source            TEXT,
    status            TEXT NOT NULL CHECK (status IN ('new', 'contacted', 'qualified', 'unqualified')),
    owner_persona_id  TEXT,
    attributes        TEXT NOT NULL,        -- JSON object
    created_by        TEXT NOT NULL,
    created_at        TEXT NOT NULL
);
CREATE INDEX crm_lead_by_contact ON crm_lead (tenant_id, contact_id, created_at);
CREATE INDEX crm_lead_by_created ON crm_lead (tenant_id, created_at);

CREATE TABLE crm_call (
    call_id            TEXT PRIMARY KEY,
    tenant_id          TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    contact_id         TEXT REFERENCES crm_contact (contact_id),
    lead_id            TEXT REFERENCES crm_lead (lead_id),
    direction          TEXT NOT NULL CHECK (direction IN ('inbound', 'outbound')),
    disposition        TEXT NOT NULL CHECK (disposition IN ('answered', 'no_answer', 'busy', 'failed', 'voicemail')),
    duration_seconds   INTEGER NOT NULL,
    phone_number       TEXT,
    recording_url      TEXT,
    recording_consent  INTEGER NOT NULL,    -- 0/1
    provider_call_id   TEXT,
    occurred_at        TEXT NOT NULL,
    logged_by          TEXT NOT NULL,
    created_at         TEXT NOT NULL,
    UNIQUE (tenant_id, provider_call_id)
);
CREATE INDEX crm_call_by_contact ON crm_call (tenant_id, contact_id, occurred_at);
CREATE INDEX crm_call_by_lead ON crm_call (tenant_id, lead_id, occurred_at);
