-- sdk-analytics: dataset builds materialised from the tenant's own data
-- (their rows kept as JSON Lines with a SHA-256 of them) and the exports
-- of a build to the object store.
CREATE TABLE analytics_build (
    build_id      TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    kind          TEXT NOT NULL,
    period_start  TEXT NOT NULL,
    period_end    TEXT NOT NULL,
    row_count     BIGINT NOT NULL,
    sha256        TEXT NOT NULL,
    content       TEXT NOT NULL,
    created_by    TEXT NOT NULL,
    created_at    TEXT NOT NULL
);
CREATE INDEX analytics_build_by_tenant ON analytics_build (tenant_id, created_at);
CREATE TABLE analytics_export (
    export_id        TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    build_id         TEXT NOT NULL REFERENCES analytics_build (build_id),
    target           TEXT NOT NULL,
    destination_key  TEXT NOT NULL,
    bytes            BIGINT NOT NULL,
    sha256           TEXT NOT NULL,
    created_by       TEXT NOT NULL,
    created_at       TEXT NOT NULL
);
CREATE INDEX analytics_export_by_build ON analytics_export (build_id, created_at);
