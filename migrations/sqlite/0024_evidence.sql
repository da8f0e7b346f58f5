-- sdk-evidence: captures made during an encounter (a visit, an inspection,
-- a consultation), each optionally pointing at a committed media blob
-- whose SHA-256 it keeps.
CREATE TABLE evidence_capture (
    capture_id     TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    encounter_id   TEXT NOT NULL,
    kind           TEXT NOT NULL CHECK (kind IN ('photo', 'video', 'audio', 'document', 'signature', 'note', 'measurement')),
    blob_id        TEXT REFERENCES media_blob (blob_id),
    sha256         TEXT,
    note           TEXT,
    metadata       TEXT NOT NULL,
    captured_at    TEXT NOT NULL,
    captured_by    TEXT NOT NULL,
    created_at     TEXT NOT NULL
);
CREATE INDEX evidence_capture_by_encounter ON evidence_capture (tenant_id, encounter_id, captured_at);
