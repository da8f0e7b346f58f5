-- sdk-media: blob metadata. The content lives in the object store
-- (HUB_MEDIA_STORE) at `{tenant_id}/{blob_id}`; a blob is `pending` until a
-- commit verified its checksum against the stored bytes, then `ready`.
CREATE TABLE media_blob (
    blob_id         TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    status          TEXT NOT NULL CHECK (status IN ('pending', 'ready')),
    content_type    TEXT NOT NULL,
    filename        TEXT,
    declared_bytes  BIGINT,
    size_bytes      BIGINT,
    sha256          TEXT,
    object_key      TEXT,             -- the upload in force; each PUT writes a new one
    created_by      TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    uploaded_at     TEXT,
    committed_at    TEXT
);
CREATE INDEX media_blob_by_tenant ON media_blob (tenant_id, created_at);
