-- The operator's webhook view lists every tenant's endpoints newest
-- first; one tenant's go through webhook_endpoint_by_tenant, now with
-- the tie-breaker of the order.
CREATE INDEX webhook_endpoint_newest ON webhook_endpoint (created_at, endpoint_id);
DROP INDEX webhook_endpoint_by_tenant;
CREATE INDEX webhook_endpoint_by_tenant ON webhook_endpoint (tenant_id, created_at, endpoint_id);
