-- Dashboard sessions, as in the Postgres migration of the same number.

-- +goose Up
CREATE TABLE dashboard_sessions (
    hash       BLOB      PRIMARY KEY,
    token_id   TEXT      NOT NULL REFERENCES api_tokens (id) ON DELETE CASCADE,
    created_at TIMESTAMP NOT NULL,
    expires_at TIMESTAMP NOT NULL
);
CREATE INDEX dashboard_sessions_expires_at ON dashboard_sessions (expires_at);

-- +goose Down
DROP TABLE dashboard_sessions;
