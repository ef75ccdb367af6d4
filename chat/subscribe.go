package chat

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"
)

// pollInterval is how long a following subscription waits before it
// checks the store anyway (plus up to half as much again, at random, so
// that subscribers that came together do not check together) when no live
// event came in the interval (one that did re-arms it: a live event costs
// no timer of its own, which thousands of subscribers of one turn would
// each reset): a safety net for an event whose live delivery was lost
// without a gap showing, such as a final event (a gap, or a dropped
// follow, makes it read the store at once). The check reads the turn, and
// its events only if there are new ones. Without a follower (or when
// following fails) it reads the store every unfollowedPoll.
const (
	pollInterval   = 15 * time.Second
	unfollowedPoll = 250 * time.Millisecond
	// refollowPause is how long a subscription whose follow ended early
	// waits before it follows again, so that a Redis that is down is not
	// asked again at once.
	refollowPause = 50 * time.Millisecond
	// maxBatch bounds the events one Next returns: a replay of a long turn
	// comes in several.
	maxBatch = 256
)

// EventStore reads turns and their stored events for subscribers.
// Implemented by package store.
type EventStore interface {
	Turn(ctx context.Context, conversationID string, number int) (Turn, error)
	TurnByID(ctx context.Context, id string) (Turn, error)
	// ConversationHead returns a conversation without its turns.
	ConversationHead(ctx context.Context, id string) (Conversation, error)
	// Events returns the stored events of a turn with Seq > after, in order.
	Events(ctx context.Context, turnID string, after int64) ([]Event, error)
}

// SubscriptionsDeps are the parts Subscriptions work with. Store and
// Catalog are required.
type SubscriptionsDeps struct {
	Store   EventStore
	Catalog *Catalog
	// Follower, if set, delivers events live; without it subscribers read
	// the store.
	Follower Follower
	Logger   *slog.Logger
}

// Subscriptions give clients a turn's events as they happen (a stream, a
// long-poll for the settled turn, the stored transcript) and a
// repository's feed of turn state changes.
type Subscriptions struct {
	store    EventStore
	catalog  *Catalog
	follower Follower
	log      *slog.Logger
}

// NewSubscriptions returns Subscriptions.
func NewSubscriptions(d SubscriptionsDeps) (*Subscriptions, error) {
	if d.Store == nil || d.Catalog == nil {
		return nil, errors.New("chat subscriptions: Store and Catalog are required")
	}
	return &Subscriptions{store: d.Store, catalog: d.Catalog, follower: d.Follower, log: cmp.Or(d.Logger, slog.New(slog.DiscardHandler))}, nil
}

// Subscription is one subscriber's stream of a turn's events with Seq past
// a position: the stored ones first, then the live ones as the worker
// emits them, in order and each once, until the final event (done or
// error). A turn that settled before the subscription still gets its whole
// stream; for a settled turn whose final event is at or before the
// position (the client reconnects having had it) the stream ends with no
// event: nothing is sent twice. A Subscription has no goroutine of its
// own: one goroutine reads it with Next.
type Subscription struct {
	s     *Subscriptions
	turn  Turn
	last  int64 // the seq of the last event queued
	final bool  // the final event is queued
	ended bool

	live     <-chan *Event // nil: not following
	refollow bool          // follow (again) before waiting
	stale    bool          // read the store before waiting
	poll     *time.Timer   // the next read of the store anyway
	interval time.Duration // between reads of the store
	heard    bool          // a live event came since poll was set

	ready []*Event // events not returned yet, from taken on
	taken int
}

// Subscribe returns the subscription to a turn's events with Seq > after.
// ctx bounds it: Next is called with ctx, or a context that ends with it.
func (s *Subscriptions) Subscribe(ctx context.Context, conversationID string, number int, after int64) (*Subscription, error) {
	if err := seeConversation(ctx, s.store, conversationID); err != nil {
		return nil, err
	}
	t, err := s.store.Turn(ctx, conversationID, number)
	if err != nil {
		return nil, err
	}
	sub := &Subscription{s: s, turn: t, last: after, stale: true, interval: unfollowedPoll}
	sub.refollow = s.follower != nil
	return sub, nil
}

// Over reports whether the subscriber has the turn's final event already:
// the turn was settled when Subscribe read it, with no event after the
// subscriber's last one. Such a stream has nothing to send.
func (sub *Subscription) Over() bool {
	return sub.turn.State.Final() && sub.last > 0 && sub.turn.LastSeq <= sub.last
}

// Next returns the next events in order, as many as are ready (at most
// maxBatch), waiting for them until wake fires (then it returns none and
// true, so that the caller may write a keep-alive) or ctx ends. It returns
// false once the stream is over: the final event was returned by an
// earlier call, ctx ended, or the store failed (logged; the client
// reconnects with Last-Event-ID). The slice is valid until the next call;
// the events in it are never changed.
func (sub *Subscription) Next(ctx context.Context, wake <-chan time.Time) ([]*Event, bool) {
	if sub.taken == len(sub.ready) {
		// The last batch is written: reuse its room, unless a replay made
		// it large.
		if cap(sub.ready) > maxBatch {
			sub.ready = nil
		}
		clear(sub.ready)
		sub.ready, sub.taken = sub.ready[:0], 0
	}
	for !sub.ended {
		if batch := sub.take(); len(batch) > 0 {
			return batch, true
		}
		if sub.final || ctx.Err() != nil {
			sub.end()
			break
		}
		if sub.refollow {
			sub.follow(ctx)
		}
		if sub.stale {
			if err := sub.catchUp(ctx); err != nil {
				sub.fail(ctx, err)
			}
			continue
		}
		select {
		case <-ctx.Done():
		case <-wake:
			return nil, true
		case <-sub.poll.C:
			if sub.heard {
				// Live events came meanwhile: the store is not read.
				sub.resetPoll()
				continue
			}
			if err := sub.check(ctx); err != nil {
				sub.fail(ctx, err)
			}
		case e, ok := <-sub.live:
			sub.heard = true
			// This event and the ones ready after it, in one batch.
		drain:
			for ok {
				if err := sub.push(ctx, e); err != nil {
					sub.fail(ctx, err)
					return nil, false
				}
				if len(sub.ready)-sub.taken >= maxBatch {
					break
				}
				select {
				case e, ok = <-sub.live:
				default:
					break drain
				}
			}
			if !ok {
				// Fell behind or lost Redis: catch up from the store and
				// follow again.
				sub.live, sub.refollow, sub.stale = nil, true, true
				if sub.taken == len(sub.ready) {
					pause(ctx, refollowPause)
				}
			}
		}
	}
	return nil, false
}

// take returns the next batch of the queue.
func (sub *Subscription) take() []*Event {
	n := min(len(sub.ready)-sub.taken, maxBatch)
	batch := sub.ready[sub.taken : sub.taken+n]
	sub.taken += n
	return batch
}

// follow starts following the turn's live events; without them the store
// is polled. It follows before the store is read, so that nothing
// published between the two is missed: duplicates are dropped by seq.
func (sub *Subscription) follow(ctx context.Context) {
	sub.refollow, sub.stale = false, true
	var ch <-chan *Event
	var err error
	onFreshStack(func() { ch, err = sub.s.follower.Follow(ctx, sub.turn.ID, sub.last) })
	if err != nil {
		if ctx.Err() == nil {
			sub.s.log.WarnContext(ctx, "follow turn events; polling the store", slog.String("turn", sub.turn.ID), slog.Any("err", err))
		}
		sub.live, sub.interval = nil, unfollowedPoll
		return
	}
	sub.live, sub.interval = ch, pollInterval
}

// resetPoll sets the next check of the store to an interval from now.
func (sub *Subscription) resetPoll() {
	sub.heard = false
	interval := sub.interval
	if interval == pollInterval {
		interval += rand.N(pollInterval / 2)
	}
	if sub.poll == nil {
		sub.poll = time.NewTimer(interval)
		return
	}
	sub.poll.Reset(interval)
}

// fail ends the stream because the store failed under it, and logs why
// unless ctx ended (the client left).
func (sub *Subscription) fail(ctx context.Context, err error) {
	if ctx.Err() == nil {
		sub.s.log.WarnContext(ctx, "subscription ended", slog.String("turn", sub.turn.ID), slog.Any("err", err))
	}
	sub.end()
}

// end ends the stream.
func (sub *Subscription) end() {
	sub.ended, sub.live = true, nil
	if sub.poll != nil {
		sub.poll.Stop()
	}
}

// push queues a live event: one already queued is dropped, and a gap
// before it is filled from the store first.
func (sub *Subscription) push(ctx context.Context, e *Event) error {
	if e.Seq > sub.last+1 && !sub.final {
		if err := sub.catchUp(ctx); err != nil {
			return err
		}
	}
	sub.queueEvent(e)
	return nil
}

// queueEvent queues e unless it is at or before the last one queued, or after
// the final one.
func (sub *Subscription) queueEvent(e *Event) {
	if e.Seq <= sub.last || sub.final {
		return
	}
	sub.ready = append(sub.ready, e)
	sub.last, sub.final = e.Seq, e.Final()
}

// catchUp queues the stored events after the last one queued. A settled
// turn has its final event stored with the settle (FinishTurn,
// SettleTurn), as its last event: once that is queued, or when the
// subscriber already had it (it reconnected with the final event's id),
// the stream ends without anything more.
func (sub *Subscription) catchUp(ctx context.Context) error {
	s := sub.s
	sub.stale = false
	sub.resetPoll()
	var evs []Event
	var t Turn
	var err error
	onFreshStack(func() {
		if evs, err = s.store.Events(ctx, sub.turn.ID, sub.last); err != nil {
			err = fmt.Errorf("read events of turn %s: %w", sub.turn.ID, err)
			return
		}
		if len(evs) == 0 {
			if t, err = s.store.TurnByID(ctx, sub.turn.ID); err != nil {
				err = fmt.Errorf("read turn %s: %w", sub.turn.ID, err)
			}
		}
	})
	if err != nil {
		return err
	}
	for i := range evs {
		sub.queueEvent(&evs[i])
	}
	if len(evs) > 0 {
		return nil
	}
	// Settled with no event after the last one queued: the subscriber has
	// the final event already. (A turn settled after the events were read
	// has a LastSeq past it: the next catch-up or the live follow queues
	// its events.)
	if t.State.Final() && t.LastSeq <= sub.last {
		sub.final = true
	}
	return nil
}

// check reads the turn: its events if there are new ones (LastSeq counts
// the stored events), else whether it settled with the subscriber having
// its final event.
func (sub *Subscription) check(ctx context.Context) error {
	var t Turn
	var err error
	onFreshStack(func() { t, err = sub.s.store.TurnByID(ctx, sub.turn.ID) })
	if err != nil {
		return fmt.Errorf("read turn %s: %w", sub.turn.ID, err)
	}
	if t.LastSeq > sub.last {
		return sub.catchUp(ctx)
	}
	sub.resetPoll()
	sub.final = t.State.Final()
	return nil
}

// onFreshStack runs f, a call of the store or the follower, on a goroutine that
// ends with it, and waits for it: what f needs of a stack (deep, in the
// database driver) is not kept by the stack of the subscriber's goroutine,
// which waits with it for as long as the stream is open.
func onFreshStack(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// WaitTurn returns a turn once it is settled, or as it is when wait (or
// ctx) ends; a zero wait returns it at once. It waits on the turn's live
// events: it follows them first and reads the store after, so a turn
// settled in between is seen, and reads the store again at the turn's
// final event. A follow that ends early (the waiter fell behind, Redis was
// lost) reads the store and follows again; without a follower it reads the
// store at growing intervals.
func (s *Subscriptions) WaitTurn(ctx context.Context, conversationID string, number int, wait time.Duration) (Turn, error) {
	if err := seeConversation(ctx, s.store, conversationID); err != nil {
		return Turn{}, err
	}
	t, err := s.store.Turn(ctx, conversationID, number)
	if err != nil || t.State.Final() || wait <= 0 {
		return t, err
	}
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	w := turnWaiter{s: s, turn: t}
	final, err := w.wait(waitCtx)
	switch {
	case err != nil && ctx.Err() == nil && waitCtx.Err() == nil:
		return Turn{}, err
	case final:
		return w.turn, nil
	case ctx.Err() != nil:
		return w.turn, nil
	}
	// The wait ended: the turn as it is now.
	return s.store.Turn(ctx, conversationID, number)
}

// turnWaiter waits for a turn to settle.
type turnWaiter struct {
	s    *Subscriptions
	turn Turn
}

// wait returns true once the turn read from the store is settled, false
// when ctx ends first.
func (w *turnWaiter) wait(ctx context.Context) (bool, error) {
	s := w.s
	delay := 5 * time.Millisecond
	for ctx.Err() == nil {
		var live <-chan *Event
		if s.follower != nil {
			ch, err := s.follower.Follow(ctx, w.turn.ID, w.turn.LastSeq)
			if err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "follow turn events; polling the store", slog.String("turn", w.turn.ID), slog.Any("err", err))
			}
			live = ch
		}
		// Read the store after following starts: what settled before is
		// seen here, what settles after comes as an event.
		if final, err := w.check(ctx); err != nil || final {
			return final, err
		}
		if live == nil {
			select {
			case <-ctx.Done():
				return false, nil
			case <-time.After(delay):
			}
			delay = min(delay*2, 200*time.Millisecond)
			continue
		}
		if final, err := w.follow(ctx, live); err != nil || final {
			return final, err
		}
		// The follow ended early: pause, so that a Redis that is down is
		// not asked again at once.
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false, nil
}

// follow reads live events until the turn's final one (then true, once
// the store says so too), or until the follow ends (false).
func (w *turnWaiter) follow(ctx context.Context, live <-chan *Event) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case e, ok := <-live:
			if !ok {
				return false, nil
			}
			if !e.Final() {
				continue
			}
			if final, err := w.check(ctx); err != nil || final {
				return final, err
			}
		}
	}
}

// check reads the turn from the store and reports whether it is settled.
func (w *turnWaiter) check(ctx context.Context) (bool, error) {
	t, err := w.s.store.TurnByID(ctx, w.turn.ID)
	if err != nil {
		if ctx.Err() != nil {
			return false, nil
		}
		return false, fmt.Errorf("read turn %s: %w", w.turn.ID, err)
	}
	w.turn = t
	return t.State.Final(), nil
}

// SubscribeFeed returns a repository's turn state changes after the feed
// position after ("" = from now) until ctx ends.
func (s *Subscriptions) SubscribeFeed(ctx context.Context, repo, after string) (<-chan FeedEvent, error) {
	if _, err := s.catalog.repository(ctx, repo); err != nil {
		return nil, err
	}
	if s.follower == nil {
		return nil, Errorf(CodeUnavailable, "live events are not available on this server")
	}
	return s.follower.FollowFeed(ctx, repo, after)
}

// Transcript returns the stored events of a turn.
func (s *Subscriptions) Transcript(ctx context.Context, conversationID string, number int) ([]Event, error) {
	if err := seeConversation(ctx, s.store, conversationID); err != nil {
		return nil, err
	}
	t, err := s.store.Turn(ctx, conversationID, number)
	if err != nil {
		return nil, err
	}
	return s.store.Events(ctx, t.ID, 0)
}
