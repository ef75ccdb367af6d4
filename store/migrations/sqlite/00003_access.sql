-- API tokens, as in the Postgres migration of the same number.

-- +goose Up
CREATE TABLE api_tokens (
    id           TEXT      PRIMARY KEY,
    name         TEXT      NOT NULL,
    scope        TEXT      NOT NULL CHECK (scope IN ('read', 'ask', 'admin')),
    repos        TEXT      NOT NULL DEFAULT '[]',
    hash         BLOB      NOT NULL UNIQUE,
    created_at   TIMESTAMP NOT NULL,
    last_used_at TIMESTAMP,
    revoked_at   TIMESTAMP
);

-- +goose Down
DROP TABLE api_tokens;
