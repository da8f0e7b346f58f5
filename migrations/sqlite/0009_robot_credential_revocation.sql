-- When a per-robot credential was revoked (POST
-- /api/assets/:asset_id/credentials/:credential_id/revoke).
ALTER TABLE asset_credential ADD COLUMN revoked_at TEXT;
