-- Lifecycle routes of the platform groups (issue 37).
--
-- sdk-asset: an asset is retired (decommissioned), never removed: its
-- robot credentials are revoked and it takes no new command.
ALTER TABLE asset_asset ADD COLUMN status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'retired'));
ALTER TABLE asset_asset ADD COLUMN retired_at TEXT;
CREATE INDEX asset_asset_newest ON asset_asset (tenant_id, created_at, asset_id);

-- sdk-command: a command waiting for approval or delivery can be
-- cancelled.
ALTER TABLE command_command DROP CONSTRAINT command_command_status_check;
ALTER TABLE command_command ADD CONSTRAINT command_command_status_check CHECK (status IN ('awaiting_approval', 'queued', 'delivered',
    'acknowledged_ok', 'acknowledged_failed', 'rejected', 'expired', 'cancelled'));
CREATE INDEX command_command_newest ON command_command (tenant_id, created_at, command_id);

-- sdk-device: the tenant's devices, newest first.
CREATE INDEX platform_device_newest ON platform_device (tenant_id, created_at, device_uuid);
CREATE INDEX platform_device_attestation_newest ON platform_device_attestation (tenant_id, device_uuid, created_at, attestation_id);

-- sdk-assignment: a tenant's records, newest first.
CREATE INDEX assignment_record_newest ON assignment_record (tenant_id, created_at, record_id);
CREATE INDEX assignment_decision_newest ON assignment_decision (tenant_id, created_at, decision_id);
