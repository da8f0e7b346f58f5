-- sdk-source-record: claims about a subject as a source stated them. A
-- claim is replaced only by superseding it (its successor inserted, the
-- claim stamped SUPERSEDED, in one transaction); no other change and no
-- delete is ever made: the triggers below refuse them whatever the client.
CREATE TABLE source_claim (
    claim_id       TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    subject_id     TEXT NOT NULL,
    attribute      TEXT NOT NULL,
    value          TEXT NOT NULL,
    source         TEXT NOT NULL,
    source_ref     TEXT,
    status         TEXT NOT NULL CHECK (status IN ('ACTIVE', 'SUPERSEDED')),
    supersedes     TEXT REFERENCES source_claim (claim_id),
    superseded_by  TEXT REFERENCES source_claim (claim_id),
    superseded_at  TEXT,
    observed_at    TEXT NOT NULL,
    recorded_by    TEXT NOT NULL,
    recorded_at    TEXT NOT NULL
);
CREATE INDEX source_claim_by_subject ON source_claim (tenant_id, subject_id, attribute, recorded_at);

CREATE TRIGGER source_claim_no_delete BEFORE DELETE ON source_claim
BEGIN
    SELECT RAISE(ABORT, 'source claims are never deleted');
END;

CREATE TRIGGER source_claim_only_superseded BEFORE UPDATE ON source_claim
WHEN NOT (
    OLD.status = 'ACTIVE' AND NEW.status = 'SUPERSEDED'
    AND NEW.superseded_by IS NOT NULL AND NEW.superseded_at IS NOT NULL
    AND NEW.claim_id = OLD.claim_id AND NEW.tenant_id = OLD.tenant_id AND NEW.subject_id = OLD.subject_id
    AND NEW.attribute = OLD.attribute AND NEW.value = OLD.value AND NEW.source = OLD.source
    AND NEW.source_ref IS OLD.source_ref AND NEW.supersedes IS OLD.supersedes
    AND NEW.observed_at = OLD.observed_at AND NEW.recorded_by = OLD.recorded_by AND NEW.recorded_at = OLD.recorded_at
)
BEGIN
    SELECT RAISE(ABORT, 'a source claim changes only by being superseded');
END;
