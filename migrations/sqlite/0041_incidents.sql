-- sdk-incident: incidents opened with a severity and an optional owning
-- persona of the tenant, worked from open to resolved.
CREATE TABLE incident_incident (
    incident_id       TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    title             TEXT NOT NULL,
    description       TEXT,
    severity          TEXT NOT NULL,
    status            TEXT NOT NULL,
    owner_persona_id  TEXT,
    status_note       TEXT,
    created_by        TEXT NOT NULL,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL,
    resolved_at       TEXT
);
CREATE INDEX incident_incident_recent ON incident_incident (tenant_id, updated_at, incident_id);
CREATE INDEX incident_incident_by_status ON incident_incident (tenant_id, status, updated_at, incident_id);
CREATE INDEX incident_incident_by_severity ON incident_incident (tenant_id, severity, updated_at, incident_id);
CREATE INDEX incident_incident_by_owner ON incident_incident (tenant_id, owner_persona_id, updated_at, incident_id);
