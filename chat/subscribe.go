package chat

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// pollInterval is how often a following subscription reads the store
// anyway: a safety net for an event whose live delivery was lost without a
// gap showing (a gap, or a dropped follow, makes it read the store at once).
const pollInterval = 15 * time.Second

// Subscribe returns a turn's events with Seq > after, in order and each
// once: the stored ones first, then the live ones as the worker emits them.
// The channel closes after the final event (done or error), or when ctx
// ends. A turn that settled before the call still gets its whole stream;
// for a settled turn whose final event is at or before after (the client
// reconnects having had it) the channel closes with no event: nothing is
// sent twice.
func (s *Service) Subscribe(ctx context.Context, conversationID string, number int, after int64) (<-chan Event, error) {
	if err := s.seeConversation(ctx, conversationID); err != nil {
		return nil, err
	}
	t, err := s.store.Turn(ctx, conversationID, number)
	if err != nil {
		return nil, err
	}
	out := make(chan Event, 16)
	go func() {
		defer close(out)
		sub := subscription{s: s, turn: t, last: after, out: out}
		if err := sub.run(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "subscription ended", slog.String("turn", t.ID), slog.Any("err", err))
		}
	}()
	return out, nil
}

// subscription merges a turn's stored and live events.
type subscription struct {
	s    *Service
	turn Turn
	last int64
	out  chan<- Event
	done bool
}

func (sub *subscription) run(ctx context.Context) error {
	s := sub.s
	for !sub.done {
		var live <-chan Event
		if s.follower != nil {
			// Follow before reading the store, so that nothing published
			// between the two is missed; duplicates are dropped by seq.
			ch, err := s.follower.Follow(ctx, sub.turn.ID, sub.last)
			if err != nil {
				s.log.WarnContext(ctx, "follow turn events; polling the store", slog.String("turn", sub.turn.ID), slog.Any("err", err))
			} else {
				live = ch
			}
		}
		if err := sub.catchUp(ctx); err != nil || sub.done {
			return err
		}
		interval := pollInterval
		if live == nil {
			interval = 250 * time.Millisecond
		}
		tick := time.NewTicker(interval)
	follow:
		for !sub.done {
			select {
			case <-ctx.Done():
				tick.Stop()
				return nil
			case e, ok := <-live:
				if !ok {
					break follow // fell behind or lost Redis: catch up and follow again
				}
				if e.Seq <= sub.last {
					continue
				}
				if e.Seq > sub.last+1 {
					if err := sub.catchUp(ctx); err != nil {
						tick.Stop()
						return err
					}
					if e.Seq <= sub.last {
						continue
					}
				}
				if !sub.send(ctx, e) {
					tick.Stop()
					return nil
				}
			case <-tick.C:
				if err := sub.catchUp(ctx); err != nil {
					tick.Stop()
					return err
				}
			}
		}
		tick.Stop()
		if !sub.done {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// catchUp sends the stored events after the last one sent. A settled turn
// has its final event stored with the settle (FinishTurn, SettleTurn), as
// its last event: once that is sent, or when the subscriber already had it
// (it reconnected with the final event's id), the subscription ends
// without sending anything more.
func (sub *subscription) catchUp(ctx context.Context) error {
	s := sub.s
	evs, err := s.store.Events(ctx, sub.turn.ID, sub.last)
	if err != nil {
		return fmt.Errorf("read events of turn %s: %w", sub.turn.ID, err)
	}
	for _, e := range evs {
		if !sub.send(ctx, e) || sub.done {
			return nil
		}
	}
	if len(evs) > 0 {
		return nil
	}
	t, err := s.store.TurnByID(ctx, sub.turn.ID)
	if err != nil {
		return fmt.Errorf("read turn %s: %w", sub.turn.ID, err)
	}
	// Settled with no event after the last one sent: the subscriber has
	// the final event already. (A turn settled after the events were read
	// has a LastSeq past it: the next catch-up or the live follow sends
	// its events.)
	if t.State.Final() && t.LastSeq <= sub.last {
		sub.done = true
	}
	return nil
}

// send delivers e unless ctx ended, and notes a final event.
func (sub *subscription) send(ctx context.Context, e Event) bool {
	select {
	case sub.out <- e:
		sub.last = e.Seq
		sub.done = e.Final()
		return true
	case <-ctx.Done():
		return false
	}
}

// WaitTurn returns a turn once it is settled, or as it is when wait (or
// ctx) ends; a zero wait returns it at once. It waits on the turn's live
// events: it follows them first and reads the store after, so a turn
// settled in between is seen, and reads the store again at the turn's
// final event. A follow that ends early (the waiter fell behind, Redis was
// lost) reads the store and follows again; without a follower it reads the
// store at growing intervals.
func (s *Service) WaitTurn(ctx context.Context, conversationID string, number int, wait time.Duration) (Turn, error) {
	if err := s.seeConversation(ctx, conversationID); err != nil {
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
	s    *Service
	turn Turn
}

// wait returns true once the turn read from the store is settled, false
// when ctx ends first.
func (w *turnWaiter) wait(ctx context.Context) (bool, error) {
	s := w.s
	delay := 5 * time.Millisecond
	for ctx.Err() == nil {
		var live <-chan Event
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
func (w *turnWaiter) follow(ctx context.Context, live <-chan Event) (bool, error) {
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
func (s *Service) SubscribeFeed(ctx context.Context, repo, after string) (<-chan FeedEvent, error) {
	if _, err := s.repository(ctx, repo); err != nil {
		return nil, err
	}
	if s.follower == nil {
		return nil, Errorf(CodeUnavailable, "live events are not available on this server")
	}
	return s.follower.FollowFeed(ctx, repo, after)
}

// Transcript returns the stored events of a turn.
func (s *Service) Transcript(ctx context.Context, conversationID string, number int) ([]Event, error) {
	if err := s.seeConversation(ctx, conversationID); err != nil {
		return nil, err
	}
	t, err := s.store.Turn(ctx, conversationID, number)
	if err != nil {
		return nil, err
	}
	return s.store.Events(ctx, t.ID, 0)
}
