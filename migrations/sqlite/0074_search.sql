-- sdk-search: one row per searchable resource of a tenant (crm contacts and
-- leads, content items, incidents), written by the resource's own create
-- and update paths in their transaction. SQLite indexes it with an FTS5
-- table (external content: the rows themselves) kept in step by triggers;
-- PostgreSQL with a generated tsvector column (see the postgres migration).
CREATE TABLE search_document (
    doc_id      INTEGER PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    kind        TEXT NOT NULL CHECK (kind IN ('contact', 'lead', 'content_item', 'incident')),
    ref_id      TEXT NOT NULL,
    title       TEXT NOT NULL,
    body        TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    UNIQUE (tenant_id, kind, ref_id)
);
CREATE INDEX search_document_by_updated ON search_document (tenant_id, updated_at);

-- Words: runs of letters and digits, lowercased, diacritics kept (as the
-- PostgreSQL side's 'simple' configuration does).
CREATE VIRTUAL TABLE search_fts USING fts5 (title, body, content = 'search_document', content_rowid = 'doc_id', tokenize = 'unicode61 remove_diacritics 0');
CREATE TRIGGER search_document_ai AFTER INSERT ON search_document BEGIN
    INSERT INTO search_fts (rowid, title, body) VALUES (new.doc_id, new.title, new.body);
END;
CREATE TRIGGER search_document_ad AFTER DELETE ON search_document BEGIN
    INSERT INTO search_fts (search_fts, rowid, title, body) VALUES ('delete', old.doc_id, old.title, old.body);
END;
CREATE TRIGGER search_document_au AFTER UPDATE ON search_document BEGIN
    INSERT INTO search_fts (search_fts, rowid, title, body) VALUES ('delete', old.doc_id, old.title, old.body);
    INSERT INTO search_fts (rowid, title, body) VALUES (new.doc_id, new.title, new.body);
END;

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
