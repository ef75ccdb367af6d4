-- Provider settings, encrypted provider keys, and the message histories of
-- the openai backend's sessions (so any worker can fork or resume them).

-- +goose Up
CREATE TABLE settings (
    name       TEXT        PRIMARY KEY,
    value      TEXT        NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE provider_keys (
    provider   TEXT        PRIMARY KEY,
    sealed     BYTEA       NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE agent_sessions (
    id         TEXT        PRIMARY KEY,
    backend    TEXT        NOT NULL,
    history    TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE agent_sessions;
DROP TABLE provider_keys;
DROP TABLE settings;
