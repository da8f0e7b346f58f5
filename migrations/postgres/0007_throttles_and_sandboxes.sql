-- Throttles of the unauthenticated credential routes (login, token
-- exchange, verification email): failures counted per account and per
-- client address, shared by every hub replica. A key is blocked until
-- blocked_until (unix milliseconds) once its failures pass the route's free
-- allowance, for a time that doubles with each further failure up to a cap.

CREATE TABLE auth_throttle (
    throttle_key    TEXT PRIMARY KEY,    -- '<route>:<acct|addr>:<keyed hash or address>'
    failures        BIGINT NOT NULL,
    last_failure_at BIGINT NOT NULL,   -- unix milliseconds
    blocked_until   BIGINT NOT NULL    -- unix milliseconds; 0 when not blocked
);
CREATE INDEX auth_throttle_last_failure ON auth_throttle (last_failure_at);

-- Authentication 10: the keys of a test application act in a sandbox
-- tenant of their own (a child of the application's tenant, on the same
-- app), so a pk_test_ credential never reaches live data.
ALTER TABLE tenant_tenant ADD COLUMN sandbox_of TEXT REFERENCES tenant_tenant (tenant_id);
CREATE UNIQUE INDEX tenant_tenant_sandbox_of ON tenant_tenant (sandbox_of);
