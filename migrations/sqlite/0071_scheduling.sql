-- sdk-scheduling: calendar connections (the credential sealed under the
-- master key), appointments, and each appointment's event on each
-- connection's calendar (its object URL, ETag and SEQUENCE).
CREATE TABLE scheduling_connection (
    connection_id      TEXT PRIMARY KEY,
    tenant_id          TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    name               TEXT NOT NULL,
    provider           TEXT NOT NULL CHECK (provider IN ('caldav')),
    collection_url     TEXT NOT NULL,
    auth_scheme        TEXT NOT NULL CHECK (auth_scheme IN ('basic', 'bearer', 'none')),
    credential_sealed  BLOB,
    created_by         TEXT NOT NULL,
    created_at         TEXT NOT NULL
);
CREATE INDEX scheduling_connection_by_created ON scheduling_connection (tenant_id, created_at);

CREATE TABLE scheduling_appointment (
    appointment_id  TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    title           TEXT NOT NULL,
    description     TEXT,
    location        TEXT,
    starts_at       TEXT NOT NULL,
    ends_at         TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('booked', 'cancelled')),
    contact_id      TEXT REFERENCES crm_contact (contact_id),
    revision        INTEGER NOT NULL,
    created_by      TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX scheduling_appointment_by_starts ON scheduling_appointment (tenant_id, starts_at);

CREATE TABLE scheduling_push (
    tenant_id       TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    appointment_id  TEXT NOT NULL REFERENCES scheduling_appointment (appointment_id),
    connection_id   TEXT NOT NULL REFERENCES scheduling_connection (connection_id),
    href            TEXT NOT NULL,
    uid             TEXT NOT NULL,
    etag            TEXT,
    sequence        INTEGER NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('present', 'deleted')),
    pushed_at       TEXT NOT NULL,
    PRIMARY KEY (appointment_id, connection_id)
);
