package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/prchat/prchat/chat"
)

const (
	// maxAskBatch caps the new conversations committed together.
	maxAskBatch = 64
	// askBatchTimeout bounds the transaction of a batch; it runs for all
	// its askers, so under none's context.
	askBatchTimeout = 30 * time.Second
)

// newAsk is a new conversation with its first turn, on its way to the
// database, and how that went.
type newAsk struct {
	ctx  context.Context
	c    chat.Conversation
	t    chat.Turn
	err  error
	done chan struct{}
}

func prepareAsk(ctx context.Context, c *chat.Conversation, t *chat.Turn) *newAsk {
	a := &newAsk{ctx: ctx, c: *c, done: make(chan struct{})}
	a.c.ID = cmp.Or(a.c.ID, uuid.NewString())
	a.c.CreatedAt = stamp(a.c.CreatedAt)
	a.c.UpdatedAt = a.c.CreatedAt
	a.c.Turns = nil
	a.t = newQueuedTurn(t, a.c.ID)
	a.t.Number = 1
	return a
}

// CreateConversation inserts c and its first turn t (state queued) in one
// transaction. It fills the ids, numbers and times of both, and c's
// Repository, PR and ReviewVersion from its review. The review is
// c.ReviewID; a missing one is CodeNoReview.
//
// Conversations asked for at the same time share their transaction (up to
// maxAskBatch; unless Config.CommitEachAsk): a commit costs more than the
// inserts it makes durable (on SQLite every page they touched is written to
// the WAL again), so under load a batch of askers pays for one. An asker
// waits for no one: a batch is whatever arrived while the last one was
// being committed. A batch that fails is committed again one by one, so
// one bad conversation fails alone.
func (s *Store) CreateConversation(ctx context.Context, c *chat.Conversation, t *chat.Turn) error {
	a := prepareAsk(ctx, c, t)
	if s.asks == nil {
		if err := s.insertAsks(ctx, []*newAsk{a}); err != nil {
			a.err = err
		}
	} else if err := s.asks.submit(a); err != nil {
		return err
	}
	if a.err != nil {
		var e *chat.Error
		if errors.As(a.err, &e) {
			return e
		}
		return fmt.Errorf("create conversation on review %d: %w", c.ReviewID, a.err)
	}
	*c, *t = a.c, a.t
	return nil
}

// insertAsks inserts asks in one transaction. An ask whose review does not
// exist gets CodeNoReview in its err and is left out (the others go in);
// the error returned is the transaction's.
func (s *Store) insertAsks(ctx context.Context, asks []*newAsk) error {
	reviews := make([]int64, 0, 1)
	for _, a := range asks {
		if len(reviews) == 0 || reviews[len(reviews)-1] != a.c.ReviewID {
			reviews = append(reviews, a.c.ReviewID)
		}
	}
	if s.dialect == dialectPostgres {
		return s.insertAsksInOneStatement(ctx, asks, reviews)
	}
	return s.transaction(ctx, func(tx *gorm.DB) error {
		var about []struct {
			ID            int64  `gorm:"column:id"`
			Repository    string `gorm:"column:repository"`
			PR            int    `gorm:"column:pr"`
			ReviewVersion int    `gorm:"column:review_version"`
		}
		if err := tx.Raw(`SELECT rv.id AS id, rp.name AS repository, rv.pr AS pr, rv.version AS review_version
FROM reviews rv JOIN repositories rp ON rp.id = rv.repository_id WHERE rv.id IN ?`, reviews).
			Find(&about).Error; err != nil {
			return err
		}
		convs := make([]conversationRow, 0, len(asks))
		turns := make([]turnRow, 0, len(asks))
		for _, a := range asks {
			found := false
			for _, r := range about {
				if r.ID == a.c.ReviewID {
					a.c.Repository, a.c.PR, a.c.ReviewVersion = r.Repository, r.PR, r.ReviewVersion
					found = true
				}
			}
			if !found {
				a.err = chat.Errorf(chat.CodeNoReview, "no review with id %d", a.c.ReviewID)
				continue
			}
			row, err := newTurnRow(&a.t)
			if err != nil {
				return err
			}
			convs, turns = append(convs, newConversationRow(&a.c)), append(turns, row)
		}
		if len(convs) == 0 {
			return nil
		}
		if err := tx.Create(&convs).Error; err != nil {
			return err
		}
		return tx.Create(&turns).Error
	})
}

// The columns of a new conversation and of a new turn, and their types,
// in the order of askValues.
const (
	askConversationColumns = `id, review_id, title, backend, model, session, seeded_reason, session_id, session_host, run_dir, created_at, updated_at`
	askConversationTypes   = `text, bigint, text, text, text, text, text, text, text, text, timestamptz, timestamptz`
	askTurnColumns         = `id, conversation_id, number, state, question, focus, answer, note, reason, provider, queue, runner, fence, last_seq,
    backend, model, session, input_tokens, output_tokens, calls, repairs, cost_usd, cost_reason, created_at, started_at, finished_at`
	askTurnTypes = `text, text, integer, text, text, text, text, text, text, text, text, text, bigint, bigint,
    text, text, text, bigint, bigint, integer, integer, double precision, text, timestamptz, timestamptz, timestamptz`
)

// askConversationValues and askTurnValues are a row's values, in the
// order of the columns above.
func askConversationValues(c conversationRow) []any {
	return []any{c.ID, c.ReviewID, c.Title, c.Backend, c.Model, c.Session, c.SeededReason, c.SessionID, c.SessionHost, c.RunDir, c.CreatedAt, c.UpdatedAt}
}

func askTurnValues(t turnRow) []any {
	return []any{t.ID, t.ConversationID, t.Number, t.State, t.Question, t.Focus, t.Answer, t.Note, t.Reason, t.Provider, t.Queue, t.Runner, t.Fence, t.LastSeq,
		t.Backend, t.Model, t.Session, t.InputTokens, t.OutputTokens, t.Calls, t.Repairs, t.CostUSD, t.CostReason, t.CreatedAt, t.StartedAt, t.FinishedAt}
}

// writeValues writes to q a VALUES list of rows placeholders with types
// (comma-separated, as in askTurnTypes), each cast to its type.
func writeValues(q *strings.Builder, rows int, types string) {
	var one strings.Builder
	one.WriteString("(")
	for i, typ := range strings.Split(types, ",") {
		if i > 0 {
			one.WriteString(", ")
		}
		one.WriteString("?::" + strings.TrimSpace(typ))
	}
	one.WriteString(")")
	q.WriteString("VALUES ")
	for i := range rows {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(one.String())
	}
}

// insertAsksInOneStatement is insertAsks' transaction as one Postgres
// statement: the reviews read, and through it the conversations of the
// reviews found inserted, and through those their turns. One round trip
// instead of five (BEGIN, the read, two inserts, COMMIT); the asks of a
// batch are all new conversations, so none can be busy.
func (s *Store) insertAsksInOneStatement(ctx context.Context, asks []*newAsk, reviews []int64) error {
	convs := make([]any, 0, 12*len(asks))
	turns := make([]any, 0, 26*len(asks))
	for _, a := range asks {
		row, err := newTurnRow(&a.t)
		if err != nil {
			return err
		}
		convs = append(convs, askConversationValues(newConversationRow(&a.c))...)
		turns = append(turns, askTurnValues(row)...)
	}
	var q strings.Builder
	q.WriteString(`WITH rv AS (SELECT rv.id, rp.name AS repository, rv.pr, rv.version AS review_version
    FROM reviews rv JOIN repositories rp ON rp.id = rv.repository_id WHERE rv.id IN ?),
c AS (INSERT INTO conversations (` + askConversationColumns + `)
    SELECT v.* FROM (`)
	writeValues(&q, len(asks), askConversationTypes)
	q.WriteString(`) AS v (` + askConversationColumns + `) WHERE v.review_id IN (SELECT id FROM rv) RETURNING id),
t AS (INSERT INTO turns (` + askTurnColumns + `)
    SELECT v.* FROM (`)
	writeValues(&q, len(asks), askTurnTypes)
	q.WriteString(`) AS v (` + askTurnColumns + `) WHERE v.conversation_id IN (SELECT id FROM c) RETURNING 1)
SELECT id, repository, pr, review_version FROM rv`)
	args := append(append([]any{reviews}, convs...), turns...)
	rows, err := s.write.WithContext(ctx).Raw(q.String(), args...).Rows()
	if err != nil {
		return unavailable(err)
	}
	defer rows.Close()
	type about struct {
		repository  string
		pr, version int
	}
	found := make(map[int64]about, len(reviews))
	for rows.Next() {
		var id int64
		var r about
		if err := rows.Scan(&id, &r.repository, &r.pr, &r.version); err != nil {
			return unavailable(err)
		}
		found[id] = r
	}
	if err := rows.Err(); err != nil {
		return unavailable(err)
	}
	for _, a := range asks {
		r, ok := found[a.c.ReviewID]
		if !ok {
			a.err = chat.Errorf(chat.CodeNoReview, "no review with id %d", a.c.ReviewID)
			continue
		}
		a.c.Repository, a.c.PR, a.c.ReviewVersion = r.repository, r.pr, r.version
	}
	return nil
}

// askBatcher commits the asks submitted to it in batches, with writers
// goroutines taking turns at the database.
type askBatcher struct {
	s     *Store
	queue chan *newAsk
	stop  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once

	// mu orders submits before close: once closed is set no ask enters
	// the queue, so the asks close drains are all there are.
	mu     sync.RWMutex
	closed bool
}

func startAskBatcher(s *Store, writers int) *askBatcher {
	b := &askBatcher{s: s, queue: make(chan *newAsk, maxAskBatch), stop: make(chan struct{})}
	for range writers {
		b.wg.Go(b.write)
	}
	return b
}

// submit hands a to a writer and waits until its batch is committed. It
// gives up (with ctx's error) only while a is still waiting for a writer:
// once a batch holds it, its outcome is what the caller must hear.
func (b *askBatcher) submit(a *newAsk) error {
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return errStoreClosed
	}
	select {
	case b.queue <- a:
	case <-a.ctx.Done():
		b.mu.RUnlock()
		return a.ctx.Err()
	}
	b.mu.RUnlock()
	<-a.done
	return nil
}

var errStoreClosed = errors.New("create conversation: the store is closed")

// write commits batches of what is waiting until the batcher stops.
func (b *askBatcher) write() {
	batch := make([]*newAsk, 0, maxAskBatch)
	for {
		select {
		case <-b.stop:
			return
		case a := <-b.queue:
			batch = append(batch[:0], a)
		}
	more:
		for len(batch) < maxAskBatch {
			select {
			case a := <-b.queue:
				batch = append(batch, a)
			default:
				break more
			}
		}
		b.commit(batch)
	}
}

// commit inserts a batch, one by one if it fails together, and tells every
// asker how it went.
func (b *askBatcher) commit(batch []*newAsk) {
	live := batch[:0:0]
	for _, a := range batch {
		if err := a.ctx.Err(); err != nil {
			a.err = err
			close(a.done)
			continue
		}
		live = append(live, a)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), askBatchTimeout)
	defer cancel()
	err := b.s.insertAsks(ctx, live)
	for _, a := range live {
		if err != nil && len(live) > 1 {
			a.err = nil
			err := b.s.insertAsks(ctx, []*newAsk{a})
			a.err = cmp.Or(a.err, err)
		} else if err != nil {
			a.err = err
		}
		close(a.done)
	}
}

// close stops the writers once they finished the batch they hold; asks
// still queued are told the store is closed.
func (b *askBatcher) close() {
	b.once.Do(func() {
		b.mu.Lock()
		b.closed = true
		b.mu.Unlock()
		close(b.stop)
		b.wg.Wait()
		for {
			select {
			case a := <-b.queue:
				a.err = errStoreClosed
				close(a.done)
			default:
				return
			}
		}
	})
}
