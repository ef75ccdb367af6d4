-- The tables of prchat's data (DESIGN.md §3), as in the Postgres migration of
-- the same number. Times are TIMESTAMP columns holding UTC text, which the
-- driver reads back as time.Time and which sorts in time order.

-- +goose Up
CREATE TABLE repositories (
    id         INTEGER   PRIMARY KEY AUTOINCREMENT,
    name       TEXT      NOT NULL,
    clone_path TEXT      NOT NULL DEFAULT '',
    clone_url  TEXT      NOT NULL DEFAULT '',
    created_at TIMESTAMP NOT NULL,
    CONSTRAINT repositories_name_key UNIQUE (name)
);

CREATE TABLE reviews (
    id            INTEGER   PRIMARY KEY AUTOINCREMENT,
    repository_id INTEGER   NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    pr            INTEGER   NOT NULL,
    version       INTEGER   NOT NULL CHECK (version > 0),
    head_sha      TEXT      NOT NULL DEFAULT '',
    base_sha      TEXT      NOT NULL DEFAULT '',
    backend       TEXT      NOT NULL DEFAULT '',
    model         TEXT      NOT NULL DEFAULT '',
    session_id    TEXT      NOT NULL DEFAULT '',
    session_host  TEXT      NOT NULL DEFAULT '',
    run_dir       TEXT      NOT NULL DEFAULT '',
    markdown      TEXT      NOT NULL DEFAULT '',
    sections      TEXT,
    created_at    TIMESTAMP NOT NULL,
    CONSTRAINT reviews_repository_id_pr_version_key UNIQUE (repository_id, pr, version)
);

CREATE TABLE conversations (
    id            TEXT      PRIMARY KEY,
    review_id     INTEGER   NOT NULL REFERENCES reviews (id) ON DELETE CASCADE,
    title         TEXT      NOT NULL DEFAULT '',
    backend       TEXT      NOT NULL DEFAULT '',
    model         TEXT      NOT NULL DEFAULT '',
    session       TEXT      NOT NULL DEFAULT '',
    seeded_reason TEXT      NOT NULL DEFAULT '',
    session_id    TEXT      NOT NULL DEFAULT '',
    session_host  TEXT      NOT NULL DEFAULT '',
    run_dir       TEXT      NOT NULL DEFAULT '',
    created_at    TIMESTAMP NOT NULL,
    updated_at    TIMESTAMP NOT NULL
);

CREATE INDEX conversations_review_id_created_at_idx ON conversations (review_id, created_at DESC, id DESC);

CREATE TABLE turns (
    id              TEXT      PRIMARY KEY,
    conversation_id TEXT      NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    number          INTEGER   NOT NULL CHECK (number > 0),
    state           TEXT      NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'interrupted')),
    question        TEXT      NOT NULL,
    focus           TEXT,
    answer          TEXT,
    note            TEXT      NOT NULL DEFAULT '',
    reason          TEXT      NOT NULL DEFAULT '',
    provider        TEXT      NOT NULL DEFAULT '',
    queue           TEXT      NOT NULL DEFAULT '',
    runner          TEXT      NOT NULL DEFAULT '',
    fence           INTEGER   NOT NULL DEFAULT 0,
    last_seq        INTEGER   NOT NULL DEFAULT 0,
    backend         TEXT      NOT NULL DEFAULT '',
    model           TEXT      NOT NULL DEFAULT '',
    session         TEXT      NOT NULL DEFAULT '',
    input_tokens    INTEGER   NOT NULL DEFAULT 0,
    output_tokens   INTEGER   NOT NULL DEFAULT 0,
    calls           INTEGER   NOT NULL DEFAULT 0,
    repairs         INTEGER   NOT NULL DEFAULT 0,
    cost_usd        REAL,
    cost_reason     TEXT      NOT NULL DEFAULT '',
    created_at      TIMESTAMP NOT NULL,
    started_at      TIMESTAMP,
    finished_at     TIMESTAMP,
    CONSTRAINT turns_conversation_id_number_key UNIQUE (conversation_id, number)
);

-- The busy rule: at most one pending (queued or running) turn per conversation.
CREATE UNIQUE INDEX turns_one_pending_idx ON turns (conversation_id) WHERE state IN ('queued', 'running');

-- PendingTurns, oldest first.
CREATE INDEX turns_pending_created_at_idx ON turns (created_at, id) WHERE state IN ('queued', 'running');

CREATE TABLE turn_events (
    turn_id    TEXT      NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    seq        INTEGER   NOT NULL CHECK (seq > 0),
    type       TEXT      NOT NULL,
    data       TEXT      NOT NULL,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (turn_id, seq)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE turn_events;
DROP TABLE turns;
DROP TABLE conversations;
DROP TABLE reviews;
DROP TABLE repositories;
