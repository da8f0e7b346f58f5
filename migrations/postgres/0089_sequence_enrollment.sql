-- sdk-sequence enrolment (issue 37, item 4): a CRM contact of the tenant
-- enrolled in a sequence. The steps are copied at enrolment with their due
-- times (enrolled_at + the delays up to and including the step), so a later
-- change of the sequence's steps does not move an enrolment's schedule;
-- ends_at is the last step's due time. `status` stores `active` or
-- `cancelled` (and `completed` once a re-enrolment of the contact finds its
-- previous enrolment past its end); an `active` row past ends_at is answered
-- `completed`. One active enrolment per (tenant, sequence, contact).
CREATE TABLE sequence_enrollment (
    enrollment_id  TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    sequence_id    TEXT NOT NULL REFERENCES sequence_sequence (sequence_id),
    contact_id     TEXT NOT NULL,
    status         TEXT NOT NULL CHECK (status IN ('active', 'cancelled', 'completed')),
    steps          TEXT NOT NULL,
    enrolled_at    TEXT NOT NULL,
    ends_at        TEXT NOT NULL,
    cancelled_at   TEXT,
    enrolled_by    TEXT NOT NULL
);
CREATE UNIQUE INDEX sequence_enrollment_one_active ON sequence_enrollment (tenant_id, sequence_id, contact_id) WHERE status = 'active';
CREATE INDEX sequence_enrollment_newest ON sequence_enrollment (tenant_id, sequence_id, enrolled_at, enrollment_id);
CREATE INDEX sequence_enrollment_by_contact ON sequence_enrollment (tenant_id, sequence_id, contact_id, enrolled_at);
