-- Chains get an integer key: audit_entry is unique on (chain_id, seq)
-- instead of (tenant_id, pool_index, seq). Every append writes into its
-- chain's end of that index; with a short integer key, the pages a batch
-- touches there are fewer and split less, whatever the number of chains.
-- Entries reference their chain, so a chain's head cannot be deleted
-- while it has entries.

ALTER TABLE audit_chain_head RENAME TO audit_chain_head_old;
CREATE TABLE audit_chain_head (
    chain_id   INTEGER PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    pool_index INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    head_hash  BLOB NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (tenant_id, pool_index)
);
INSERT INTO audit_chain_head (tenant_id, pool_index, seq, head_hash, updated_at)
    SELECT tenant_id, pool_index, seq, head_hash, updated_at FROM audit_chain_head_old ORDER BY tenant_id, pool_index;
-- Entries whose head is gone get one that fails their verification (a
-- hash of zeros at their last seq): a chain tampered with stays visible.
INSERT INTO audit_chain_head (tenant_id, pool_index, seq, head_hash, updated_at)
    SELECT e.tenant_id, e.pool_index, MAX(e.seq), zeroblob(32), strftime('%Y-%m-%dT%H:%M:%fZ', 'now') FROM audit_entry e
    WHERE NOT EXISTS (SELECT 1 FROM audit_chain_head h WHERE h.tenant_id = e.tenant_id AND h.pool_index = e.pool_index)
    GROUP BY e.tenant_id, e.pool_index;
DROP TABLE audit_chain_head_old;

CREATE TABLE audit_entry_new (
    entry_id        TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    pool_index      INTEGER NOT NULL,
    chain_id        INTEGER NOT NULL REFERENCES audit_chain_head (chain_id),
    seq             INTEGER NOT NULL,
    event_type      TEXT NOT NULL,
    actor_kind      TEXT NOT NULL,
    actor_id        TEXT NOT NULL,
    actor_chain     TEXT,                -- JSON provenance (an agent run's chain)
    occurred_at     TEXT NOT NULL,
    retention_class TEXT NOT NULL,
    payload         TEXT,                -- JSON; NULL once shredded
    payload_digest  BLOB NOT NULL,       -- SHA-256 of the payload text, kept after shredding
    shredded_at     TEXT,
    prev_hash       BLOB NOT NULL,
    entry_hash      BLOB NOT NULL,
    UNIQUE (chain_id, seq)
);
INSERT INTO audit_entry_new (entry_id, tenant_id, pool_index, chain_id, seq, event_type, actor_kind, actor_id, actor_chain,
                             occurred_at, retention_class, payload, payload_digest, shredded_at, prev_hash, entry_hash)
    SELECT e.entry_id, e.tenant_id, e.pool_index, h.chain_id, e.seq, e.event_type, e.actor_kind, e.actor_id, e.actor_chain,
           e.occurred_at, e.retention_class, e.payload, e.payload_digest, e.shredded_at, e.prev_hash, e.entry_hash
    FROM audit_entry e JOIN audit_chain_head h ON h.tenant_id = e.tenant_id AND h.pool_index = e.pool_index
    ORDER BY e.rowid;
DROP TABLE audit_entry;
ALTER TABLE audit_entry_new RENAME TO audit_entry;
CREATE INDEX audit_entry_occurred ON audit_entry (occurred_at);
-- Only unshredded rows: the sweeper never rescans what it has shredded.
CREATE INDEX audit_entry_retention ON audit_entry (retention_class, occurred_at) WHERE payload IS NOT NULL;
