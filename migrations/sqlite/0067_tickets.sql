-- sdk-event: events, tickets (only the SHA-256 of each qr_token is kept)
-- and check-ins; the UNIQUE ticket_id of a check-in blocks a second one.
CREATE TABLE event_event (
    event_id    TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    name        TEXT NOT NULL,
    venue       TEXT,
    starts_at   TEXT NOT NULL,
    ends_at     TEXT,
    capacity    INTEGER,
    created_by  TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE INDEX event_event_by_starts ON event_event (tenant_id, starts_at);

CREATE TABLE event_ticket (
    ticket_id      TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    event_id       TEXT NOT NULL REFERENCES event_event (event_id),
    qr_hash        TEXT NOT NULL,
    holder_name    TEXT,
    contact_id     TEXT REFERENCES crm_contact (contact_id),
    status         TEXT NOT NULL CHECK (status IN ('issued', 'used', 'voided')),
    issued_by      TEXT NOT NULL,
    issued_at      TEXT NOT NULL,
    checked_in_at  TEXT,
    voided_at      TEXT,
    UNIQUE (tenant_id, qr_hash)
);
CREATE INDEX event_ticket_by_issued ON event_ticket (tenant_id, issued_at);
CREATE INDEX event_ticket_by_event ON event_ticket (tenant_id, event_id, issued_at);
CREATE INDEX event_ticket_by_status ON event_ticket (tenant_id, status, issued_at);

CREATE TABLE event_checkin (
    checkin_id                TEXT PRIMARY KEY,
    tenant_id                 TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    ticket_id                 TEXT NOT NULL UNIQUE REFERENCES event_ticket (ticket_id),
    event_id                  TEXT NOT NULL REFERENCES event_event (event_id),
    checked_in_by_persona_id  TEXT NOT NULL,
    device_uuid               TEXT,
    checked_in_at             TEXT NOT NULL
);
CREATE INDEX event_checkin_by_event ON event_checkin (tenant_id, event_id, checked_in_at);
