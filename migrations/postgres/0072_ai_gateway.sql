-- sdk-ai-gateway: the tenant's model routes (an OpenAI-compatible
-- provider, a model, and the provider credential as a vault envelope bound
-- to the tenant and its secret reference: never in clear), and one record
-- per completion (the redactions made, the usage; not the prompt).
CREATE TABLE ai_gateway_route (
    route_id               TEXT PRIMARY KEY,
    tenant_id              TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    name                   TEXT NOT NULL,
    provider_base_url      TEXT NOT NULL,
    model                  TEXT NOT NULL,
    credential_ref         TEXT,
    credential_ciphertext  TEXT,
    credential_wrapped_dek TEXT,
    credential_iv          TEXT,
    credential_tag         TEXT,
    timeout_ms             INTEGER NOT NULL,
    max_attempts           INTEGER NOT NULL,
    created_by             TEXT NOT NULL,
    created_at             TEXT NOT NULL,
    updated_at             TEXT NOT NULL,
    UNIQUE (tenant_id, name)
);
CREATE INDEX ai_gateway_route_model ON ai_gateway_route (tenant_id, model, updated_at);

CREATE TABLE ai_gateway_completion (
    completion_id      TEXT PRIMARY KEY,
    tenant_id          TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    route_id           TEXT NOT NULL REFERENCES ai_gateway_route (route_id),
    model              TEXT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN ('completed', 'failed')),
    attempts           INTEGER NOT NULL,
    redactions         TEXT NOT NULL,        -- JSON: [{ kind, message_index }]
    finish_reason      TEXT,
    prompt_tokens      INTEGER,
    completion_tokens  INTEGER,
    total_tokens       INTEGER,
    latency_ms         INTEGER NOT NULL,
    error              TEXT,
    created_by         TEXT NOT NULL,
    created_at         TEXT NOT NULL
);
CREATE INDEX ai_gateway_completion_tenant ON ai_gateway_completion (tenant_id, created_at);
