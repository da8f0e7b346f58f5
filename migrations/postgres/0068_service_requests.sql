-- sdk-service-request: queues (one name each in a tenant) and the requests
-- filed into them.
CREATE TABLE service_request_queue (
    queue_id     TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    name         TEXT NOT NULL,
    description  TEXT,
    priority     INTEGER NOT NULL,
    created_by   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    UNIQUE (tenant_id, name)
);
CREATE INDEX service_request_queue_by_created ON service_request_queue (tenant_id, created_at);

CREATE TABLE service_request (
    request_id   TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    queue_id     TEXT NOT NULL REFERENCES service_request_queue (queue_id),
    title        TEXT NOT NULL,
    description  TEXT,
    priority     INTEGER NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('open', 'closed')),
    contact_id   TEXT REFERENCES crm_contact (contact_id),
    resolution   TEXT,
    opened_by    TEXT NOT NULL,
    opened_at    TEXT NOT NULL,
    closed_at    TEXT
);
CREATE INDEX service_request_by_opened ON service_request (tenant_id, opened_at);
CREATE INDEX service_request_by_queue ON service_request (tenant_id, queue_id, opened_at);
CREATE INDEX service_request_by_status ON service_request (tenant_id, status, opened_at);
