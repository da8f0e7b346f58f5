-- sdk-notification: notifications sent through a provider (the content is
-- handed to the provider, not kept) and the delivery receipts providers
-- send back through the signed inbound webhook of kind `notification`,
-- matched to a notification by the provider's message id.
CREATE TABLE notification_notification (
    notification_id      TEXT PRIMARY KEY,
    tenant_id            TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    channel              TEXT NOT NULL,
    recipient            TEXT NOT NULL,
    provider             TEXT NOT NULL,
    provider_message_id  TEXT,
    status               TEXT NOT NULL,
    error                TEXT,
    created_by           TEXT NOT NULL,
    created_at           TEXT NOT NULL,
    updated_at           TEXT NOT NULL
);
CREATE UNIQUE INDEX notification_notification_message ON notification_notification (tenant_id, provider, provider_message_id);

CREATE TABLE notification_receipt (
    receipt_id           TEXT PRIMARY KEY,
    tenant_id            TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    provider             TEXT NOT NULL,
    provider_message_id  TEXT NOT NULL,
    notification_id      TEXT REFERENCES notification_notification (notification_id),
    status               TEXT NOT NULL,
    reason               TEXT,
    occurred_at          TEXT NOT NULL,
    received_at          TEXT NOT NULL
);
CREATE INDEX notification_receipt_newest ON notification_receipt (tenant_id, occurred_at, receipt_id);
CREATE INDEX notification_receipt_status ON notification_receipt (tenant_id, status, occurred_at, receipt_id);
