-- sdk-webhook. Endpoints with their subscriptions and signing secrets
-- (sealed under the master key); the outbox of subscribed events, written
-- by the audit writer in the event's transaction; deliveries and their
-- attempts;
-- per-tenant inbound secrets and the inbound message ids already seen.
CREATE TABLE webhook_endpoint (
    endpoint_id              TEXT PRIMARY KEY,
    tenant_id                TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    url                      TEXT NOT NULL,
    description              TEXT,
    event_types              TEXT NOT NULL,          -- JSON array, as given
    status                   TEXT NOT NULL CHECK (status IN ('active', 'disabled')),
    disabled_reason          TEXT,
    secret_sealed            BYTEA NOT NULL,
    previous_secret_sealed   BYTEA,
    previous_secret_until    TEXT,
    failure_streak           BIGINT NOT NULL,
    failing_since            TEXT,
    last_success_at          TEXT,
    last_failure_at          TEXT,
    created_by               TEXT NOT NULL,
    created_at               TEXT NOT NULL,
    updated_at               TEXT NOT NULL
);
CREATE INDEX webhook_endpoint_by_tenant ON webhook_endpoint (tenant_id, created_at);

-- One row a pattern: an event type, or a tail wildcard ('crm.*', '*')
-- kept as the prefix it matches.
CREATE TABLE webhook_subscription (
    endpoint_id  TEXT NOT NULL REFERENCES webhook_endpoint (endpoint_id) ON DELETE CASCADE,
    tenant_id    TEXT NOT NULL,
    pattern      TEXT NOT NULL,
    exact        INTEGER NOT NULL CHECK (exact IN (0, 1)),
    prefix       TEXT NOT NULL,
    PRIMARY KEY (endpoint_id, pattern)
);
CREATE INDEX webhook_subscription_by_tenant ON webhook_subscription (tenant_id);

-- The outbox: an event some active endpoint of its tenant subscribes to,
-- written by the audit writer in the event's transaction; the worker fans
-- it out into one delivery per subscribed endpoint and removes it.
-- No foreign key: the write it rides on pays for as little as can be.
CREATE TABLE webhook_outbox (
    entry_id    TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL,
    created_at  TEXT NOT NULL
);

-- status: pending (attempts to come, from next_attempt_at), succeeded, dead.
-- A worker leases a pending delivery until leased_until.
CREATE TABLE webhook_delivery (
    delivery_id       TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL,
    endpoint_id       TEXT NOT NULL REFERENCES webhook_endpoint (endpoint_id) ON DELETE CASCADE,
    entry_id          TEXT NOT NULL REFERENCES audit_entry (entry_id),
    event_type        TEXT NOT NULL,
    status            TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'dead')),
    attempts          BIGINT NOT NULL,
    next_attempt_at   TEXT NOT NULL,
    leased_until      TEXT,
    last_status_code  BIGINT,
    last_error        TEXT,
    created_at        TEXT NOT NULL,
    finished_at       TEXT,
    UNIQUE (endpoint_id, entry_id)
);
CREATE INDEX webhook_delivery_due ON webhook_delivery (status, next_attempt_at);
CREATE INDEX webhook_delivery_by_tenant ON webhook_delivery (tenant_id, status, finished_at);

CREATE TABLE webhook_attempt (
    delivery_id   TEXT NOT NULL REFERENCES webhook_delivery (delivery_id) ON DELETE CASCADE,
    attempt       BIGINT NOT NULL,
    tenant_id     TEXT NOT NULL,
    started_at    TEXT NOT NULL,
    duration_ms   BIGINT NOT NULL,
    status_code   BIGINT,
    error         TEXT,
    response      TEXT,                                -- the first KiB of the answer
    PRIMARY KEY (delivery_id, attempt)
);

CREATE TABLE webhook_inbound_secret (
    tenant_id      TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    kind           TEXT NOT NULL,
    provider       TEXT NOT NULL,
    secret_sealed  BYTEA NOT NULL,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    PRIMARY KEY (tenant_id, kind, provider)
);

CREATE TABLE webhook_inbound_seen (
    tenant_id    TEXT NOT NULL,
    kind         TEXT NOT NULL,
    provider     TEXT NOT NULL,
    webhook_id   TEXT NOT NULL,
    received_at  TEXT NOT NULL,
    PRIMARY KEY (tenant_id, kind, provider, webhook_id)
);
CREATE INDEX webhook_inbound_seen_age ON webhook_inbound_seen (received_at);
