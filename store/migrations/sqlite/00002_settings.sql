-- Provider settings, encrypted provider keys, and the message histories of
-- the openai backend's sessions, as in the Postgres migration of the same
-- number.

-- +goose Up
CREATE TABLE settings (
    name       TEXT      PRIMARY KEY,
    value      TEXT      NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

CREATE TABLE provider_keys (
    provider   TEXT      PRIMARY KEY,
    sealed     BLOB      NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

CREATE TABLE agent_sessions (
    id         TEXT      PRIMARY KEY,
    backend    TEXT      NOT NULL,
    history    TEXT      NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

-- +goose Down
DROP TABLE agent_sessions;
DROP TABLE provider_keys;
DROP TABLE settings;
