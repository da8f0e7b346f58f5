-- The operator listing's optional filters are one statement, which plans
-- through audit_entry_occurred; the tenant index only cost every append.
DROP INDEX audit_entry_tenant_occurred;
