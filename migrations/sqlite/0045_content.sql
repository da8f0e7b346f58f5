-- sdk-content: content items and their numbered versions; archiving is a
-- soft state change (the item and its versions stay readable).
CREATE TABLE content_item (
    item_id         TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    title           TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('article', 'email', 'page', 'snippet', 'social_post', 'document')),
    status          TEXT NOT NULL CHECK (status IN ('active', 'archived')),
    latest_version  INTEGER NOT NULL,     -- 0 before the first version
    created_by      TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    archived_at     TEXT
);
CREATE INDEX content_item_by_created ON content_item (tenant_id, created_at);

CREATE TABLE content_version (
    version_id  TEXT PRIMARY KEY,
    item_id     TEXT NOT NULL REFERENCES content_item (item_id),
    tenant_id   TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    version     INTEGER NOT NULL,
    body        TEXT NOT NULL,            -- JSON, as given
    note        TEXT,
    created_by  TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    UNIQUE (item_id, version)
);
