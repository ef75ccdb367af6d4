package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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
	return s.transaction(ctx, func(tx *gorm.DB) error {
		reviews := make([]int64, 0, 1)
		for _, a := range asks {
			if len(reviews) == 0 || reviews[len(reviews)-1] != a.c.ReviewID {
				reviews = append(reviews, a.c.ReviewID)
			}
		}
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
