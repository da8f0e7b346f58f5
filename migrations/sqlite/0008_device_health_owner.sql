-- The public health read takes one tenant's snapshots: the tenant named in
-- the query, or the first to register the device (found through
-- platform_device_uuid); another tenant registering the same device_uuid
-- cannot speak for it. Its snapshots are read per (tenant, device).
CREATE INDEX platform_device_uuid ON platform_device (device_uuid, created_at);
DROP INDEX diagnostic_health_device;
CREATE INDEX diagnostic_health_device ON diagnostic_health (tenant_id, device_uuid, taken_at);
