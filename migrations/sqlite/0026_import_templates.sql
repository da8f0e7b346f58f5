-- sdk-import: mapping templates, versioned per slug and immutable per
-- version; at most one active version of a slug.
CREATE TABLE import_template (
    template_id  TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    slug         TEXT NOT NULL,
    version      BIGINT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('csv', 'json', 'xlsx', 'xml')),
    entity       TEXT NOT NULL,
    mapping      TEXT NOT NULL,
    active       INTEGER NOT NULL CHECK (active IN (0, 1)),
    created_by   TEXT NOT NULL,
    created_at   TEXT NOT NULL
);
CREATE UNIQUE INDEX import_template_version ON import_template (tenant_id, slug, version);
CREATE UNIQUE INDEX import_template_active ON import_template (tenant_id, slug) WHERE active = 1;
