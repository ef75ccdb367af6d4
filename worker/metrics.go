package worker

import (
	"context"
	"time"

	"github.com/prchat/prchat/chat"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Prometheus metrics of turns and queues: it implements
// chat.Observer for turns, and collects queue depths on each scrape.
type Metrics struct {
	turns    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	wait     prometheus.Histogram
	repairs  prometheus.Counter
	seeded   prometheus.Counter
	tokens   *prometheus.CounterVec
	cost     *prometheus.CounterVec
	// bySession counts turn runs by how their session started;
	// sessionBytes the bytes of session files stored after turns;
	// restore the time restoring stored session files took.
	bySession    *prometheus.CounterVec
	sessionBytes *prometheus.CounterVec
	restore      *prometheus.HistogramVec
	queue        *Queue
	queueDesc    *prometheus.Desc
}

var _ chat.Observer = (*Metrics)(nil)

// NewMetrics registers the turn and queue metrics on reg. queue may be nil
// (no queue depths).
func NewMetrics(reg prometheus.Registerer, queue *Queue) *Metrics {
	m := &Metrics{
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prchat_turns_total", Help: "Settled turns by backend, final state and reason: by their runs, and by cancels and the reconciler (also before any run).",
		}, []string{"backend", "state", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "prchat_turn_duration_seconds", Help: "Time a worker spent on a turn, by backend.",
			Buckets: []float64{.01, .05, .1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"backend"}),
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "prchat_turn_queue_wait_seconds", Help: "Time from a question to the start of its run.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		repairs: prometheus.NewCounter(prometheus.CounterOpts{Name: "prchat_turn_repairs_total", Help: "Invalid answers sent back to the agent."}),
		seeded:  prometheus.NewCounter(prometheus.CounterOpts{Name: "prchat_seeded_sessions_total", Help: "Turns that started a seeded session."}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prchat_tokens_total", Help: "Model tokens by backend and direction.",
		}, []string{"backend", "direction"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prchat_cost_usd_total", Help: "Known model cost in USD by backend.",
		}, []string{"backend"}),
		bySession: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prchat_turns_by_session_total", Help: "Finished turn runs by backend and how their session started (forked, resumed, seeded, none).",
		}, []string{"backend", "session"}),
		sessionBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prchat_session_file_bytes_stored_total", Help: "Bytes of agent session files stored after turns (uncompressed), by backend.",
		}, []string{"backend"}),
		restore: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "prchat_session_restore_seconds", Help: "Time to load a stored agent session file and write it into the CLI's state before a turn, by backend.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"backend"}),
		queue:     queue,
		queueDesc: prometheus.NewDesc("prchat_queue_jobs", "Jobs in prchat's queues by queue and state.", []string{"queue", "state"}, nil),
	}
	reg.MustRegister(m.turns, m.duration, m.wait, m.repairs, m.seeded, m.tokens, m.cost, m.bySession, m.sessionBytes, m.restore)
	if queue != nil {
		reg.MustRegister(m)
	}
	return m
}

// TurnSettled records a finished run.
func (m *Metrics) TurnSettled(s chat.TurnStats) {
	m.turns.WithLabelValues(s.Backend, string(s.State), string(s.Reason)).Inc()
	if s.Duration > 0 {
		// A run's time; a turn settled without one has none.
		m.duration.WithLabelValues(s.Backend).Observe(s.Duration.Seconds())
	}
	if s.QueueWait > 0 {
		m.wait.Observe(s.QueueWait.Seconds())
	}
	m.repairs.Add(float64(s.Usage.Repairs))
	if s.Session != "" {
		m.bySession.WithLabelValues(s.Backend, string(s.Session)).Inc()
	}
	if s.SessionBytes > 0 {
		m.sessionBytes.WithLabelValues(s.Backend).Add(float64(s.SessionBytes))
	}
	if s.Restore > 0 {
		m.restore.WithLabelValues(s.Backend).Observe(s.Restore.Seconds())
	}
	if s.Session == chat.SessionSeeded {
		m.seeded.Inc()
	}
	m.tokens.WithLabelValues(s.Backend, "input").Add(float64(s.Usage.InputTokens))
	m.tokens.WithLabelValues(s.Backend, "output").Add(float64(s.Usage.OutputTokens))
	if s.Usage.CostUSD != nil {
		m.cost.WithLabelValues(s.Backend).Add(*s.Usage.CostUSD)
	}
}

// Describe implements prometheus.Collector for the queue depths.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.queueDesc }

// Collect implements prometheus.Collector: the queue depths, read on each
// scrape.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	stats, err := m.queue.Stats(ctx)
	if err != nil {
		return
	}
	for _, q := range stats {
		for state, n := range map[string]int{"pending": q.Pending, "active": q.Active, "scheduled": q.Scheduled, "retry": q.Retry, "archived": q.Archived} {
			ch <- prometheus.MustNewConstMetric(m.queueDesc, prometheus.GaugeValue, float64(n), q.Queue, state)
		}
	}
}
