-- The agent CLI sessions of reviews and conversations, as in the Postgres
-- migration of the same number.

-- +goose Up
CREATE TABLE session_files (
    id              INTEGER   PRIMARY KEY AUTOINCREMENT,
    review_id       INTEGER   REFERENCES reviews (id) ON DELETE CASCADE,
    conversation_id TEXT      REFERENCES conversations (id) ON DELETE CASCADE,
    backend         TEXT      NOT NULL,
    session_id      TEXT      NOT NULL,
    cwd             TEXT      NOT NULL DEFAULT '',
    sealed          BLOB      NOT NULL,
    size            INTEGER   NOT NULL CHECK (size >= 0),
    digest          TEXT      NOT NULL,
    updated_at      TIMESTAMP NOT NULL,
    CHECK ((review_id IS NULL) <> (conversation_id IS NULL))
);

CREATE UNIQUE INDEX session_files_review_id_key ON session_files (review_id) WHERE review_id IS NOT NULL;
CREATE UNIQUE INDEX session_files_conversation_id_key ON session_files (conversation_id) WHERE conversation_id IS NOT NULL;

-- +goose Down
DROP TABLE session_files;
