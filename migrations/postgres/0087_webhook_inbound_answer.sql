-- Signed inbound webhooks (issue 37): a resent `webhook-id` is answered
-- what its first delivery was (200 with the stored receipt) instead of
-- 409, and applied once. The remembered id keeps the SHA-256 of the body
-- it was received with (a different body under the id is 409) and the
-- handler's answer, written in the transaction that applied it. Rows from
-- before (an empty digest, a null answer) match any body and answer null.
ALTER TABLE webhook_inbound_seen ADD COLUMN body_sha256 TEXT NOT NULL DEFAULT '';
ALTER TABLE webhook_inbound_seen ADD COLUMN answer TEXT NOT NULL DEFAULT 'null';
