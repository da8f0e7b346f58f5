-- sdk-rebac: relationship tuples between personas of one tenant
-- (subject, relation, object), Zanzibar-style. The key leads with the
-- relation and the subject, so a check walks out of a persona along one
-- relation with one index range per step.
CREATE TABLE rebac_relationship (
    tenant_id           TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    relation            TEXT NOT NULL,
    subject_persona_id  TEXT NOT NULL,
    object_persona_id   TEXT NOT NULL,
    created_by          TEXT NOT NULL,
    created_at          TEXT NOT NULL,
    PRIMARY KEY (tenant_id, relation, subject_persona_id, object_persona_id)
);
