-- A finish's update of its conversation (its session and updated_at) is a
-- HOT update: the conversation's new version stays on its page and neither
-- of its indexes gets an entry for it. No index covers a column the finish
-- sets, but a conversation's page was full by the time its first turn
-- finished (the conversations asked after it filled it), so its new
-- version went to another page with an entry in both indexes, the primary
-- key's at a random place. A fillfactor below 100 leaves each page room
-- for its conversations' next versions.

-- +goose Up
ALTER TABLE conversations SET (fillfactor = 80);

-- +goose Down
ALTER TABLE conversations RESET (fillfactor);
