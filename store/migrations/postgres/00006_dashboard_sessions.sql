-- Dashboard sessions: the cookie holds a random session id, of which only
-- the SHA-256 is stored; a session ends at expires_at, on sign-out, or
-- when its token is revoked or deleted.

-- +goose Up
CREATE TABLE dashboard_sessions (
    hash       BYTEA       PRIMARY KEY,
    token_id   UUID        NOT NULL REFERENCES api_tokens (id) ON DELETE CASCADE,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX dashboard_sessions_expires_at ON dashboard_sessions (expires_at);

-- +goose Down
DROP TABLE dashboard_sessions;
