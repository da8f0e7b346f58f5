-- connector-<provider>-voice: call legs a voice provider reports through
-- the signed inbound webhook of kind `voice`, one row per (tenant,
-- provider, leg): a repeat of a leg updates its status and ending.
CREATE TABLE voice_call_leg (
    call_leg_id       TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    provider          TEXT NOT NULL,
    call_id           TEXT NOT NULL,
    leg_id            TEXT NOT NULL,
    direction         TEXT NOT NULL,
    status            TEXT NOT NULL,
    is_voicemail      BIGINT NOT NULL,
    from_number       TEXT NOT NULL,
    to_number         TEXT NOT NULL,
    started_at        TEXT NOT NULL,
    ended_at          TEXT,
    duration_seconds  BIGINT,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL
);
CREATE UNIQUE INDEX voice_call_leg_leg ON voice_call_leg (tenant_id, provider, leg_id);
CREATE INDEX voice_call_leg_newest ON voice_call_leg (tenant_id, started_at, call_leg_id);
CREATE INDEX voice_call_leg_status ON voice_call_leg (tenant_id, status, started_at, call_leg_id);
CREATE INDEX voice_call_leg_direction ON voice_call_leg (tenant_id, direction, started_at, call_leg_id);
CREATE INDEX voice_call_leg_voicemail ON voice_call_leg (tenant_id, is_voicemail, started_at, call_leg_id);
