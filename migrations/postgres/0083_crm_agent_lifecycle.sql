-- Lifecycle routes of sdk-social, sdk-sla, sdk-service-request and
-- sdk-source-record (issue 37).
--
-- sdk-social: a handle is revoked (de-authorised), kept with who revoked
-- it and when; authorising the same handle again reuses its row.
ALTER TABLE social_handle DROP CONSTRAINT social_handle_status_check;
ALTER TABLE social_handle ADD CONSTRAINT social_handle_status_check CHECK (status IN ('authorised', 'revoked'));
ALTER TABLE social_handle ADD COLUMN revoked_by TEXT;
ALTER TABLE social_handle ADD COLUMN revoked_at TEXT;

-- sdk-sla: the tenant's clocks, most recently started first, and a
-- subject's clocks.
CREATE INDEX sla_clock_newest ON sla_clock (tenant_id, started_at, clock_id);
CREATE INDEX sla_clock_by_subject ON sla_clock (tenant_id, subject_ref, started_at);

-- sdk-service-request: a contact's requests.
CREATE INDEX service_request_by_contact ON service_request (tenant_id, contact_id, opened_at);

-- sdk-source-record: the tenant's claims, most recently recorded first.
CREATE INDEX source_claim_newest ON source_claim (tenant_id, recorded_at, claim_id);
