-- Row counts kept by the writes that change them (hub_kernel::db::counts),
-- for lists whose total would otherwise count every row on each read.
CREATE TABLE list_count (
    tenant_id  TEXT NOT NULL,
    name       TEXT NOT NULL,
    n          BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, name)
);

-- The CRM contacts' counts: all of a tenant's, by owner, by company.
INSERT INTO list_count (tenant_id, name, n)
    SELECT tenant_id, 'crm_contact', COUNT(*) FROM crm_contact GROUP BY tenant_id;
INSERT INTO list_count (tenant_id, name, n)
    SELECT tenant_id, 'crm_contact owner ' || owner_persona_id, COUNT(*) FROM crm_contact
    WHERE owner_persona_id IS NOT NULL GROUP BY tenant_id, owner_persona_id;
INSERT INTO list_count (tenant_id, name, n)
    SELECT tenant_id, 'crm_contact company ' || company, COUNT(*) FROM crm_contact
    WHERE company IS NOT NULL GROUP BY tenant_id, company;

-- Newest first with the id as tie-break, read from the index alone.
DROP INDEX crm_contact_by_created;
DROP INDEX crm_contact_by_owner;
DROP INDEX crm_contact_by_company;
CREATE INDEX crm_contact_by_created ON crm_contact (tenant_id, created_at, contact_id);
CREATE INDEX crm_contact_by_owner ON crm_contact (tenant_id, owner_persona_id, created_at, contact_id);
CREATE INDEX crm_contact_by_company ON crm_contact (tenant_id, company, created_at, contact_id);
