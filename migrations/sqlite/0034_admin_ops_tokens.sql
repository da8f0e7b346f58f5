-- Database operator tokens: only a SHA-256 of the secret is kept.
CREATE TABLE admin_ops_token (
    id          TEXT PRIMARY KEY,
    label       TEXT NOT NULL,
    token_hash  TEXT NOT NULL UNIQUE,
    status      TEXT NOT NULL CHECK (status IN ('active', 'revoked')),
    expires_at  TEXT,
    reason      TEXT,
    created_by  TEXT,
    minted_by   TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    revoked_at  TEXT
);
