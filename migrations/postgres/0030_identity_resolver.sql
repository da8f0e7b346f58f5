-- sdk-identity-resolver: proposals that two persons are one human, the
-- steward review steps that decide them, and the merges approved ones
-- make: a recorded, reversible equivalence (nothing of either person
-- moves; the absorbed one's status is `merged` while it lasts).
CREATE TABLE identity_link (
    link_id            TEXT PRIMARY KEY,
    tenant_id          TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    person_id_a        TEXT NOT NULL REFERENCES identity_person (person_id),
    person_id_b        TEXT NOT NULL REFERENCES identity_person (person_id),
    pair_key           TEXT NOT NULL,     -- the two person ids, the smaller first
    evidence           TEXT NOT NULL,
    confidence         DOUBLE PRECISION,
    status             TEXT NOT NULL CHECK (status IN ('proposed', 'in_review', 'merged', 'rejected', 'unmerged')),
    survivor_person_id TEXT,              -- person_id_a while merged
    proposed_by        TEXT NOT NULL,
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL,
    decided_at         TEXT,
    unmerged_at        TEXT
);
-- One live link (open or merged) a pair, across tenants: a merge is global.
CREATE UNIQUE INDEX identity_link_live_pair ON identity_link (pair_key) WHERE status IN ('proposed', 'in_review', 'merged');

CREATE TABLE identity_link_step (
    step_id             TEXT PRIMARY KEY,
    link_id             TEXT NOT NULL REFERENCES identity_link (link_id),
    approver_persona_id TEXT NOT NULL REFERENCES persona_persona (persona_id),
    status              TEXT NOT NULL CHECK (status IN ('open', 'approved', 'rejected')),
    acting_persona_id   TEXT,
    opened_by           TEXT NOT NULL,
    opened_at           TEXT NOT NULL,
    decided_at          TEXT
);
CREATE INDEX identity_link_step_by_link ON identity_link_step (link_id, opened_at);

CREATE TABLE identity_person_merge (
    merge_id              TEXT PRIMARY KEY,
    link_id               TEXT NOT NULL UNIQUE REFERENCES identity_link (link_id),
    survivor_person_id    TEXT NOT NULL REFERENCES identity_person (person_id),
    absorbed_person_id    TEXT NOT NULL REFERENCES identity_person (person_id),
    absorbed_prior_status TEXT NOT NULL,  -- restored by the unmerge
    merged_at             TEXT NOT NULL,
    unmerged_at           TEXT
);
-- A person is absorbed by one live merge at most.
CREATE UNIQUE INDEX identity_person_merge_live_absorbed ON identity_person_merge (absorbed_person_id) WHERE unmerged_at IS NULL;
CREATE INDEX identity_person_merge_live_survivor ON identity_person_merge (survivor_person_id) WHERE unmerged_at IS NULL;
