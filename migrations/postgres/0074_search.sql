-- sdk-search: one row per searchable resource of a tenant (crm contacts and
-- leads, content items, incidents), written by the resource's own create
-- and update paths in their transaction. PostgreSQL indexes it with a
-- generated tsvector column (the title weighted A, the body B) under a GIN
-- index; SQLite with an FTS5 table (see the sqlite migration).
CREATE TABLE search_document (
    doc_id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    kind        TEXT NOT NULL CHECK (kind IN ('contact', 'lead', 'content_item', 'incident')),
    ref_id      TEXT NOT NULL,
    title       TEXT NOT NULL,
    body        TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    UNIQUE (tenant_id, kind, ref_id)
);
CREATE INDEX search_document_by_updated ON search_document (tenant_id, updated_at);

-- Words: runs of letters and digits, lowercased, unstemmed ('simple'), as
-- SQLite's unicode61 tokenizer splits them (an email address is its words).
ALTER TABLE search_document ADD COLUMN tsv tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('simple', regexp_replace(title, '[^[:alnum:]]+', ' ', 'g')), 'A')
    || setweight(to_tsvector('simple', regexp_replace(body, '[^[:alnum:]]+', ' ', 'g')), 'B')
) STORED;
CREATE INDEX search_document_tsv ON search_document USING GIN (tsv);

-- What exists already.
INSERT INTO search_document (tenant_id, kind, ref_id, title, body, updated_at)
SELECT tenant_id, 'contact', contact_id, name, emails || ' ' || phones || ' ' || COALESCE(company, ''), updated_at FROM crm_contact;
INSERT INTO search_document (tenant_id, kind, ref_id, title, body, updated_at)
SELECT tenant_id, 'lead', lead_id, name, COALESCE(company, '') || ' ' || COALESCE(source, '') || ' ' || status, created_at FROM crm_lead;
INSERT INTO search_document (tenant_id, kind, ref_id, title, body, updated_at)
SELECT i.tenant_id, 'content_item', i.item_id, i.title,
       i.kind || ' ' || COALESCE((SELECT v.body FROM content_version v WHERE v.item_id = i.item_id ORDER BY v.version DESC LIMIT 1), ''), i.updated_at
FROM content_item i;
INSERT INTO search_document (tenant_id, kind, ref_id, title, body, updated_at)
SELECT tenant_id, 'incident', incident_id, title, COALESCE(description, '') || ' ' || severity || ' ' || status || ' ' || COALESCE(status_note, ''), updated_at
FROM incident_incident;
