package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prchat/prchat/chat"
	"github.com/prometheus/client_golang/prometheus"
)

// Replies is what the Outbox drives: the webhook questions of
// *chat.Webhooks.
type Replies interface {
	DeliverReplies(ctx context.Context) (int, error)
}

// OutboxConfig configures an Outbox.
type OutboxConfig struct {
	// Interval is how often due webhook questions are looked for. Default 1s.
	Interval time.Duration
	// Wake, if set, starts a pass at once whenever it receives (a turn
	// settled in this process, whose answer is then posted without
	// waiting for the interval). Wake-ups during a pass make one more.
	Wake   <-chan struct{}
	Logger *slog.Logger
}

// Outbox asks the webhook questions that could not be asked at once and
// posts the answers of settled turns back to their forge, with retries and
// backoff (chat.Webhooks.DeliverReplies does the work; the database holds
// what is due, so any number of processes may run an Outbox).
type Outbox struct {
	replies Replies
	cfg     OutboxConfig
	log     *slog.Logger
	lc      *lifecycle
}

// NewOutbox returns an Outbox of replies.
func NewOutbox(replies Replies, cfg OutboxConfig) (*Outbox, error) {
	cfg.Interval = cmp.Or(cfg.Interval, time.Second)
	if cfg.Interval < 10*time.Millisecond {
		return nil, fmt.Errorf("outbox interval %v is under 10ms", cfg.Interval)
	}
	if replies == nil {
		return nil, errors.New("worker outbox: replies are required")
	}
	return &Outbox{replies: replies, cfg: cfg, log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)), lc: newLifecycle("worker outbox")}, nil
}

// Start runs the Outbox until Stop or ctx ends.
func (o *Outbox) Start(ctx context.Context) error {
	return o.lc.start(ctx, nil, o.loop)
}

func (o *Outbox) loop(ctx context.Context) {
	t := time.NewTicker(o.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-o.cfg.Wake:
		}
		// A full pass may leave more due: go on at once.
		for {
			n, err := o.replies.DeliverReplies(ctx)
			if err != nil && ctx.Err() == nil {
				o.log.WarnContext(ctx, "deliver webhook replies", slog.Any("err", err))
			}
			if err != nil || n < 50 || ctx.Err() != nil {
				break
			}
		}
	}
}

// Waker returns a channel for OutboxConfig.Wake and a chat.Observer that
// wakes it (without blocking) whenever a turn settles, besides telling
// next, if set.
func Waker(next chat.Observer) (<-chan struct{}, chat.Observer) {
	w := waker{next: next, ch: make(chan struct{}, 1)}
	return w.ch, w
}

type waker struct {
	next chat.Observer
	ch   chan struct{}
}

func (w waker) TurnSettled(s chat.TurnStats) {
	if w.next != nil {
		w.next.TurnSettled(s)
	}
	select {
	case w.ch <- struct{}{}:
	default: // a pass is due already
	}
}

// Stop stops the Outbox and waits for its pass to end. Safe to call twice.
func (o *Outbox) Stop() { o.lc.stop(nil, nil) }

// ReplyMetrics count the answers posted to forges and those given up. It
// implements chat.CommentObserver.
type ReplyMetrics struct {
	replies *prometheus.CounterVec
}

var _ chat.CommentObserver = (*ReplyMetrics)(nil)

// NewReplyMetrics registers the reply metrics on reg.
func NewReplyMetrics(reg prometheus.Registerer) *ReplyMetrics {
	m := &ReplyMetrics{replies: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "prchat_webhook_replies_total",
		Help: "Replies to webhook questions by forge and outcome (posted: an answer; declined: why a question is not answered; failed: given up after retries).",
	}, []string{"forge", "outcome"})}
	reg.MustRegister(m.replies)
	return m
}

// ReplyPosted counts a posted answer.
func (m *ReplyMetrics) ReplyPosted(forge string) { m.replies.WithLabelValues(forge, "posted").Inc() }

// ReplyDeclined counts a posted reply saying why a question is not
// answered.
func (m *ReplyMetrics) ReplyDeclined(forge string) {
	m.replies.WithLabelValues(forge, "declined").Inc()
}

// ReplyFailed counts a reply given up.
func (m *ReplyMetrics) ReplyFailed(forge string) { m.replies.WithLabelValues(forge, "failed").Inc() }
