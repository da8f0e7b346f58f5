-- sdk-ingest: one row per batch, keyed by the tenant's idempotency key, with
-- the first answer (a replay returns it), and the provenance of every record
-- it imported: which batch wrote which entity, and the SHA-256 of the record
-- as received.
CREATE TABLE ingest_batch (
    batch_id         TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    idempotency_key  TEXT NOT NULL,
    request_hash     TEXT NOT NULL,
    entity           TEXT NOT NULL,
    mode             TEXT NOT NULL CHECK (mode IN ('upsert', 'insert')),
    record_count     INTEGER NOT NULL,
    result           TEXT NOT NULL,         -- JSON: the answer's data
    created_by       TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    UNIQUE (tenant_id, idempotency_key)
);

CREATE TABLE ingest_record (
    batch_id      TEXT NOT NULL REFERENCES ingest_batch (batch_id),
    record_index  INTEGER NOT NULL,
    tenant_id     TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    entity        TEXT NOT NULL,
    entity_id     TEXT NOT NULL,
    outcome       TEXT NOT NULL CHECK (outcome IN ('inserted', 'updated')),
    record_hash   TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    PRIMARY KEY (batch_id, record_index)
);
CREATE INDEX ingest_record_by_entity ON ingest_record (tenant_id, entity, entity_id, created_at);
