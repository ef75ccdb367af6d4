-- Webhook refusals and once-per-PR notices, as in the Postgres migration of
-- the same number.

-- +goose Up
ALTER TABLE webhook_comments ADD COLUMN refusal TEXT NOT NULL DEFAULT '';

CREATE TABLE webhook_notices (
    forge      TEXT      NOT NULL,
    repository TEXT      NOT NULL,
    pr         INTEGER   NOT NULL,
    kind       TEXT      NOT NULL,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (forge, repository, pr, kind)
);

-- +goose Down
DROP TABLE webhook_notices;
ALTER TABLE webhook_comments DROP COLUMN refusal;
