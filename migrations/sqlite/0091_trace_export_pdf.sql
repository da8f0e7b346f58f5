-- sdk-trace: an export may be a PDF (`format` 'pdf', the artifact at
-- `traces/<tenant>/<export_id>.pdf`, signed as the JSON form is). SQLite
-- cannot change a CHECK constraint: the table is rebuilt (nothing
-- references it) with its rows and its index.
CREATE TABLE trace_export_new (
    export_id      TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    trace_id       TEXT NOT NULL,
    format         TEXT NOT NULL CHECK (format IN ('json', 'pdf')),
    status         TEXT NOT NULL CHECK (status IN ('requested', 'ready', 'failed')),
    artifact_key   TEXT,
    sha256         TEXT,
    signature_hex  TEXT,
    key_id         TEXT,
    size_bytes     INTEGER,
    requested_by   TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    ready_at       TEXT
);
INSERT INTO trace_export_new (export_id, tenant_id, trace_id, format, status, artifact_key, sha256, signature_hex, key_id, size_bytes, requested_by, created_at, ready_at)
    SELECT export_id, tenant_id, trace_id, format, status, artifact_key, sha256, signature_hex, key_id, size_bytes, requested_by, created_at, ready_at FROM trace_export;
DROP TABLE trace_export;
ALTER TABLE trace_export_new RENAME TO trace_export;
CREATE INDEX trace_export_by_trace ON trace_export (tenant_id, trace_id, created_at);
