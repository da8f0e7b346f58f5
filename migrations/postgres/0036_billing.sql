-- sdk-billing: the operator's pricing catalogs (versioned) and their rates,
-- and the invoices rated from the meter's daily roll-up, in integer minor
-- units of the catalog's currency.
CREATE TABLE billing_catalog (
    catalog_id  TEXT NOT NULL,
    version     BIGINT NOT NULL CHECK (version >= 1),
    status      TEXT NOT NULL CHECK (status IN ('draft', 'active', 'retired')),
    currency    TEXT NOT NULL,
    created_by  TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (catalog_id, version)
);
CREATE TABLE billing_rate (
    catalog_id  TEXT NOT NULL,
    version     BIGINT NOT NULL,
    sku         TEXT NOT NULL,
    unit        TEXT NOT NULL,
    mode        TEXT NOT NULL CHECK (mode IN ('flat_per_call', 'tiered_per_call', 'passthrough_plus_margin', 'per_unit', 'bundled_subscription', 'free_internal')),
    price       BIGINT,
    margin_bp   BIGINT,
    tiers       TEXT NOT NULL,
    updated_by  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (catalog_id, version, sku),
    FOREIGN KEY (catalog_id, version) REFERENCES billing_catalog (catalog_id, version)
);
CREATE TABLE billing_invoice (
    invoice_id       TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    catalog_id       TEXT NOT NULL,
    catalog_version  BIGINT NOT NULL,
    currency         TEXT NOT NULL,
    period_start     TEXT NOT NULL,
    period_end       TEXT NOT NULL,
    status           TEXT NOT NULL,
    total            BIGINT NOT NULL,
    unrated_skus     TEXT NOT NULL,
    generated_by     TEXT NOT NULL,
    generated_at     TEXT NOT NULL,
    UNIQUE (tenant_id, catalog_id, period_start, period_end)
);
CREATE TABLE billing_invoice_line (
    invoice_id  TEXT NOT NULL REFERENCES billing_invoice (invoice_id),
    sku         TEXT NOT NULL,
    unit        TEXT NOT NULL,
    mode        TEXT NOT NULL,
    units       BIGINT NOT NULL,
    calls       BIGINT NOT NULL,
    price       BIGINT,
    margin_bp   BIGINT,
    amount      BIGINT NOT NULL,
    PRIMARY KEY (invoice_id, sku)
);
