-- sdk-crm: a contact erased (DELETE /api/crm/contacts/{contact_id}) keeps
-- its row as a tombstone, its personal fields cleared: other groups' rows
-- and the audit chain name it by id. An erased contact is answered by no
-- route (404) and may be referenced by no new row.
ALTER TABLE crm_contact ADD COLUMN erased_at TEXT;

-- sdk-campaign: a campaign is active until archived (then read-only, its
-- journeys included).
ALTER TABLE campaign_campaign ADD COLUMN status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived'));
ALTER TABLE campaign_campaign ADD COLUMN archived_at TEXT;
CREATE INDEX campaign_campaign_by_status ON campaign_campaign (tenant_id, status, created_at);
