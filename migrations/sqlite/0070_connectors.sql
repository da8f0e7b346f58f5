-- sdk-connectors: items connectors sync (one per kind and external id in a
-- tenant), their dead letters (at most one open per item, which the
-- partial unique index keeps) and replays with an idempotency key.
CREATE TABLE connector_sync_item (
    item_id         TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    connector_kind  TEXT NOT NULL,
    external_id     TEXT NOT NULL,
    direction       TEXT NOT NULL CHECK (direction IN ('inbound', 'outbound')),
    payload         TEXT NOT NULL,       -- JSON object
    status          TEXT NOT NULL CHECK (status IN ('synced', 'dead_lettered', 'pending')),
    attempts        INTEGER NOT NULL,
    replays         INTEGER NOT NULL,
    last_error      TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    UNIQUE (tenant_id, connector_kind, external_id)
);
CREATE INDEX connector_sync_item_by_updated ON connector_sync_item (tenant_id, updated_at);
CREATE INDEX connector_sync_item_by_status ON connector_sync_item (tenant_id, status, updated_at);
CREATE INDEX connector_sync_item_by_kind ON connector_sync_item (tenant_id, connector_kind, updated_at);

CREATE TABLE connector_deadletter (
    deadletter_id     TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    item_id           TEXT NOT NULL REFERENCES connector_sync_item (item_id),
    connector_kind    TEXT NOT NULL,
    external_id       TEXT NOT NULL,
    error             TEXT NOT NULL,
    failures          INTEGER NOT NULL,
    status            TEXT NOT NULL CHECK (status IN ('dead_lettered', 'replayed', 'resolved')),
    replay_id         TEXT,
    dead_lettered_at  TEXT NOT NULL,
    replayed_at       TEXT,
    updated_at        TEXT NOT NULL
);
CREATE UNIQUE INDEX connector_deadletter_one_open ON connector_deadletter (item_id) WHERE status = 'dead_lettered';
CREATE INDEX connector_deadletter_by_status ON connector_deadletter (tenant_id, status, dead_lettered_at);
CREATE INDEX connector_deadletter_by_kind ON connector_deadletter (tenant_id, status, connector_kind, dead_lettered_at);
CREATE INDEX connector_deadletter_by_replay ON connector_deadletter (tenant_id, replay_id);

CREATE TABLE connector_replay (
    replay_id        TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    idempotency_key  TEXT NOT NULL,
    request          TEXT NOT NULL,      -- JSON: what was asked
    result           TEXT NOT NULL,      -- JSON: what was answered
    created_at       TEXT NOT NULL,
    UNIQUE (tenant_id, idempotency_key)
);
