-- Lifecycle routes of the platform groups (issue 37).
--
-- sdk-asset: an asset is retired (decommissioned), never removed: its
-- robot credentials are revoked and it takes no new command.
ALTER TABLE asset_asset ADD COLUMN status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'retired'));
ALTER TABLE asset_asset ADD COLUMN retired_at TEXT;
CREATE INDEX asset_asset_newest ON asset_asset (tenant_id, created_at, asset_id);

-- sdk-command: a command waiting for approval or delivery can be
-- cancelled. SQLite cannot change a CHECK constraint: the table is rebuilt
-- with `cancelled` among its states (nothing references it).
CREATE TABLE command_command_new (
    command_id          TEXT PRIMARY KEY,
    tenant_id           TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    target_asset_id     TEXT NOT NULL REFERENCES asset_asset (asset_id),
    target_component_id TEXT,
    type                TEXT NOT NULL,
    params              TEXT NOT NULL,      -- JSON object
    risk_class          TEXT NOT NULL CHECK (risk_class IN ('low', 'medium', 'high', 'critical')),
    status              TEXT NOT NULL CHECK (status IN ('awaiting_approval', 'queued', 'delivered',
                            'acknowledged_ok', 'acknowledged_failed', 'rejected', 'expired', 'cancelled')),
    seq                 INTEGER,             -- stream position, set when queued
    ttl_seconds         INTEGER NOT NULL,
    expires_at          TEXT NOT NULL,
    created_by          TEXT NOT NULL,      -- persona_id
    actor_kind          TEXT NOT NULL,
    decided_by          TEXT,
    decision_approved   INTEGER,
    decision_reason     TEXT,
    decided_at          TEXT,
    queued_at           TEXT,
    delivered_at        TEXT,
    ack_ok              INTEGER,
    ack_code            TEXT,
    ack_message         TEXT,
    ack_data            TEXT,               -- JSON
    acked_at            TEXT,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    UNIQUE (target_asset_id, seq)
);
INSERT INTO command_command_new SELECT command_id, tenant_id, target_asset_id, target_component_id, type, params, risk_class, status, seq,
    ttl_seconds, expires_at, created_by, actor_kind, decided_by, decision_approved, decision_reason, decided_at, queued_at, delivered_at,
    ack_ok, ack_code, ack_message, ack_data, acked_at, created_at, updated_at FROM command_command;
DROP TABLE command_command;
ALTER TABLE command_command_new RENAME TO command_command;
CREATE INDEX command_command_asset_created ON command_command (target_asset_id, created_at);
CREATE INDEX command_command_status_expiry ON command_command (status, expires_at);
CREATE INDEX command_command_newest ON command_command (tenant_id, created_at, command_id);

-- sdk-device: the tenant's devices, newest first.
CREATE INDEX platform_device_newest ON platform_device (tenant_id, created_at, device_uuid);
CREATE INDEX platform_device_attestation_newest ON platform_device_attestation (tenant_id, device_uuid, created_at, attestation_id);

-- sdk-assignment: a tenant's records, newest first.
CREATE INDEX assignment_record_newest ON assignment_record (tenant_id, created_at, record_id);
CREATE INDEX assignment_decision_newest ON assignment_decision (tenant_id, created_at, decision_id);
