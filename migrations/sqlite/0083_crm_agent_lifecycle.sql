-- Lifecycle routes of sdk-social, sdk-sla, sdk-service-request and
-- sdk-source-record (issue 37).
--
-- sdk-social: a handle is revoked (de-authorised), kept with who revoked
-- it and when; authorising the same handle again reuses its row. SQLite
-- cannot change a CHECK constraint: the table is rebuilt with `revoked`
-- among its states (nothing references it).
CREATE TABLE social_handle_new (
    handle_id              TEXT PRIMARY KEY,
    tenant_id              TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    network                TEXT NOT NULL,
    external_handle_id     TEXT NOT NULL,
    display_name           TEXT,
    authorized_persona_id  TEXT NOT NULL,
    status                 TEXT NOT NULL CHECK (status IN ('authorised', 'revoked')),
    authorized_by          TEXT NOT NULL,
    authorized_at          TEXT NOT NULL,
    revoked_by             TEXT,
    revoked_at             TEXT,
    UNIQUE (tenant_id, network, external_handle_id)
);
INSERT INTO social_handle_new (handle_id, tenant_id, network, external_handle_id, display_name, authorized_persona_id, status, authorized_by, authorized_at)
    SELECT handle_id, tenant_id, network, external_handle_id, display_name, authorized_persona_id, status, authorized_by, authorized_at FROM social_handle;
DROP TABLE social_handle;
ALTER TABLE social_handle_new RENAME TO social_handle;
CREATE INDEX social_handle_by_authorized ON social_handle (tenant_id, authorized_at);

-- sdk-sla: the tenant's clocks, most recently started first, and a
-- subject's clocks.
CREATE INDEX sla_clock_newest ON sla_clock (tenant_id, started_at, clock_id);
CREATE INDEX sla_clock_by_subject ON sla_clock (tenant_id, subject_ref, started_at);

-- sdk-service-request: a contact's requests.
CREATE INDEX service_request_by_contact ON service_request (tenant_id, contact_id, opened_at);

-- sdk-source-record: the tenant's claims, most recently recorded first.
CREATE INDEX source_claim_newest ON source_claim (tenant_id, recorded_at, claim_id);
