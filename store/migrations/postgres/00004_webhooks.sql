-- Questions from PR comments (webhooks): each received comment once, with
-- the turn it became and the state of its reply (the inbox and the outbox in
-- one row), and the conversation of each review thread.

-- +goose Up
CREATE TABLE webhook_comments (
    id              TEXT        PRIMARY KEY,
    forge           TEXT        NOT NULL,
    delivery_id     TEXT        NOT NULL,
    repository      TEXT        NOT NULL,
    pr              INTEGER     NOT NULL,
    comment_id      BIGINT      NOT NULL,
    thread          TEXT        NOT NULL DEFAULT '',
    discussion      TEXT        NOT NULL DEFAULT '',
    question        TEXT        NOT NULL,
    focus           TEXT,
    clone_url       TEXT        NOT NULL DEFAULT '',
    html_url        TEXT        NOT NULL DEFAULT '',
    installation    BIGINT      NOT NULL DEFAULT 0,
    head_sha        TEXT        NOT NULL DEFAULT '',
    base_sha        TEXT        NOT NULL DEFAULT '',
    turn_id         TEXT        NOT NULL,
    conversation_id TEXT        NOT NULL DEFAULT '',
    turn_number     INTEGER     NOT NULL DEFAULT 0,
    state           TEXT        NOT NULL CHECK (state IN ('received', 'waiting', 'queued', 'posted', 'failed')),
    reacted         BOOLEAN     NOT NULL DEFAULT FALSE,
    post_tried      BOOLEAN     NOT NULL DEFAULT FALSE,
    reply_id        TEXT        NOT NULL DEFAULT '',
    attempts        INTEGER     NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ NOT NULL,
    error           TEXT        NOT NULL DEFAULT '',
    version         BIGINT      NOT NULL DEFAULT 1,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    CONSTRAINT webhook_comments_delivery_key UNIQUE (forge, delivery_id),
    CONSTRAINT webhook_comments_comment_key UNIQUE (forge, repository, comment_id)
);

CREATE INDEX webhook_comments_due_idx ON webhook_comments (next_attempt_at)
    WHERE state IN ('received', 'waiting', 'queued');

CREATE TABLE webhook_threads (
    forge           TEXT        NOT NULL,
    repository      TEXT        NOT NULL,
    pr              INTEGER     NOT NULL,
    thread          TEXT        NOT NULL,
    conversation_id TEXT        NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (forge, repository, pr, thread)
);

-- +goose Down
DROP TABLE webhook_threads;
DROP TABLE webhook_comments;
