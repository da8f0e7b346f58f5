-- sdk-workflow "registers or upserts" (issue 37): registering other steps
-- under a stored version replaces them in place (no run can reference a
-- version yet); `updated_at` says when the steps last changed.
ALTER TABLE workflow_definition ADD COLUMN updated_at TEXT NOT NULL DEFAULT '';
UPDATE workflow_definition SET updated_at = created_at;
