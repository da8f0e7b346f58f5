-- Operator "Sovereign regions": regions by natural key, their
-- attestations (the latest expiry decides the attestation state), the
-- bundle releases signed for them (Ed25519 signature kept as hex) and the
-- leak alerts raised in them.
CREATE TABLE sovereign_region (
    region_id           TEXT PRIMARY KEY,
    regime              TEXT NOT NULL,
    operator_partner    TEXT NOT NULL,
    kms_provider        TEXT NOT NULL,
    terminal_federation INTEGER NOT NULL,
    attested_until      TEXT,
    operator_id         TEXT NOT NULL,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL
);

CREATE TABLE sovereign_attestation (
    attestation_id TEXT PRIMARY KEY,
    region_id      TEXT NOT NULL REFERENCES sovereign_region (region_id),
    regime         TEXT NOT NULL,
    auditor_id     TEXT NOT NULL,
    issued_at      TEXT NOT NULL,
    expires_at     TEXT NOT NULL,
    artifact_ref   TEXT NOT NULL,
    recorded_by    TEXT NOT NULL,
    recorded_at    TEXT NOT NULL
);
CREATE INDEX sovereign_attestation_region ON sovereign_attestation (region_id, recorded_at);

CREATE TABLE sovereign_release (
    release_id          TEXT PRIMARY KEY,
    region_id           TEXT NOT NULL REFERENCES sovereign_region (region_id),
    version             TEXT NOT NULL,
    bundle_artifact_ref TEXT NOT NULL,
    signature           TEXT NOT NULL,
    status              TEXT NOT NULL CHECK (status IN ('released', 'applied')),
    released_by         TEXT NOT NULL,
    released_at         TEXT NOT NULL,
    applied_at          TEXT,
    UNIQUE (region_id, version)
);

CREATE TABLE sovereign_leak (
    alert_id     TEXT PRIMARY KEY,
    region_id    TEXT NOT NULL REFERENCES sovereign_region (region_id),
    kind         TEXT NOT NULL,
    severity     TEXT NOT NULL,
    incident_ref TEXT,
    reported_by  TEXT NOT NULL,
    reported_at  TEXT NOT NULL
);
CREATE INDEX sovereign_leak_region ON sovereign_leak (region_id, reported_at);
