-- The command watchers (GET /api/commands/watch) read a tenant's commands
-- changed since their last read, in the order they changed: an index
-- range, not a scan of the tenant's commands.
CREATE INDEX command_command_changed ON command_command (tenant_id, updated_at, command_id);

-- Erasing a CRM contact cancels its running sequence enrolments in the
-- erasure's transaction: found by contact, not by a scan of the tenant's.
CREATE INDEX sequence_enrollment_of_contact ON sequence_enrollment (tenant_id, contact_id);
