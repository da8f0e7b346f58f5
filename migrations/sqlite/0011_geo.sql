-- sdk-geo: canonical addresses, one per (tenant, canonical form).
CREATE TABLE geo_address (
    address_id    TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    canonical     TEXT NOT NULL,
    lines         TEXT NOT NULL,
    locality      TEXT,
    region        TEXT,
    postal_code   TEXT,
    country_code  TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    UNIQUE (tenant_id, canonical)
);
