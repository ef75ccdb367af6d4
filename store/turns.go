package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/prchat/prchat/chat"
)

const (
	// maxClaimAttempts bounds ClaimTurn's compare-and-swap loop. Each lost
	// attempt means another claim or a settle won, so the loop ends as the
	// contenders are served; the bound is far above real contention.
	maxClaimAttempts = 100
	// eventBatch is the most events one INSERT carries, well below either
	// database's limit on statement parameters.
	eventBatch = 1000
)

// pending is the SQL condition of a turn that is queued or running. Its
// finished_at term is the one the partial indexes of Postgres name, so
// that the planner can use them (a check there keeps the two terms the
// same; see migration 00009), its state term the one SQLite's do.
const pending = `state IN ('queued', 'running') AND finished_at IS NULL`

// pendingByID is pending in a statement that finds its turn by id: the
// state term alone. With the finished_at term as well, Postgres' planner
// may take the partial index of the pending turns, (created_at, id), for
// the id, its second column, and read that index from end to end instead
// of looking the id up in the primary key. A claim then cost in proportion
// to the backlog: 124 buffers a claim on average while workers drained
// 15,000 queued turns, 4 by the key. The check of migration 00009 keeps
// the two terms the same, so the state term decides alone.
const pendingByID = `state IN ('queued', 'running')`

// lastSeqAtLeast sets last_seq to the larger of itself and a parameter given
// twice.
const lastSeqAtLeast = `last_seq = CASE WHEN last_seq < ? THEN ? ELSE last_seq END`

// errFenced is how a transaction reports that its fenced update matched no
// row; the caller tells ErrFenced from a missing turn outside it.
var errFenced = errors.New("fenced")

// Turn returns turn number of a conversation.
func (s *Store) Turn(ctx context.Context, conversationID string, number int) (chat.Turn, error) {
	var row turnRow
	err := s.read.WithContext(ctx).Where("conversation_id = ? AND number = ?", conversationID, number).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return chat.Turn{}, chat.Errorf(chat.CodeNotFound, "turn %d of conversation %s not found", number, conversationID)
	}
	if err != nil {
		return chat.Turn{}, fmt.Errorf("get turn %d of conversation %s: %w", number, conversationID, err)
	}
	return row.chat()
}

// TurnByID returns the turn with id.
func (s *Store) TurnByID(ctx context.Context, id string) (chat.Turn, error) {
	var row turnRow
	err := s.read.WithContext(ctx).Where("id = ?", id).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return chat.Turn{}, chat.Errorf(chat.CodeNotFound, "turn %s not found", id)
	}
	if err != nil {
		return chat.Turn{}, fmt.Errorf("get turn %s: %w", id, err)
	}
	return row.chat()
}

// PendingTurns lists turns in state queued or running, oldest first, each
// with the columns of pendingColumns only (see chat.TurnStore).
func (s *Store) PendingTurns(ctx context.Context) ([]chat.Turn, error) {
	if s.dialect == dialectPostgres {
		return s.pendingTurnsPG(ctx)
	}
	var rows []turnRow
	if err := s.read.WithContext(ctx).Select(pendingColumns).Where(pending).Order("created_at, id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list pending turns: %w", err)
	}
	return turnsFromRows(rows)
}

// pendingColumns are the columns PendingTurns reads: what the reconciler
// decides and enqueues by. Not the question, focus, answer, note or usage:
// a pass reads every pending turn, and decoding each turn's focus was most
// of a pass's allocations (BenchmarkPendingTurns, 10,000 queued turns:
// 130,000 → 30,000).
const pendingColumns = `id, conversation_id, number, state, provider, queue, runner, fence, last_seq, backend, created_at, started_at`

// pendingTurnsPG is PendingTurns on Postgres, read with pgx into the
// turns directly: the reconciler reads every pending turn on every pass,
// and through gorm a backlog of 10,000 cost a worker 0.15 s of CPU a pass
// (growing a slice of rows by reflection, scanning each through
// database/sql).
func (s *Store) pendingTurnsPG(ctx context.Context) ([]chat.Turn, error) {
	var turns []chat.Turn
	err := withPgx(ctx, s.pools[0], func(c *pgx.Conn) error {
		rows, err := c.Query(ctx, `SELECT `+pendingColumns+` FROM turns WHERE `+pending+` ORDER BY created_at, id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		var r turnRow
		var targets []any // r's fields, by the result's columns
		for rows.Next() {
			if targets == nil {
				targets = namedTargets(rows.FieldDescriptions(), []any{&r}, []string{""})
			}
			r = turnRow{} // each row's nullable columns in values of their own
			if err := rows.Scan(targets...); err != nil {
				return err
			}
			t, err := r.chat()
			if err != nil {
				return err
			}
			turns = append(turns, t)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list pending turns: %w", unavailable(err))
	}
	return turns, nil
}

// SetTurnQueue records the host queue a turn's job went to ("" = shared).
func (s *Store) SetTurnQueue(ctx context.Context, id, queue string) error {
	res := s.write.WithContext(ctx).Exec(`UPDATE turns SET queue = ? WHERE id = ?`, queue, id)
	if res.Error != nil {
		return fmt.Errorf("set queue of turn %s: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return chat.Errorf(chat.CodeNotFound, "turn %s not found", id)
	}
	return nil
}

// ClaimTurn marks a queued or running turn running for runner with a
// fresh fencing token (the old one plus one) and returns it. A queued turn is
// claimed at once; for a running one, allow is asked with the turn as
// stored and may refuse (false) a takeover of a turn another live run
// holds; then ClaimTurn returns ErrFenced. A turn in a
// final state returns ErrSettled. StartedAt keeps the time of the first
// claim.
func (s *Store) ClaimTurn(ctx context.Context, id, runner string, allow func(chat.Turn) bool) (chat.Turn, error) {
	t, _, err := s.claimTurn(ctx, id, runner, allow, false)
	return t, err
}

// ClaimTurnWithConversation is ClaimTurn that also returns the head of the
// turn's conversation (as ConversationHead has it), on Postgres read by the
// claim's own statement: a run needs both, and one round trip is cheaper
// than two.
func (s *Store) ClaimTurnWithConversation(ctx context.Context, id, runner string, allow func(chat.Turn) bool) (chat.Turn, chat.Conversation, error) {
	return s.claimTurn(ctx, id, runner, allow, true)
}

func (s *Store) claimTurn(ctx context.Context, id, runner string, allow func(chat.Turn) bool, withConv bool) (chat.Turn, chat.Conversation, error) {
	if allow == nil {
		// Nothing to decide on the turn as read: one update does it.
		t, c, ok, err := s.claim(ctx, id, runner, withConv, "")
		if ok || err != nil {
			return t, c, err
		}
		// Not pending: settled or missing, for good.
		if _, err := s.TurnByID(ctx, id); err != nil {
			return chat.Turn{}, chat.Conversation{}, err
		}
		return chat.Turn{}, chat.Conversation{}, fmt.Errorf("claim turn %s: %w", id, chat.ErrSettled)
	}
	// A queued turn is nobody's yet: one update claims it without asking.
	if t, c, ok, err := s.claim(ctx, id, runner, withConv, ` AND state = 'queued'`); ok || err != nil {
		return t, c, err
	}
	for range maxClaimAttempts {
		t, err := s.TurnByID(ctx, id)
		if err != nil {
			return chat.Turn{}, chat.Conversation{}, err
		}
		if t.State.Final() {
			return chat.Turn{}, chat.Conversation{}, fmt.Errorf("claim turn %s: %w", id, chat.ErrSettled)
		}
		if !allow(t) {
			return chat.Turn{}, chat.Conversation{}, fmt.Errorf("claim turn %s held by %s: %w", id, t.Runner, chat.ErrFenced)
		}
		t, c, ok, err := s.claim(ctx, id, runner, withConv, ` AND fence = ?`, t.Fence)
		if ok || err != nil {
			return t, c, err
		}
		// Another claim or a settle changed the turn since it was read:
		// decide again on what it is now.
	}
	return chat.Turn{}, chat.Conversation{}, fmt.Errorf("claim turn %s: the fence changed under %d attempts", id, maxClaimAttempts)
}

// claimUpdate takes the next fence of a pending turn; the condition of the
// caller follows it.
const claimUpdate = `UPDATE turns ` + claimSet + `
WHERE id = ? AND ` + pendingByID

// claimSet is what a claim sets.
const claimSet = `SET state = 'running', fence = fence + 1, runner = ?, started_at = COALESCE(started_at, ?)`

// claimUpdateLease is claimUpdate on Postgres, whose commit does not wait
// for the write-ahead log to reach the disk (synchronous_commit off for
// its own transaction, set by the statement itself so that it needs no
// round trip of its own and holds behind PgBouncer in transaction pooling).
// A claim is a lease, not a result: a Postgres crash can lose only the
// claims of the last moments before it, which puts those turns back to
// queued at their old fence, and the reconciler enqueues them again. Every
// commit that matters waits as before: an ask's (an accepted turn is never
// lost), a finish's (whose flush carries the claim before it), a settle's.
// It halves the flushes a run waits for.
const claimUpdateLease = `UPDATE turns ` + claimSet + `
FROM (SELECT set_config('synchronous_commit', 'off', true)) AS lease
WHERE id = ? AND ` + pendingByID

// claimReturning is the claim's update with the caller's condition cond,
// returning the claimed turn: claimUpdate, or with lease claimUpdateLease
// (Postgres only).
func claimReturning(cond string, lease bool) string {
	if lease {
		return claimUpdateLease + cond + ` RETURNING turns.*`
	}
	return claimUpdate + cond + ` RETURNING *`
}

// claimTextKey is a claim's texts' key in claimTextCache.
type claimTextKey struct {
	cond     string
	withConv bool
}

// claimTextCache holds claimTexts by their arguments: the callers' conditions
// are constants, so it holds a handful.
var claimTextCache sync.Map // claimTextKey -> [2]string

// claimTexts returns the plain and lease texts of a claim in the runs' lane
// with the caller's condition cond, reading the head of the turn's
// conversation too with withConv, built once.
func claimTexts(cond string, withConv bool) (query, lease string) {
	key := claimTextKey{cond, withConv}
	if v, ok := claimTextCache.Load(key); ok {
		texts := v.([2]string)
		return texts[0], texts[1]
	}
	query, lease = claimReturning(cond, false), claimReturning(cond, true)
	if withConv {
		query = `WITH t AS (` + query + `)` + claimWithConversation
		lease = `WITH t AS (` + lease + `)` + claimWithConversation
	}
	claimTextCache.Store(key, [2]string{query, lease})
	return query, lease
}

// claimWithConversation returns the turn claimed by claimUpdate (in
// the CTE t) with the head of its conversation, the columns of
// selectConversations prefixed conv_. The joins are outer so that the
// claim's row is returned whatever: a conversation is never missing while
// its turn exists, and a claim that took a fence must say so.
const claimWithConversation = `
SELECT t.*, c.id AS conv_id, c.review_id AS conv_review_id, c.title AS conv_title, c.backend AS conv_backend,
    c.model AS conv_model, c.session AS conv_session, c.seeded_reason AS conv_seeded_reason,
    c.session_id AS conv_session_id, c.session_host AS conv_session_host, c.run_dir AS conv_run_dir,
    c.created_at AS conv_created_at, c.updated_at AS conv_updated_at,
    rp.name AS conv_repository, rv.pr AS conv_pr, rv.version AS conv_review_version
FROM t
LEFT JOIN conversations c ON c.id = t.conversation_id
LEFT JOIN reviews rv ON rv.id = c.review_id
LEFT JOIN repositories rp ON rp.id = rv.repository_id`

// claimedTurn is a row of claimWithConversation.
type claimedTurn struct {
	Turn turnRow                `gorm:"embedded"`
	Conv conversationWithReview `gorm:"embedded;embeddedPrefix:conv_"`
}

// claim takes the next fence of turn id if it is pending and matches the
// extra condition cond (with its arguments), and with withConv reads the
// head of its conversation too. ok reports whether it took the fence.
func (s *Store) claim(ctx context.Context, id, runner string, withConv bool, cond string, args ...any) (t chat.Turn, c chat.Conversation, ok bool, err error) {
	args = append([]any{runner, now(), id}, args...)
	if s.runs != nil {
		return s.claimInLane(ctx, id, withConv, cond, args)
	}
	// SQLite. Raw(...).Find rather than .Scan on the paths every turn
	// takes: gorm's Scan renders the statement with its values for a trace
	// logger on every call, even one that discards it.
	db := s.write.WithContext(ctx)
	var rows []turnRow
	if err := db.Raw(claimReturning(cond, false), args...).Find(&rows).Error; err != nil {
		return chat.Turn{}, chat.Conversation{}, false, fmt.Errorf("claim turn %s: %w", id, err)
	}
	if len(rows) == 0 {
		return chat.Turn{}, chat.Conversation{}, false, nil
	}
	if t, err = rows[0].chat(); err != nil {
		return chat.Turn{}, chat.Conversation{}, false, err
	}
	if withConv {
		if c, err = s.ConversationHead(ctx, t.ConversationID); err != nil {
			return chat.Turn{}, chat.Conversation{}, false, err
		}
	}
	return t, c, true, nil
}

// claimInLane is claim on Postgres, its statement sent in the runs' lane
// as a lease: committed without waiting for the disk unless its batch
// holds a statement that must.
func (s *Store) claimInLane(ctx context.Context, id string, withConv bool, cond string, args []any) (t chat.Turn, c chat.Conversation, ok bool, err error) {
	query, lease := claimTexts(cond, withConv)
	var rows []claimedTurn
	read := func(r pgx.Rows) error {
		rows = rows[:0]
		for r.Next() {
			var ct claimedTurn
			if err := scanNamed(r, []any{&ct.Turn, &ct.Conv}, []string{"", "conv_"}); err != nil {
				return err
			}
			rows = append(rows, ct)
		}
		return r.Err()
	}
	if err := s.runs.doLease(ctx, query, lease, args, read); err != nil {
		return chat.Turn{}, chat.Conversation{}, false, fmt.Errorf("claim turn %s: %w", id, err)
	}
	if len(rows) == 0 {
		return chat.Turn{}, chat.Conversation{}, false, nil
	}
	if t, err = rows[0].Turn.chat(); err != nil {
		return chat.Turn{}, chat.Conversation{}, false, err
	}
	if !withConv {
		return t, chat.Conversation{}, true, nil
	}
	if rows[0].Conv.Conversation.ID == "" {
		return chat.Turn{}, chat.Conversation{}, false, chat.Errorf(chat.CodeNotFound, "conversation %s not found", t.ConversationID)
	}
	return t, rows[0].Conv.chat(), true, nil
}

// AppendEvents stores events of a turn whose fence is current, and moves the
// turn's LastSeq to the largest Seq stored. The caller numbers the events
// (Seq > 0); an event whose Seq is already stored is skipped, so a retried
// append stores nothing twice. A stale fence is ErrFenced, a missing turn
// CodeNotFound.
func (s *Store) AppendEvents(ctx context.Context, turnID string, fence int64, events []chat.Event) error {
	if len(events) == 0 {
		return s.checkFence(ctx, turnID, fence)
	}
	rows, maxSeq, err := newTurnEventRows(turnID, events, now())
	if err != nil {
		return fmt.Errorf("append events to turn %s: %w", turnID, err)
	}
	// The fenced update locks the turn row (on Postgres) until commit, so
	// that a ClaimTurn or SettleTurn waits for these events or fences them
	// off, never both.
	turnUpdate := `UPDATE turns SET ` + lastSeqAtLeast + ` WHERE id = ? AND fence = ?`
	turnArgs := []any{maxSeq, maxSeq, turnID, fence}
	if s.dialect == dialectPostgres && len(rows) <= eventsInline {
		err = s.appendInOneStatement(ctx, turnUpdate, turnArgs, rows)
	} else {
		err = s.transaction(ctx, func(tx *gorm.DB) error {
			res := tx.Exec(turnUpdate, turnArgs...)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 0 {
				return errFenced
			}
			return insertEvents(tx, rows)
		})
	}
	if errors.Is(err, errFenced) {
		return s.fenced(ctx, "append events to", turnID)
	}
	if err != nil {
		return fmt.Errorf("append events to turn %s: %w", turnID, err)
	}
	return nil
}

// appendInOneStatement is AppendEvents' transaction as one Postgres
// statement: the turn's fenced update, then, through its result, the
// events' insert (none if the fence did not match). One round trip instead
// of four (BEGIN, two statements, COMMIT), sent in the runs' lane: a
// running turn stores each batch of its agent's events this way.
func (s *Store) appendInOneStatement(ctx context.Context, turnUpdate string, turnArgs []any, events []turnEventRow) error {
	var q strings.Builder
	q.WriteString(`WITH t AS (` + turnUpdate + ` RETURNING 1),
`)
	args := append(append([]any{}, turnArgs...), insertEventsCTE(&q, events)...)
	q.WriteString(`
SELECT count(*) FROM t`)
	var n int64
	read := func(r pgx.Rows) error {
		n = 0
		for r.Next() {
			if err := r.Scan(&n); err != nil {
				return err
			}
		}
		return r.Err()
	}
	if err := s.runs.do(ctx, q.String(), args, read); err != nil {
		return err
	}
	if n == 0 {
		return errFenced
	}
	return nil
}

// insertEventsCTE writes to q the common table expression e that inserts
// events when the expression t returned a row, and returns its arguments.
func insertEventsCTE(q *strings.Builder, events []turnEventRow) []any {
	args := make([]any, 0, 5*len(events))
	q.WriteString(`e AS (INSERT INTO turn_events (turn_id, seq, type, data, created_at)
SELECT v.* FROM (VALUES `)
	for i, e := range events {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(`(?::text, ?::bigint, ?::text, ?::text, ?::timestamptz)`)
		args = append(args, e.TurnID, e.Seq, e.Type, e.Data, e.CreatedAt)
	}
	q.WriteString(`) AS v (turn_id, seq, type, data, created_at) WHERE EXISTS (SELECT 1 FROM t)
ON CONFLICT DO NOTHING RETURNING 1)`)
	return args
}

func insertEvents(tx *gorm.DB, rows []turnEventRow) error {
	if len(rows) == 0 {
		return nil
	}
	return tx.Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(rows, eventBatch).Error
}

// checkFence returns nil if fence is the turn's current one.
func (s *Store) checkFence(ctx context.Context, turnID string, fence int64) error {
	var fences []int64
	if err := s.read.WithContext(ctx).Raw(`SELECT fence FROM turns WHERE id = ?`, turnID).Scan(&fences).Error; err != nil {
		return fmt.Errorf("check fence of turn %s: %w", turnID, err)
	}
	if len(fences) == 0 {
		return chat.Errorf(chat.CodeNotFound, "turn %s not found", turnID)
	}
	if fences[0] != fence {
		return fmt.Errorf("check fence %d of turn %s: %w", fence, turnID, chat.ErrFenced)
	}
	return nil
}

// fenced returns the error of a fenced update of turnID that matched no
// row: CodeNotFound if the turn is gone, else ErrFenced.
func (s *Store) fenced(ctx context.Context, op, turnID string) error {
	if _, err := s.TurnByID(ctx, turnID); err != nil {
		return err
	}
	return fmt.Errorf("%s turn %s: %w", op, turnID, chat.ErrFenced)
}

// ReleaseTurn puts a running turn held by the run with fence back to
// queued with no runner (see chat.RunStore).
func (s *Store) ReleaseTurn(ctx context.Context, id string, fence int64) (chat.Turn, error) {
	var rows []turnRow
	err := s.write.WithContext(ctx).Raw(`UPDATE turns SET state = 'queued', runner = ''
WHERE id = ? AND fence = ? AND state = 'running' RETURNING *`, id, fence).Find(&rows).Error
	if err != nil {
		return chat.Turn{}, fmt.Errorf("release turn %s: %w", id, err)
	}
	if len(rows) == 0 {
		return chat.Turn{}, s.fenced(ctx, "release", id)
	}
	return rows[0].chat()
}

// FinishTurn stores the outcome of the run holding fence and settles the
// turn, in one transaction with the conversation's session update, its
// session file (o.SessionFile) and the final events. The turn must be running with that fence, else ErrFenced;
// o.State must be final.
func (s *Store) FinishTurn(ctx context.Context, turnID string, fence int64, o chat.Outcome) error {
	if !o.State.Final() {
		return fmt.Errorf("finish turn %s: state %q is not final", turnID, o.State)
	}
	answer, err := encodeNullableJSON(o.Answer)
	if err != nil {
		return fmt.Errorf("finish turn %s: encode answer: %w", turnID, err)
	}
	at := now()
	events, maxSeq, err := newTurnEventRows(turnID, o.Events, at)
	if err != nil {
		return fmt.Errorf("finish turn %s: %w", turnID, err)
	}
	u := o.Usage
	// The turn's fenced update, in the transaction or a statement's CTE.
	turnUpdate := `UPDATE turns
SET state = ?, reason = ?, answer = ?, note = ?, backend = ?, model = ?, session = ?,
    input_tokens = ?, output_tokens = ?, calls = ?, repairs = ?, cost_usd = ?, cost_reason = ?,
    finished_at = ?, ` + lastSeqAtLeast + `
WHERE id = ? AND fence = ? AND state = 'running' RETURNING conversation_id`
	turnArgs := []any{string(o.State), string(o.Reason), answer, o.Note, o.Backend, o.Model, string(o.Session),
		u.InputTokens, u.OutputTokens, u.Calls, u.Repairs, u.CostUSD, u.CostReason,
		at, maxSeq, maxSeq, turnID, fence}
	convSet, convArgs := `updated_at = ?`, []any{at}
	if si := o.Conversation; si != nil {
		convSet = `session_id = ?, session_host = ?, run_dir = ?, backend = ?, model = ?, session = ?, seeded_reason = ?, updated_at = ?`
		convArgs = []any{si.SessionID, si.SessionHost, si.RunDir, si.Backend, si.Model, string(si.Session), si.SeededReason, at}
	}
	if s.dialect == dialectPostgres && len(events) <= eventsInline && o.SessionFile == nil {
		err = s.finishInOneStatement(ctx, turnUpdate, turnArgs, convSet, convArgs, events)
	} else {
		err = s.transaction(ctx, func(tx *gorm.DB) error {
			var conv []string
			if err := tx.Raw(turnUpdate, turnArgs...).Find(&conv).Error; err != nil {
				return err
			}
			if len(conv) == 0 {
				return errFenced
			}
			if err := tx.Exec(`UPDATE conversations SET `+convSet+` WHERE id = ?`, append(convArgs, conv[0])...).Error; err != nil {
				return err
			}
			if o.SessionFile != nil {
				if err := putConversationSessionFile(tx, conv[0], *o.SessionFile, at); err != nil {
					return fmt.Errorf("store the session file: %w", err)
				}
			}
			return insertEvents(tx, events)
		})
	}
	if errors.Is(err, errFenced) {
		return s.fenced(ctx, "finish", turnID)
	}
	if err != nil {
		return fmt.Errorf("finish turn %s: %w", turnID, err)
	}
	return nil
}

// eventsInline is the most events appendInOneStatement and
// finishInOneStatement carry.
const eventsInline = 100

// finishInOneStatement is FinishTurn's transaction as one Postgres
// statement: the turn's fenced update, then, through its result, the
// conversation's update and the events' insert (none if the fence did not
// match). One round trip instead of five (BEGIN, three statements, COMMIT),
// sent in the runs' lane; the rows are locked in the transaction's order,
// the turn first.
func (s *Store) finishInOneStatement(ctx context.Context, turnUpdate string, turnArgs []any, convSet string, convArgs []any, events []turnEventRow) error {
	var q strings.Builder
	q.WriteString(`WITH t AS (` + turnUpdate + `),
c AS (UPDATE conversations SET ` + convSet + ` FROM t WHERE conversations.id = t.conversation_id RETURNING 1)`)
	args := append(append([]any{}, turnArgs...), convArgs...)
	if len(events) > 0 {
		q.WriteString(`,
`)
		args = append(args, insertEventsCTE(&q, events)...)
	}
	q.WriteString(`
SELECT conversation_id FROM t`)
	var conv []string
	read := func(r pgx.Rows) error {
		conv = conv[:0]
		for r.Next() {
			var id string
			if err := r.Scan(&id); err != nil {
				return err
			}
			conv = append(conv, id)
		}
		return r.Err()
	}
	if err := s.runs.do(ctx, q.String(), args, read); err != nil {
		return err
	}
	if len(conv) == 0 {
		return errFenced
	}
	return nil
}

// SettleTurn settles a pending turn whoever holds it (cancel, reconciler)
// and takes a fresh fence so that no run can store into it any more. note,
// if not empty, is added to the turn's note on a line of its own. events,
// the turn's final events, are numbered after the turn's last stored one
// and stored in the same transaction, so that nobody reads the settled turn
// without them. It returns the settled turn with that fence (its LastSeq
// the Seq of the last of events), or ErrSettled for a turn already final.
func (s *Store) SettleTurn(ctx context.Context, turnID string, state chat.State, reason chat.Reason, note string, events []chat.Event) (chat.Turn, error) {
	if !state.Final() {
		return chat.Turn{}, fmt.Errorf("settle turn %s: state %q is not final", turnID, state)
	}
	at := now()
	set := `state = ?, reason = ?, finished_at = ?, fence = fence + 1, last_seq = last_seq + ?`
	args := []any{string(state), string(reason), at, len(events)}
	if note != "" {
		set += `, note = CASE WHEN note = '' THEN ? ELSE note || ? END`
		args = append(args, note, "\n"+note)
	}
	args = append(args, turnID)
	var rows []turnRow
	err := s.transaction(ctx, func(tx *gorm.DB) error {
		// The update locks the turn row (on Postgres) until commit: a run's
		// AppendEvents waits for it and is then fenced off, or went first
		// and its events are counted in last_seq.
		if err := tx.Raw(`UPDATE turns SET `+set+` WHERE id = ? AND `+pendingByID+` RETURNING *`, args...).
			Scan(&rows).Error; err != nil {
			return err
		}
		if len(rows) == 0 {
			return errFenced
		}
		numbered := make([]chat.Event, len(events))
		for i, e := range events {
			e.Seq = rows[0].LastSeq - int64(len(events)-i) + 1
			e.Encoded = nil // numbered here: encoded with its seq
			numbered[i] = e
		}
		evRows, _, err := newTurnEventRows(turnID, numbered, at)
		if err != nil {
			return err
		}
		if err := tx.Exec(`UPDATE conversations SET updated_at = ? WHERE id = ?`, at, rows[0].ConversationID).Error; err != nil {
			return err
		}
		return insertEvents(tx, evRows)
	})
	if errors.Is(err, errFenced) {
		if _, err := s.TurnByID(ctx, turnID); err != nil {
			return chat.Turn{}, err
		}
		return chat.Turn{}, fmt.Errorf("settle turn %s: %w", turnID, chat.ErrSettled)
	}
	if err != nil {
		return chat.Turn{}, fmt.Errorf("settle turn %s: %w", turnID, err)
	}
	return rows[0].chat()
}

// Events returns the stored events of a turn with Seq > after, in order. A
// missing turn is CodeNotFound.
func (s *Store) Events(ctx context.Context, turnID string, after int64) ([]chat.Event, error) {
	var rows []turnEventRow
	if err := s.read.WithContext(ctx).Where("turn_id = ? AND seq > ?", turnID, after).Order("seq").
		Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("get events of turn %s: %w", turnID, err)
	}
	if len(rows) == 0 {
		if _, err := s.TurnByID(ctx, turnID); err != nil {
			return nil, err
		}
	}
	events := make([]chat.Event, len(rows))
	for i, r := range rows {
		if err := decodeJSON(&r.Data, &events[i]); err != nil {
			return nil, fmt.Errorf("decode event %d of turn %s: %w", r.Seq, turnID, err)
		}
		events[i].Seq = r.Seq
	}
	return events, nil
}
