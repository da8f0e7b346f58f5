-- Operator federation profiles: a home region, the regions it federates
-- with, the data classes it shares and how failover between them is
-- probed and decided.
CREATE TABLE federation_profile (
    profile_id             TEXT PRIMARY KEY,
    name                   TEXT NOT NULL UNIQUE,
    home_region            TEXT NOT NULL,
    peer_regions           TEXT NOT NULL,
    shared_data_classes    TEXT NOT NULL,
    failover_mode          TEXT NOT NULL CHECK (failover_mode IN ('manual', 'automatic')),
    probe_interval_seconds BIGINT NOT NULL,
    failure_threshold      BIGINT NOT NULL,
    status                 TEXT NOT NULL,
    created_by             TEXT NOT NULL,
    created_at             TEXT NOT NULL,
    updated_at             TEXT NOT NULL
);
CREATE INDEX federation_profile_newest ON federation_profile (created_at, profile_id);
