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
// ends. A turn that settled before the call still gets its whole stream.
func (s *Service) Subscribe(ctx context.Context, conversationID string, number int, after int64) (<-chan Event, error) {
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

// catchUp sends the stored events after the last one sent. A turn that is
// settled but whose final event was never stored (its settler died in
// between) gets one made from the turn.
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
	if !t.State.Final() || t.LastSeq > sub.last {
		return nil
	}
	e := Event{Seq: sub.last + 1, Type: EventError, Message: t.Note, Reason: t.Reason, At: s.now()}
	if t.State == StateSucceeded {
		e = Event{Seq: sub.last + 1, Type: EventDone, ConversationID: t.ConversationID, Turn: t.Number, Answer: t.Answer, At: s.now()}
	}
	sub.send(ctx, e)
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
	t, err := s.store.Turn(ctx, conversationID, number)
	if err != nil {
		return nil, err
	}
	return s.store.Events(ctx, t.ID, 0)
}
