-- sdk-tenant: the tenant's residency tree (region, country, state, city,
-- locality). A node's parent is of a higher level in the same tenant; names
-- are unique among siblings of a kind.
CREATE TABLE residency_node (
    geo_node_id         TEXT PRIMARY KEY,
    tenant_id           TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    kind                TEXT NOT NULL CHECK (kind IN ('region', 'country', 'state', 'city', 'locality')),
    name                TEXT NOT NULL,
    code                TEXT,
    parent_geo_node_id  TEXT REFERENCES residency_node (geo_node_id),
    residency_class     TEXT NOT NULL,
    created_by          TEXT NOT NULL,
    created_at          TEXT NOT NULL
);
CREATE UNIQUE INDEX residency_node_sibling ON residency_node (tenant_id, COALESCE(parent_geo_node_id, ''), kind, name);
