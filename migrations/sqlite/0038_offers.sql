-- sdk-offer-catalog: the tenant's offers, one per slug; a price is an
-- integer count of the currency's minor units.
CREATE TABLE offer_offer (
    offer_id     TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    slug         TEXT NOT NULL,
    name         TEXT NOT NULL,
    description  TEXT,
    price_minor  BIGINT,
    currency     TEXT,
    status       TEXT NOT NULL,
    created_by   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);
CREATE UNIQUE INDEX offer_offer_slug ON offer_offer (tenant_id, slug);
CREATE INDEX offer_offer_newest ON offer_offer (tenant_id, created_at, offer_id);
CREATE INDEX offer_offer_by_status ON offer_offer (tenant_id, status, created_at, offer_id);
