-- sdk-coverage: for each kind of work of a tenant, its primary persona, its
-- backup and the acceptance window the primary has before the backup's turn.
CREATE TABLE coverage_rule (
    rule_id                    TEXT PRIMARY KEY,
    tenant_id                  TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    subject_kind               TEXT NOT NULL,
    primary_persona_id         TEXT NOT NULL,
    backup_persona_id          TEXT NOT NULL,
    acceptance_window_minutes  INTEGER NOT NULL CHECK (acceptance_window_minutes >= 0),
    created_by                 TEXT NOT NULL,
    created_at                 TEXT NOT NULL,
    updated_at                 TEXT NOT NULL,
    UNIQUE (tenant_id, subject_kind)
);
