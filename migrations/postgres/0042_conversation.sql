-- sdk-conversation: the tenant's suppression list (addresses never to be
-- written to on a channel; an email address kept in lower case) and its
-- quiet hours (one setting per tenant: local times in an IANA zone, and
-- the channels they cover), both read by the compose check.
CREATE TABLE conversation_suppression (
    suppression_id  TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    channel         TEXT NOT NULL,
    address         TEXT NOT NULL,
    reason          TEXT,
    created_by      TEXT NOT NULL,
    created_at      TEXT NOT NULL
);
CREATE UNIQUE INDEX conversation_suppression_address ON conversation_suppression (tenant_id, channel, address);
CREATE INDEX conversation_suppression_newest ON conversation_suppression (tenant_id, created_at, suppression_id);

CREATE TABLE conversation_quiet_hours (
    tenant_id   TEXT PRIMARY KEY REFERENCES tenant_tenant (tenant_id),
    timezone    TEXT NOT NULL,
    starts      TEXT NOT NULL,
    ends        TEXT NOT NULL,
    channels    TEXT NOT NULL,
    updated_by  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
