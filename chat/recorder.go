package chat

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prchat/prchat/chat/mask"
)

// recorder stores and sends the events of one run of a turn: it masks
// them (text deltas through a streaming masker, so a secret split across
// deltas is masked too), numbers them after the turn's last stored event,
// stores them under the run's fence in batches, and publishes what it
// stored. Once the store says the run is fenced off it drops everything.
type recorder struct {
	s      *Runner
	turnID string
	fence  int64

	mu      sync.Mutex // guards what follows
	seq     int64
	pending []Event
	feed    []FeedEvent // the feed's news of the turn, sent with the next events
	fenced  bool
	text    *mask.Stream    // masks the text deltas of the current stretch
	timer   *time.Timer     // stores batched text deltas
	notes   map[string]bool // note lines already emitted: each is shown once
}

// newRecorder returns the recorder of the run of turnID holding fence,
// whose events follow the stored one numbered lastSeq.
func newRecorder(s *Runner, turnID string, fence, lastSeq int64) *recorder {
	return &recorder{s: s, turnID: turnID, fence: fence, seq: lastSeq}
}

// addFeed queues a repository feed event, sent with the next events.
func (r *recorder) addFeed(fe FeedEvent) {
	r.mu.Lock()
	r.feed = append(r.feed, fe)
	r.mu.Unlock()
}

// textFlushDelay is how long text deltas may wait to be stored together.
const textFlushDelay = 100 * time.Millisecond

// emit masks an event, numbers it and stores it. Text deltas go through a
// streaming masker, so a secret split across deltas is masked too, and are
// stored in batches (at most textFlushDelay late).
func (r *recorder) emit(ctx context.Context, e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fenced {
		return
	}
	if e.At.IsZero() {
		e.At = r.s.now()
	}
	if e.Type == EventTextDelta {
		if r.text == nil {
			r.text = r.s.masker.Stream()
		}
		if e.Text = r.text.Write(e.Text); e.Text == "" {
			return // held back: it may be the start of a secret
		}
		r.add(e)
		if len(r.pending) >= 32 || e.At.Sub(r.pending[0].At) >= textFlushDelay {
			r.flushLocked(ctx)
		} else {
			r.flushSoon(ctx)
		}
		return
	}
	if e.Type == EventNote {
		if e.Text = r.newNoteLines(e.Text); e.Text == "" {
			return // said already
		}
	}
	r.endText(e.At)
	m := r.s.masker
	e.Text, e.Summary, e.Message = m.String(e.Text), m.String(e.Summary), m.String(e.Message)
	if len(e.Input) > 0 {
		e.Input = maskJSON(m, e.Input)
	}
	r.add(e)
	switch {
	case e.Type == EventDone, e.Type == EventError, e.Type == EventUsage, e.Type == EventState && e.State.Final():
		return // stored with the outcome
	case e.Type == EventState:
		// "running" waits for the agent's first events, or textFlushDelay:
		// a quick turn stores it with its outcome, in one transaction.
		r.flushSoon(ctx)
		return
	}
	r.flushLocked(ctx)
}

// newNoteLines returns the lines of a note not emitted before in this run,
// and remembers them: the final note repeats what the run said along the
// way (a seeded session's reason), and a client should read each once. The
// caller holds r.mu.
func (r *recorder) newNoteLines(note string) string {
	if r.notes == nil {
		r.notes = map[string]bool{}
	}
	var fresh []string
	for _, line := range strings.Split(note, "\n") {
		if strings.TrimSpace(line) == "" || r.notes[line] {
			continue
		}
		r.notes[line] = true
		fresh = append(fresh, line)
	}
	return strings.Join(fresh, "\n")
}

// flushSoon stores the pending events within textFlushDelay, unless
// something stores them sooner. The caller holds r.mu.
func (r *recorder) flushSoon(ctx context.Context) {
	if r.timer != nil {
		return
	}
	fctx := context.WithoutCancel(ctx)
	r.timer = time.AfterFunc(textFlushDelay, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.timer = nil
		r.flushLocked(fctx)
	})
}

// endText releases what the streaming masker still holds back.
func (r *recorder) endText(at time.Time) {
	if r.text == nil {
		return
	}
	if rest := r.text.Flush(); rest != "" {
		r.add(Event{Type: EventTextDelta, Text: rest, At: at})
	}
	r.text = nil
}

// add numbers an event, encodes it (once, for the store and the
// publisher) and queues it to be stored.
func (r *recorder) add(e Event) {
	r.seq++
	e.Seq = r.seq
	e.encode()
	r.pending = append(r.pending, e)
}

// flush stores the pending events.
func (r *recorder) flush(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.endText(r.s.now())
	r.flushLocked(ctx)
}

// take returns the pending events for the outcome and stops batching.
func (r *recorder) take() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	evs := r.pending
	r.pending = nil
	return evs
}

// flushLocked stores the pending events and sends them live; a fenced run
// stops emitting. The caller holds r.mu.
func (r *recorder) flushLocked(ctx context.Context) {
	if len(r.pending) == 0 || r.fenced {
		return
	}
	evs := r.pending
	r.pending = nil
	err := r.s.store.AppendEvents(ctx, r.turnID, r.fence, evs)
	switch {
	case errors.Is(err, ErrFenced):
		r.fenced = true
		return
	case Unavailable(err):
		// Kept for the next flush or the outcome: the database is back by
		// then, or the run ends without settling.
		r.pending = append(evs, r.pending...)
		r.s.log.WarnContext(ctx, "store events: database unreachable; kept for later", slog.String("turn", r.turnID), slog.Int("events", len(evs)))
		return
	case err != nil:
		r.s.log.WarnContext(ctx, "store events", slog.String("turn", r.turnID), slog.Any("err", err))
		return
	}
	feed := r.feed
	r.feed = nil
	r.s.notify.publish(ctx, r.turnID, evs, feed...)
}

// takeFeed returns the feed events not yet published.
func (r *recorder) takeFeed() []FeedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	feed := r.feed
	r.feed = nil
	return feed
}
