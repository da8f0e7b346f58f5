-- Lifecycle routes of the outreach groups (issue 37): an incident's notes
-- (comments, and its status changes as they happen, in order); a
-- sequence's status (`active` until archived); when a template, a
-- sequence or a calendar connection was last changed; the indexes of the
-- notification list and of a notification's receipts.
CREATE TABLE incident_note (
    note_id      TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    incident_id  TEXT NOT NULL REFERENCES incident_incident (incident_id),
    kind         TEXT NOT NULL CHECK (kind IN ('comment', 'status')),
    body         TEXT,
    from_status  TEXT,
    to_status    TEXT,
    author       TEXT NOT NULL,
    created_at   TEXT NOT NULL
);
CREATE INDEX incident_note_in_order ON incident_note (tenant_id, incident_id, created_at, note_id);

ALTER TABLE sequence_sequence ADD COLUMN status TEXT NOT NULL DEFAULT 'active';
ALTER TABLE sequence_sequence ADD COLUMN updated_at TEXT NOT NULL DEFAULT '';
UPDATE sequence_sequence SET updated_at = created_at;
CREATE INDEX sequence_sequence_by_status ON sequence_sequence (tenant_id, status, created_at, sequence_id);

ALTER TABLE sequence_template ADD COLUMN updated_at TEXT NOT NULL DEFAULT '';
UPDATE sequence_template SET updated_at = created_at;

ALTER TABLE scheduling_connection ADD COLUMN updated_at TEXT NOT NULL DEFAULT '';
UPDATE scheduling_connection SET updated_at = created_at;

CREATE INDEX notification_notification_newest ON notification_notification (tenant_id, created_at, notification_id);
CREATE INDEX notification_receipt_of ON notification_receipt (tenant_id, notification_id, occurred_at, receipt_id);
