-- Lifecycle routes of sdk-secrets, sdk-consent, sdk-data-rights and
-- sdk-approval (issue 37).
--
-- sdk-secrets: when a reference's next rotation is due, kept by every
-- write of the reference, so the registry lists the references due.
ALTER TABLE secrets_reference ADD COLUMN next_rotation_at TEXT;
UPDATE secrets_reference
    SET next_rotation_at = to_char((last_rotated_at::timestamptz + rotation_period_days * interval '1 day') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
    WHERE rotation_period_days IS NOT NULL;
CREATE INDEX secrets_reference_due ON secrets_reference (tenant_id, next_rotation_at);

-- sdk-consent: a purpose is retired (no longer offered: no new grant;
-- its records stay and withdrawals are still taken).
ALTER TABLE consent_purpose ADD COLUMN status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'retired'));
ALTER TABLE consent_purpose ADD COLUMN retired_at TEXT;

-- sdk-data-rights: the subject withdraws a request (`cancelled`).
ALTER TABLE data_rights_request DROP CONSTRAINT data_rights_request_status_check;
ALTER TABLE data_rights_request ADD CONSTRAINT data_rights_request_status_check
    CHECK (status IN ('received', 'in_progress', 'completed', 'failed', 'cancelled'));

-- sdk-approval: the requester withdraws a pending request (`cancelled`).
ALTER TABLE approval_request DROP CONSTRAINT approval_request_status_check;
ALTER TABLE approval_request ADD CONSTRAINT approval_request_status_check CHECK (status IN ('pending', 'approved', 'rejected', 'cancelled'));
