-- sdk-payment: a tenant's payment methods (the provider's token and the
-- card's display facts, never its number) and the charges captured or
-- declined against them, one per idempotency key.
CREATE TABLE payment_method (
    method_id   TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    provider    TEXT NOT NULL,
    token       TEXT NOT NULL,
    brand       TEXT NOT NULL,
    last4       TEXT NOT NULL,
    exp_month   INTEGER NOT NULL,
    exp_year    INTEGER NOT NULL,
    label       TEXT,
    created_by  TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE INDEX payment_method_by_tenant ON payment_method (tenant_id, created_at);
CREATE TABLE payment_charge (
    charge_id           TEXT PRIMARY KEY,
    tenant_id           TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    payment_method_id   TEXT NOT NULL REFERENCES payment_method (method_id),
    amount              INTEGER NOT NULL CHECK (amount > 0),
    currency            TEXT NOT NULL,
    description         TEXT,
    idempotency_key     TEXT NOT NULL,
    provider            TEXT NOT NULL,
    provider_reference  TEXT NOT NULL,
    status              TEXT NOT NULL CHECK (status IN ('captured', 'declined')),
    decline_code        TEXT,
    created_by          TEXT NOT NULL,
    created_at          TEXT NOT NULL,
    UNIQUE (tenant_id, idempotency_key)
);
CREATE INDEX payment_charge_by_tenant ON payment_charge (tenant_id, created_at);
