-- sdk-trace: signed exports of a trace (an agent-run trace with the audit
-- entries that evidence it). The artifact lives in the object store under
-- `artifact_key`; its HMAC-SHA256 is made with the tenant's trace key, a
-- data key wrapped by the master key, which the tenant may fetch to verify.
CREATE TABLE trace_key (
    tenant_id   TEXT PRIMARY KEY REFERENCES tenant_tenant (tenant_id),
    key_id      TEXT NOT NULL REFERENCES crypto_data_key (key_id),
    created_at  TEXT NOT NULL
);

CREATE TABLE trace_export (
    export_id      TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    trace_id       TEXT NOT NULL,
    format         TEXT NOT NULL CHECK (format IN ('json')),
    status         TEXT NOT NULL CHECK (status IN ('requested', 'ready', 'failed')),
    artifact_key   TEXT,
    sha256         TEXT,
    signature_hex  TEXT,
    key_id         TEXT,
    size_bytes     INTEGER,
    requested_by   TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    ready_at       TEXT
);
CREATE INDEX trace_export_by_trace ON trace_export (tenant_id, trace_id, created_at);

-- The agent runtime's runs of one trace (what an export reads).
CREATE INDEX agent_run_trace ON agent_run (tenant_id, trace_id, created_at);
