-- Never silent (DESIGN.md §6 "Webhooks"): a question prchat cannot answer
-- keeps the one sentence its reply says (refusal), posted once through the
-- outbox; and a notice that is posted once per pull request (an
-- unregistered repository) is claimed here, once across every process.

-- +goose Up
ALTER TABLE webhook_comments ADD COLUMN refusal TEXT NOT NULL DEFAULT '';

CREATE TABLE webhook_notices (
    forge      TEXT        NOT NULL,
    repository TEXT        NOT NULL,
    pr         INTEGER     NOT NULL,
    kind       TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (forge, repository, pr, kind)
);

-- +goose Down
DROP TABLE webhook_notices;
ALTER TABLE webhook_comments DROP COLUMN refusal;
