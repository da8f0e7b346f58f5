-- Foundation: identity, tenancy, personas and roles, credentials, keys.
-- Ids are UUID text, times RFC 3339 UTC text, JSON text, booleans 0/1.

CREATE TABLE crypto_data_key (
    key_id       TEXT PRIMARY KEY,
    wrapped_key  BLOB,                 -- NULL once destroyed (crypto-shred)
    created_at   TEXT NOT NULL,
    destroyed_at TEXT
);

CREATE TABLE crypto_signing_key (
    kid          TEXT PRIMARY KEY,     -- hex SHA-256 of the public key
    private_enc  BLOB NOT NULL,        -- PKCS#8, sealed under the master key
    public_x     TEXT NOT NULL,        -- base64url
    public_y     TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('current', 'previous', 'retired')),
    created_at   TEXT NOT NULL,
    verify_until TEXT                  -- end of the grace window once rotated out
);

CREATE TABLE platform_pool (
    pool_index INTEGER PRIMARY KEY,
    kind       TEXT NOT NULL,
    region     TEXT,
    created_at TEXT NOT NULL
);
INSERT INTO platform_pool (pool_index, kind, region, created_at)
VALUES (0, 'admin', NULL, '1970-01-01T00:00:00.000000Z');

CREATE TABLE identity_person (
    person_id        TEXT PRIMARY KEY,
    home_region      TEXT,
    person_key_ref   TEXT NOT NULL REFERENCES crypto_data_key (key_id),
    status           TEXT NOT NULL,
    mdm_method       TEXT,
    profile_envelope BLOB,             -- display name, under the person's key
    created_at       TEXT NOT NULL,
    erased_at        TEXT
);

CREATE TABLE identity_alias (
    alias_id    TEXT PRIMARY KEY,
    person_id   TEXT NOT NULL REFERENCES identity_person (person_id),
    kind        TEXT NOT NULL,
    value_hash  TEXT NOT NULL,         -- keyed hash of the normalised value
    value_enc   BLOB NOT NULL,         -- the value, under the person's key
    verified_at TEXT,
    created_at  TEXT NOT NULL,
    UNIQUE (kind, value_hash)
);

CREATE TABLE identity_credential (
    person_id   TEXT PRIMARY KEY REFERENCES identity_person (person_id),
    kind        TEXT NOT NULL,
    secret_hash TEXT NOT NULL,         -- argon2id PHC string
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

CREATE TABLE identity_verification (
    token_hash TEXT PRIMARY KEY,       -- SHA-256 of the token
    alias_id   TEXT NOT NULL REFERENCES identity_alias (alias_id),
    purpose    TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    used_at    TEXT,
    created_at TEXT NOT NULL
);

CREATE TABLE tenant_org (
    org_id     TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    created_at TEXT NOT NULL
);

CREATE TABLE tenant_app (
    app_id       TEXT PRIMARY KEY,
    org_id       TEXT NOT NULL REFERENCES tenant_org (org_id),
    display_name TEXT NOT NULL,
    status       TEXT NOT NULL,
    created_at   TEXT NOT NULL
);

CREATE TABLE tenant_tenant (
    tenant_id            TEXT PRIMARY KEY,
    app_id               TEXT NOT NULL REFERENCES tenant_app (app_id),
    org_id               TEXT NOT NULL REFERENCES tenant_org (org_id),
    display_name         TEXT NOT NULL,
    isolation_tier       TEXT NOT NULL CHECK (isolation_tier IN ('S', 'P', 'G')),
    status               TEXT NOT NULL,
    parent_tenant_id     TEXT REFERENCES tenant_tenant (tenant_id),
    root_tenant_id       TEXT NOT NULL,
    reseller_id          TEXT,
    admin_pool_index     INTEGER NOT NULL DEFAULT 0,
    app_pool_index       TEXT NOT NULL,
    region               TEXT,
    brand_domain         TEXT,
    module_subscriptions TEXT NOT NULL DEFAULT '[]',
    created_at           TEXT NOT NULL
);

CREATE TABLE identity_app_identity (
    app_identity_id TEXT PRIMARY KEY,
    person_id       TEXT NOT NULL REFERENCES identity_person (person_id),
    app_id          TEXT NOT NULL REFERENCES tenant_app (app_id),
    created_at      TEXT NOT NULL,
    UNIQUE (person_id, app_id)
);

CREATE TABLE profile_band (
    band_id         TEXT PRIMARY KEY,
    app_identity_id TEXT NOT NULL REFERENCES identity_app_identity (app_identity_id),
    band_kind       TEXT NOT NULL CHECK (band_kind IN ('profile', 'preference', 'notification_routing')),
    fields_envelope BLOB NOT NULL,     -- under the person's key
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    UNIQUE (app_identity_id, band_kind)
);

CREATE TABLE tenant_role_template (
    role_template_id        TEXT PRIMARY KEY,
    tenant_id               TEXT REFERENCES tenant_tenant (tenant_id),
    tenant_key              TEXT NOT NULL,  -- tenant_id, or '' for the platform default
    app_id                  TEXT NOT NULL REFERENCES tenant_app (app_id),
    name                    TEXT NOT NULL,
    parent_role_template_id TEXT REFERENCES tenant_role_template (role_template_id),
    permissions             TEXT NOT NULL,
    created_at              TEXT NOT NULL,
    UNIQUE (tenant_key, app_id, name)
);

CREATE TABLE tenant_membership (
    membership_id    TEXT PRIMARY KEY,
    person_id        TEXT NOT NULL REFERENCES identity_person (person_id),
    tenant_id        TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    bu_id            TEXT,
    role_template_id TEXT REFERENCES tenant_role_template (role_template_id),
    status           TEXT NOT NULL,
    joined_at        TEXT NOT NULL,
    UNIQUE (person_id, tenant_id)
);

CREATE TABLE persona_persona (
    persona_id              TEXT PRIMARY KEY,
    tenant_id               TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    membership_id           TEXT REFERENCES tenant_membership (membership_id),
    kind                    TEXT NOT NULL,
    primary_role_template_id TEXT REFERENCES tenant_role_template (role_template_id),
    data_key_id             TEXT NOT NULL REFERENCES crypto_data_key (key_id),
    attributes_envelope     BLOB,      -- under the persona's own key
    status                  TEXT NOT NULL,
    created_at              TEXT NOT NULL,
    shredded_at             TEXT
);
CREATE INDEX persona_persona_membership ON persona_persona (membership_id);

CREATE TABLE persona_role_assignment (
    assignment_id    TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    persona_id       TEXT NOT NULL REFERENCES persona_persona (persona_id),
    role_template_id TEXT NOT NULL REFERENCES tenant_role_template (role_template_id),
    granted_by       TEXT,
    granted_at       TEXT NOT NULL,
    revoked_at       TEXT
);
CREATE INDEX persona_role_assignment_persona ON persona_role_assignment (persona_id);

CREATE TABLE credential_application (
    application_id TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    name           TEXT NOT NULL,
    slug           TEXT NOT NULL,
    description    TEXT,
    environment    TEXT NOT NULL CHECK (environment IN ('live', 'test')),
    status         TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    UNIQUE (tenant_id, slug)
);

CREATE TABLE credential_api_key (
    key_id               TEXT PRIMARY KEY,
    application_id       TEXT NOT NULL REFERENCES credential_application (application_id),
    tenant_id            TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    name                 TEXT NOT NULL,
    prefix               TEXT NOT NULL,
    key_hash             TEXT NOT NULL UNIQUE,  -- SHA-256 hex of the secret
    last4                TEXT NOT NULL,
    scopes               TEXT NOT NULL,
    rate_limit_rpm       INTEGER,
    expires_at           TEXT,
    status               TEXT NOT NULL,
    synthetic_persona_id TEXT NOT NULL REFERENCES persona_persona (persona_id),
    created_at           TEXT NOT NULL,
    rotated_at           TEXT,
    revoked_at           TEXT
);
CREATE INDEX credential_api_key_application ON credential_api_key (application_id);

CREATE TABLE credential_rate_window (
    key_id       TEXT NOT NULL,
    window_start INTEGER NOT NULL,     -- unix minute
    hits         INTEGER NOT NULL,
    PRIMARY KEY (key_id, window_start)
);
