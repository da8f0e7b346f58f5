-- Devices, diagnostics and the hub side of the hdk surfaces.

CREATE TABLE platform_device (
    tenant_id           TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    device_uuid         TEXT NOT NULL,
    platform            TEXT NOT NULL CHECK (platform IN ('ios', 'android', 'web', 'desktop')),
    os_version          TEXT,
    app_version         TEXT,
    device_key_ref      TEXT,
    attested_public_key TEXT,          -- pinned by the first verified attestation
    status              TEXT NOT NULL CHECK (status IN ('active', 'revoked', 'stolen')),
    last_seen_at        TEXT NOT NULL,
    created_at          TEXT NOT NULL,
    PRIMARY KEY (tenant_id, device_uuid)
);

CREATE TABLE platform_device_challenge (
    challenge   TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL,
    device_uuid TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    used_at     TEXT,
    created_at  TEXT NOT NULL
);

CREATE TABLE platform_device_attestation (
    attestation_id     TEXT PRIMARY KEY,
    tenant_id          TEXT NOT NULL,
    device_uuid        TEXT NOT NULL,
    method             TEXT NOT NULL,
    signature_envelope TEXT NOT NULL,
    verified           BIGINT NOT NULL,
    failure_reason     TEXT,
    expires_at         TEXT,
    created_at         TEXT NOT NULL
);
CREATE INDEX platform_device_attestation_device ON platform_device_attestation (tenant_id, device_uuid);

CREATE TABLE platform_device_person (
    tenant_id   TEXT NOT NULL,
    device_uuid TEXT NOT NULL,
    person_id   TEXT NOT NULL REFERENCES identity_person (person_id),
    status      TEXT NOT NULL CHECK (status IN ('active', 'suspended', 'revoked')),
    linked_at   TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (tenant_id, device_uuid, person_id)
);

CREATE TABLE diagnostic_crash (
    crash_id       TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    device_uuid    TEXT NOT NULL,
    person_id      TEXT,
    app_version    TEXT,
    os_version     TEXT,
    occurred_at    TEXT NOT NULL,
    stack_envelope TEXT NOT NULL,
    created_at     TEXT NOT NULL
);
CREATE INDEX diagnostic_crash_device ON diagnostic_crash (tenant_id, device_uuid, occurred_at);

CREATE TABLE diagnostic_health (
    snapshot_id TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    device_uuid TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('ok', 'degraded', 'critical')),
    metrics     TEXT NOT NULL,
    taken_at    TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE INDEX diagnostic_health_device ON diagnostic_health (device_uuid, taken_at);

CREATE TABLE hdk_outbox (
    row_id          TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    device_uuid     TEXT,
    event_type      TEXT NOT NULL,
    payload         TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    received_at     TEXT NOT NULL,
    drained_at      TEXT,
    drain_id        TEXT,
    UNIQUE (tenant_id, idempotency_key)
);
CREATE INDEX hdk_outbox_undrained ON hdk_outbox (tenant_id, drained_at, received_at);

CREATE TABLE hdk_idp_claim (
    tenant_id          TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    device_uuid        TEXT NOT NULL,
    person_id          TEXT NOT NULL,
    biometric_envelope BYTEA,           -- sealed under the master key
    pin_envelope       BYTEA,           -- sealed under the master key
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL,
    PRIMARY KEY (tenant_id, device_uuid)
);

CREATE TABLE hdk_permission_snapshot (
    snapshot_id    TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    device_uuid    TEXT NOT NULL,
    persona_id     TEXT,
    permission_set TEXT NOT NULL,
    taken_at       TEXT NOT NULL,
    created_at     TEXT NOT NULL
);
CREATE INDEX hdk_permission_snapshot_device ON hdk_permission_snapshot (tenant_id, device_uuid, taken_at);

CREATE TABLE hdk_measurement (
    measurement_id TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    capture_id     TEXT NOT NULL,
    kind           TEXT NOT NULL,
    value          DOUBLE PRECISION NOT NULL,
    unit           TEXT NOT NULL,
    created_at     TEXT NOT NULL
);
CREATE INDEX hdk_measurement_capture ON hdk_measurement (tenant_id, capture_id);

CREATE TABLE hdk_watermark_application (
    application_id TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    variant_id     TEXT NOT NULL,
    watermark_kind TEXT NOT NULL,
    asset_ref      TEXT,
    payload        TEXT NOT NULL,
    applied_at     TEXT NOT NULL
);
CREATE INDEX hdk_watermark_variant ON hdk_watermark_application (tenant_id, variant_id);

CREATE TABLE hdk_sync_event (
    tenant_id       TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    idempotency_key TEXT NOT NULL,
    event_id        TEXT NOT NULL,
    batch_id        TEXT NOT NULL,
    device_uuid     TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    payload         TEXT NOT NULL,
    occurred_at     TEXT NOT NULL,
    received_at     TEXT NOT NULL,
    PRIMARY KEY (tenant_id, idempotency_key)
);

CREATE TABLE hdk_sync_resolution (
    resolution_id  TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    event_type     TEXT NOT NULL,
    policy         TEXT NOT NULL,
    status         TEXT NOT NULL,
    input_a        TEXT NOT NULL,
    input_b        TEXT NOT NULL,
    result         TEXT NOT NULL,
    batch_id       TEXT,
    audit_entry_id TEXT,
    created_at     TEXT NOT NULL
);
