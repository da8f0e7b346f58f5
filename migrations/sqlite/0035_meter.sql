-- sdk-meter: usage events (deduplicated by idempotency key within 24
-- hours), their roll-up per (tenant, asset, sensor, UTC day, sku) and per
-- (tenant, sku, UTC month), and the hard caps on the monthly usage with the
-- operator's overrides.
CREATE TABLE meter_usage_event (
    event_id         TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    asset_id         TEXT NOT NULL,
    sensor_id        TEXT,
    sku              TEXT NOT NULL,
    quantity         INTEGER NOT NULL CHECK (quantity >= 0),
    occurred_at      TEXT NOT NULL,
    idempotency_key  TEXT NOT NULL,
    recorded_at      TEXT NOT NULL
);
-- The event an idempotency key names while its 24 hours run; a key seen
-- again after them names the new event.
CREATE TABLE meter_usage_key (
    tenant_id        TEXT NOT NULL,
    idempotency_key  TEXT NOT NULL,
    event_id         TEXT NOT NULL,
    recorded_at      TEXT NOT NULL,
    PRIMARY KEY (tenant_id, idempotency_key)
);
-- sensor_id is '' for asset-level usage (a key column is never NULL).
CREATE TABLE meter_usage_rollup (
    tenant_id   TEXT NOT NULL,
    asset_id    TEXT NOT NULL,
    day         TEXT NOT NULL,
    sku         TEXT NOT NULL,
    sensor_id   TEXT NOT NULL,
    units       INTEGER NOT NULL,
    events      INTEGER NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (tenant_id, asset_id, day, sku, sensor_id)
);
-- Invoices rate a tenant's days by sku.
CREATE INDEX meter_usage_rollup_by_day ON meter_usage_rollup (tenant_id, day, sku);
CREATE TABLE meter_period_usage (
    tenant_id       TEXT NOT NULL,
    sku             TEXT NOT NULL,
    period          TEXT NOT NULL,
    units           INTEGER NOT NULL,
    cap_reached_at  TEXT,
    PRIMARY KEY (tenant_id, sku, period)
);
CREATE TABLE meter_hardcap (
    tenant_id      TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    sku            TEXT NOT NULL,
    monthly_units  INTEGER NOT NULL CHECK (monthly_units >= 0),
    set_by         TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    PRIMARY KEY (tenant_id, sku)
);
CREATE TABLE meter_hardcap_override (
    override_id  TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    sku          TEXT NOT NULL,
    until        TEXT NOT NULL,
    operator_id  TEXT NOT NULL,
    reason       TEXT NOT NULL,
    trace_id     TEXT,
    created_at   TEXT NOT NULL
);
CREATE INDEX meter_hardcap_override_by_sku ON meter_hardcap_override (tenant_id, sku, until);
