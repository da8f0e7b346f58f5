-- Operator "Multi-region": a tenant's active-active profile (one per
-- tenant) and the failover drills run against it. Regions and services
-- are JSON text; booleans 0/1; observed times in seconds.
CREATE TABLE active_active_profile (
    profile_id            TEXT PRIMARY KEY,
    tenant_id             TEXT NOT NULL UNIQUE REFERENCES tenant_tenant (tenant_id),
    tier                  TEXT NOT NULL CHECK (tier IN ('active-active', 'active-passive', 'single-region')),
    home_region           TEXT NOT NULL,
    paired_regions        TEXT NOT NULL,
    rpo_target_seconds    BIGINT,
    rto_target_seconds    BIGINT,
    contract_addendum_ref TEXT NOT NULL,
    replication_overrides TEXT NOT NULL,
    status                TEXT NOT NULL,
    activated_at          TEXT,
    created_by            TEXT NOT NULL,
    created_at            TEXT NOT NULL,
    updated_at            TEXT NOT NULL
);

CREATE TABLE active_active_drill (
    drill_id                 TEXT PRIMARY KEY,
    profile_id               TEXT NOT NULL REFERENCES active_active_profile (profile_id),
    from_region              TEXT NOT NULL,
    to_region                TEXT NOT NULL,
    started_at               TEXT NOT NULL,
    rpo_observed_seconds     DOUBLE PRECISION NOT NULL,
    rto_observed_seconds     DOUBLE PRECISION NOT NULL,
    passed                   INTEGER NOT NULL,
    audit_entry_id           TEXT NOT NULL,
    tier_downgrade_triggered INTEGER NOT NULL,
    run_by                   TEXT NOT NULL
);
CREATE INDEX active_active_drill_profile ON active_active_drill (profile_id, started_at);
