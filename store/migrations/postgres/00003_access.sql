-- API tokens: only the SHA-256 of a token's value is stored.

-- +goose Up
CREATE TABLE api_tokens (
    id           UUID        PRIMARY KEY,
    name         TEXT        NOT NULL,
    scope        TEXT        NOT NULL CHECK (scope IN ('read', 'ask', 'admin')),
    -- a JSON array of owner/name; [] means every repository
    repos        TEXT        NOT NULL DEFAULT '[]',
    hash         BYTEA       NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    last_used_at TIMESTAMPTZ,
    revoked_at   TIMESTAMPTZ,
    CONSTRAINT api_tokens_hash_key UNIQUE (hash)
);

-- +goose Down
DROP TABLE api_tokens;
