-- Operator lineage backfill: the audit entries of the lineage-tracked
-- producers, copied into lineage records (their payload digest survives a
-- shredded payload), and a checkpoint per (pool_index, event_type) that
-- each non-dry run advances. The partial index serves the backfill's scan
-- without costing any other append.
CREATE TABLE lineage_record (
    entry_id       TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL,
    pool_index     INTEGER NOT NULL,
    event_type     TEXT NOT NULL,
    occurred_at    TEXT NOT NULL,
    actor_kind     TEXT NOT NULL,
    actor_id       TEXT NOT NULL,
    payload_digest TEXT NOT NULL,
    backfilled_at  TEXT NOT NULL
);

CREATE TABLE lineage_checkpoint (
    pool_index       INTEGER NOT NULL,
    event_type       TEXT NOT NULL,
    last_occurred_at TEXT NOT NULL,
    last_entry_id    TEXT NOT NULL,
    processed        BIGINT NOT NULL,
    updated_at       TEXT NOT NULL,
    PRIMARY KEY (pool_index, event_type)
);

CREATE INDEX audit_entry_lineage ON audit_entry (pool_index, event_type, occurred_at, entry_id)
    WHERE event_type IN ('parsing.field.extracted.v1', 'recommendation.suggestion.generated.v1', 'semantic.intent.planned.v1', 'ai-gateway.complete.v1');
