-- The operator's invoice list: every tenant's, or one tenant's, newest
-- generated first.
CREATE INDEX billing_invoice_by_generated ON billing_invoice (generated_at, invoice_id);
CREATE INDEX billing_invoice_by_tenant_generated ON billing_invoice (tenant_id, generated_at, invoice_id);
