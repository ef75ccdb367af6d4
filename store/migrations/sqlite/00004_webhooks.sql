-- Questions from PR comments (webhooks), as in the Postgres migration of the
-- same number.

-- +goose Up
CREATE TABLE webhook_comments (
    id              TEXT        PRIMARY KEY,
    forge           TEXT        NOT NULL,
    delivery_id     TEXT        NOT NULL,
    repository      TEXT        NOT NULL,
    pr              INTEGER     NOT NULL,
    comment_id      INTEGER     NOT NULL,
    thread          TEXT        NOT NULL DEFAULT '',
    discussion      TEXT        NOT NULL DEFAULT '',
    question        TEXT        NOT NULL,
    focus           TEXT,
    clone_url       TEXT        NOT NULL DEFAULT '',
    html_url        TEXT        NOT NULL DEFAULT '',
    installation    INTEGER     NOT NULL DEFAULT 0,
    head_sha        TEXT        NOT NULL DEFAULT '',
    base_sha        TEXT        NOT NULL DEFAULT '',
    turn_id         TEXT        NOT NULL,
    conversation_id TEXT        NOT NULL DEFAULT '',
    turn_number     INTEGER     NOT NULL DEFAULT 0,
    state           TEXT        NOT NULL CHECK (state IN ('received', 'waiting', 'queued', 'posted', 'failed')),
    reacted         INTEGER     NOT NULL DEFAULT 0,
    post_tried      INTEGER     NOT NULL DEFAULT 0,
    reply_id        TEXT        NOT NULL DEFAULT '',
    attempts        INTEGER     NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMP   NOT NULL,
    error           TEXT        NOT NULL DEFAULT '',
    version         INTEGER     NOT NULL DEFAULT 1,
    created_at      TIMESTAMP   NOT NULL,
    updated_at      TIMESTAMP   NOT NULL,
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
    created_at      TIMESTAMP   NOT NULL,
    PRIMARY KEY (forge, repository, pr, thread)
);

-- +goose Down
DROP TABLE webhook_threads;
DROP TABLE webhook_comments;
