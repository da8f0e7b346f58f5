-- sdk-data-credits: a tenant's credit account (balance, and the part of it
-- reserved by open holds), the operator's grants, the credit price of each
-- capability, and holds: reserved, then settled (consuming at most the
-- hold) or released.
CREATE TABLE data_credits_account (
    tenant_id   TEXT PRIMARY KEY REFERENCES tenant_tenant (tenant_id),
    balance     BIGINT NOT NULL CHECK (balance >= 0),
    reserved    BIGINT NOT NULL CHECK (reserved >= 0 AND reserved <= balance),
    updated_at  TEXT NOT NULL
);
CREATE TABLE data_credits_grant (
    grant_id     TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    credits      BIGINT NOT NULL CHECK (credits > 0),
    reason       TEXT NOT NULL,
    operator_id  TEXT NOT NULL,
    created_at   TEXT NOT NULL
);
CREATE INDEX data_credits_grant_by_tenant ON data_credits_grant (tenant_id, created_at);
CREATE TABLE data_credits_price (
    capability  TEXT PRIMARY KEY,
    credits     BIGINT NOT NULL CHECK (credits >= 0),
    updated_by  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE TABLE data_credits_hold (
    hold_id     TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    capability  TEXT NOT NULL,
    quantity    BIGINT NOT NULL,
    credits     BIGINT NOT NULL CHECK (credits >= 0),
    status      TEXT NOT NULL CHECK (status IN ('held', 'settled', 'released')),
    consumed    BIGINT,
    created_at  TEXT NOT NULL,
    closed_at   TEXT
);
CREATE INDEX data_credits_hold_by_status ON data_credits_hold (tenant_id, status, created_at);
