-- Throttles of the unauthenticated credential routes (login, token
-- exchange, verification email): failures counted per account and per
-- client address, shared by every hub replica. A key is blocked until
-- blocked_until (unix milliseconds) once its failures pass the route's free
-- allowance, for a time that doubles with each further failure up to a cap.

CREATE TABLE auth_throttle (
    throttle_key    TEXT PRIMARY KEY,    -- '<route>:<acct|addr>:<keyed hash or address>'
    failures        INTEGER NOT NULL,
    last_failure_at INTEGER NOT NULL,   -- unix milliseconds
    blocked_until   INTEGER NOT NULL    -- unix milliseconds; 0 when not blocked
);
CREATE INDEX auth_throttle_last_failure ON auth_throttle (last_failure_at);
