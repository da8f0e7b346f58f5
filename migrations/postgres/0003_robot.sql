-- Robot command path: assets and their digital twin, per-robot credentials,
-- sensor readings, and commands with approval and acknowledgement.
-- Ids are UUID text, times RFC 3339 UTC text, JSON text, booleans 0/1.

CREATE TABLE asset_asset (
    asset_id        TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    bu_id           TEXT,
    display_name    TEXT NOT NULL,
    model           TEXT,
    device_uuid     TEXT,
    components      TEXT NOT NULL,       -- JSON array
    desired_state   TEXT NOT NULL,       -- JSON object
    desired_at      TEXT NOT NULL,
    reported_state  TEXT NOT NULL,       -- JSON object, the agent's latest report
    reported_at     TEXT,
    queue_seq       BIGINT NOT NULL DEFAULT 0,  -- last stream position handed out
    created_at      TEXT NOT NULL
);
CREATE INDEX asset_asset_tenant ON asset_asset (tenant_id);

CREATE TABLE asset_credential (
    credential_id  TEXT PRIMARY KEY,
    asset_id       TEXT NOT NULL REFERENCES asset_asset (asset_id),
    tenant_id      TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    secret_hash    TEXT NOT NULL UNIQUE,  -- SHA-256 hex of the secret
    last4          TEXT NOT NULL,
    rate_limit_rpm BIGINT,
    expires_at     TEXT,
    status         TEXT NOT NULL,
    created_at     TEXT NOT NULL
);
CREATE INDEX asset_credential_asset ON asset_credential (asset_id);

CREATE TABLE asset_reading (
    reading_id  TEXT PRIMARY KEY,
    asset_id    TEXT NOT NULL REFERENCES asset_asset (asset_id),
    sensor_id   TEXT NOT NULL,
    value       DOUBLE PRECISION NOT NULL,
    recorded_at TEXT NOT NULL,
    received_at TEXT NOT NULL
);
CREATE INDEX asset_reading_asset_time ON asset_reading (asset_id, recorded_at);

CREATE TABLE command_command (
    command_id          TEXT PRIMARY KEY,
    tenant_id           TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    target_asset_id     TEXT NOT NULL REFERENCES asset_asset (asset_id),
    target_component_id TEXT,
    type                TEXT NOT NULL,
    params              TEXT NOT NULL,      -- JSON object
    risk_class          TEXT NOT NULL CHECK (risk_class IN ('low', 'medium', 'high', 'critical')),
    status              TEXT NOT NULL CHECK (status IN ('awaiting_approval', 'queued', 'delivered',
                            'acknowledged_ok', 'acknowledged_failed', 'rejected', 'expired')),
    seq                 BIGINT,             -- stream position, set when queued
    ttl_seconds         BIGINT NOT NULL,
    expires_at          TEXT NOT NULL,
    created_by          TEXT NOT NULL,      -- persona_id
    actor_kind          TEXT NOT NULL,
    decided_by          TEXT,
    decision_approved   BIGINT,
    decision_reason     TEXT,
    decided_at          TEXT,
    queued_at           TEXT,
    delivered_at        TEXT,
    ack_ok              BIGINT,
    ack_code            TEXT,
    ack_message         TEXT,
    ack_data            TEXT,               -- JSON
    acked_at            TEXT,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    UNIQUE (target_asset_id, seq)
);
CREATE INDEX command_command_asset_created ON command_command (target_asset_id, created_at);
CREATE INDEX command_command_status_expiry ON command_command (status, expires_at);
