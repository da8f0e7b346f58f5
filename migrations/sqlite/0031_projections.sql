-- sdk-projection: the subjects a tenant names, the append-only log of
-- assertions about each (`seq`: the order they were recorded in, from the
-- subject's count, which every append and rebuild locks), and each
-- subject's snapshot: the log folded (the latest assertion per attribute,
-- by asserted_at, then seq) with the SHA-256 of its canonical JSON.
CREATE TABLE projection_subject (
    tenant_id        TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    subject_id       TEXT NOT NULL,
    assertion_count  BIGINT NOT NULL,
    created_by       TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    PRIMARY KEY (tenant_id, subject_id)
);

CREATE TABLE projection_assertion (
    assertion_id  TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL,
    subject_id    TEXT NOT NULL,
    seq           BIGINT NOT NULL,
    attribute     TEXT NOT NULL,
    value         TEXT NOT NULL,
    source        TEXT,
    asserted_at   TEXT NOT NULL,
    recorded_by   TEXT NOT NULL,
    recorded_at   TEXT NOT NULL,
    FOREIGN KEY (tenant_id, subject_id) REFERENCES projection_subject (tenant_id, subject_id)
);
CREATE UNIQUE INDEX projection_assertion_seq ON projection_assertion (tenant_id, subject_id, seq);
CREATE INDEX projection_assertion_latest ON projection_assertion (tenant_id, subject_id, attribute, asserted_at, seq);

CREATE TRIGGER projection_assertion_no_update BEFORE UPDATE ON projection_assertion
BEGIN
    SELECT RAISE(ABORT, 'projection assertions are append-only');
END;

CREATE TRIGGER projection_assertion_no_delete BEFORE DELETE ON projection_assertion
BEGIN
    SELECT RAISE(ABORT, 'projection assertions are append-only');
END;

CREATE TABLE projection_snapshot (
    tenant_id        TEXT NOT NULL,
    subject_id       TEXT NOT NULL,
    state            TEXT NOT NULL,
    content_hash     TEXT NOT NULL,
    assertion_count  BIGINT NOT NULL,
    rebuilt_at       TEXT NOT NULL,
    PRIMARY KEY (tenant_id, subject_id),
    FOREIGN KEY (tenant_id, subject_id) REFERENCES projection_subject (tenant_id, subject_id)
);
