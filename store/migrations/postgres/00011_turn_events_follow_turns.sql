-- A turn's events go with their turn by a trigger, not a foreign key.
--
-- The foreign key checked every event row as it was inserted: one nested
-- query per row (SELECT ... FROM turns ... FOR KEY SHARE), which also
-- locked the turn's row version once more and wrote that lock to the
-- write-ahead log. With the bench's four events a turn, those checks were
-- four of the six statements Postgres ran per turn (pg_stat_statements with
-- track = all), and an event append or finish statement took about 25%
-- longer with the key than without it (pgbench, one client).
--
-- What the key guaranteed holds by construction: every insert of events
-- (AppendEvents, FinishTurn, SettleTurn) is made in the statement or the
-- transaction that first updated the turn's row, fenced, and inserts
-- nothing when that update matched no row. That update locks the row until
-- commit, so a turn cannot be deleted between the update and the insert: a
-- delete waits for the commit, and a delete that went first leaves the
-- update nothing to match. What ON DELETE CASCADE did, the trigger does: a
-- statement that deletes turns (DeleteConversation, or a cascade from a
-- deleted review or repository) deletes their events, in a query of its own
-- that sees, under read committed, the events of any insert it waited for.
--
-- Both steps change only the catalog: no table is rewritten or scanned, so
-- the migration holds its locks on turns and turn_events for moments.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION turn_events_follow_turns() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    DELETE FROM turn_events e USING gone WHERE e.turn_id = gone.id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER turns_delete_events AFTER DELETE ON turns
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION turn_events_follow_turns();
ALTER TABLE turn_events DROP CONSTRAINT turn_events_turn_id_fkey;

-- +goose Down
DELETE FROM turn_events e WHERE NOT EXISTS (SELECT 1 FROM turns t WHERE t.id = e.turn_id);
ALTER TABLE turn_events ADD CONSTRAINT turn_events_turn_id_fkey
    FOREIGN KEY (turn_id) REFERENCES turns (id) ON DELETE CASCADE;
DROP TRIGGER turns_delete_events ON turns;
DROP FUNCTION turn_events_follow_turns();
