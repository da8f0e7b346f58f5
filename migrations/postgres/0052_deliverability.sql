-- sdk-deliverability: bounces and complaints a provider reported through
-- the signed inbound webhook of kind `email`, classified `hard`, `soft` or
-- `complaint`; a hard bounce or a complaint also lands on the tenant's
-- suppression list (conversation_suppression).
CREATE TABLE deliverability_event (
    event_id        TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    provider        TEXT NOT NULL,
    classification  TEXT NOT NULL,
    email           TEXT NOT NULL,
    message_id      TEXT,
    suppression_id  TEXT,
    occurred_at     TEXT NOT NULL,
    received_at     TEXT NOT NULL
);
CREATE INDEX deliverability_event_newest ON deliverability_event (tenant_id, occurred_at, event_id);
CREATE INDEX deliverability_event_classification ON deliverability_event (tenant_id, classification, occurred_at, event_id);
