-- sdk-consent: the tenant's purpose catalogue, and every grant and
-- withdrawal per subject, append-only (a row is never updated or deleted;
-- the latest decides).
CREATE TABLE consent_purpose (
    tenant_id              TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    purpose_id             TEXT NOT NULL,
    app_id                 TEXT NOT NULL,
    description            TEXT NOT NULL,
    legal_basis            TEXT NOT NULL,
    default_jurisdictions  TEXT NOT NULL,
    created_by             TEXT NOT NULL,
    created_at             TEXT NOT NULL,
    PRIMARY KEY (tenant_id, purpose_id)
);

CREATE TABLE consent_record (
    record_id     TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL,
    subject       TEXT NOT NULL,
    purpose_id    TEXT NOT NULL,
    action        TEXT NOT NULL CHECK (action IN ('granted', 'withdrawn')),
    jurisdiction  TEXT,
    evidence      TEXT NOT NULL,
    recorded_by   TEXT NOT NULL,
    recorded_at   TEXT NOT NULL,
    FOREIGN KEY (tenant_id, purpose_id) REFERENCES consent_purpose (tenant_id, purpose_id)
);
CREATE INDEX consent_record_by_subject ON consent_record (tenant_id, subject, recorded_at);
