-- Per-tenant numbers handed out one at a time (hub_kernel::db::change::next_number):
-- the next version of a named, versioned resource. One upsert increments
-- the row, so concurrent writers each get their own number.
CREATE TABLE tenant_sequence (
    tenant_id  TEXT NOT NULL,
    name       TEXT NOT NULL,
    last       BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, name)
);
