-- sdk-campaign: campaigns, named once in a tenant, and their journeys, whose
-- ordered steps are stored as given (opaque JSON).
CREATE TABLE campaign_campaign (
    campaign_id  TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    name         TEXT NOT NULL,
    description  TEXT,
    attributes   TEXT NOT NULL,           -- JSON object
    created_by   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    UNIQUE (tenant_id, name)
);
CREATE INDEX campaign_campaign_by_created ON campaign_campaign (tenant_id, created_at);

CREATE TABLE campaign_journey (
    journey_id   TEXT PRIMARY KEY,
    campaign_id  TEXT NOT NULL REFERENCES campaign_campaign (campaign_id),
    tenant_id    TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    name         TEXT,
    steps        TEXT NOT NULL,           -- JSON array, as given
    created_by   TEXT NOT NULL,
    created_at   TEXT NOT NULL
);
CREATE INDEX campaign_journey_by_campaign ON campaign_journey (campaign_id, created_at);
