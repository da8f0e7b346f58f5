-- The CRM lead and call lists (GET /api/crm/leads, GET /api/crm/calls) are
-- newest first with the id as tie-break, filtered by one field at most in
-- the common case: each order and each filter reads an index, not a sort
-- of the tenant's rows.
CREATE INDEX crm_call_by_created ON crm_call (tenant_id, created_at, call_id);
CREATE INDEX crm_call_by_disposition ON crm_call (tenant_id, disposition, created_at, call_id);
CREATE INDEX crm_call_by_direction ON crm_call (tenant_id, direction, created_at, call_id);
DROP INDEX crm_lead_by_created;
CREATE INDEX crm_lead_by_created ON crm_lead (tenant_id, created_at, lead_id);
CREATE INDEX crm_lead_by_status ON crm_lead (tenant_id, status, created_at, lead_id);
CREATE INDEX crm_lead_by_owner ON crm_lead (tenant_id, owner_persona_id, created_at, lead_id);
CREATE INDEX crm_lead_by_source ON crm_lead (tenant_id, source, created_at, lead_id);
