package chat

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSummarise(t *testing.T) {
	until := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	since := until.Add(-7 * 24 * time.Hour)
	day1 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	day2 := time.Date(2026, 11, 29, 23, 59, 0, 0, time.UTC)
	at := func(base time.Time, secs int) *time.Time { t := base.Add(time.Duration(secs) * time.Second); return &t }
	c := func(v float64) *float64 { return &v }
	facts := []TurnFact{
		{Repository: "a/x", Backend: "openai", State: StateSucceeded, CreatedAt: day1, FinishedAt: at(day1, 10), CostUSD: c(0.5), Repairs: 1},
		{Repository: "a/x", Backend: "openai", State: StateSucceeded, CreatedAt: day1, FinishedAt: at(day1, 20), CostUSD: c(0.25)},
		{Repository: "a/x", Backend: "codex", State: StateSucceeded, CreatedAt: day2, FinishedAt: at(day2, 30), Session: SessionSeeded},
		{Repository: "a/y", Backend: "openai", State: StateFailed, Reason: ReasonTimeout, CreatedAt: day2, FinishedAt: at(day2, 600)},
		{Repository: "a/y", Backend: "openai", State: StateFailed, Reason: ReasonTimeout, CreatedAt: day2},
		{Repository: "a/y", Backend: "local", State: StateCancelled, Reason: ReasonCancelled, CreatedAt: day2},
		{Repository: "a/y", Backend: "openai", State: StateRunning, CreatedAt: until.Add(-time.Minute)},
		// Queued since before the window: counts in the queue only.
		{Repository: "a/x", Backend: "openai", State: StateQueued, CreatedAt: since.Add(-time.Hour)},
	}
	got := summarise(facts, since, until, "")
	oldest := since.Add(-time.Hour)
	want := Stats{
		Since: since, Until: until, Turns: 7,
		Days: []DayCount{
			{Day: "2026-11-28", State: StateSucceeded, Backend: "openai", Turns: 2},
			{Day: "2026-11-29", State: StateSucceeded, Backend: "codex", Turns: 1},
			{Day: "2026-11-29", State: StateCancelled, Backend: "local", Turns: 1},
			{Day: "2026-11-29", State: StateFailed, Backend: "openai", Turns: 2},
			{Day: "2026-11-30", State: StateRunning, Backend: "openai", Turns: 1},
		},
		TimeToAnswer: Durations{Count: 3, P50: 20, P95: 30},
		Cost: []CostLine{
			{Repository: "a/x", Backend: "codex", Turns: 1, UnknownCost: 1},
			{Repository: "a/x", Backend: "openai", Turns: 2, CostUSD: 0.75},
			{Repository: "a/y", Backend: "local", Turns: 1, UnknownCost: 1},
			{Repository: "a/y", Backend: "openai", Turns: 3, UnknownCost: 2},
		},
		Repairs: 1, Seeded: 1,
		Failures: []ReasonCount{
			{State: StateFailed, Reason: ReasonTimeout, Turns: 2},
			{State: StateCancelled, Reason: ReasonCancelled, Turns: 1},
		},
		Queue: QueueFigures{Queued: 1, Running: 1, OldestQueuedAt: &oldest, OldestQueuedSeconds: until.Sub(oldest).Seconds()},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("summarise (-want +got):\n%s", d)
	}
}

func TestDurationsNearestRank(t *testing.T) {
	for _, tc := range []struct {
		in       []float64
		p50, p95 float64
	}{
		{nil, 0, 0},
		{[]float64{7}, 7, 7},
		{[]float64{4, 1, 3, 2}, 2, 4},
		{func() []float64 {
			s := make([]float64, 100)
			for i := range s {
				s[i] = float64(100 - i)
			}
			return s
		}(), 50, 95},
	} {
		d := durations(tc.in)
		if d.Count != len(tc.in) || d.P50 != tc.p50 || d.P95 != tc.p95 {
			t.Errorf("durations(%v) = %+v, want p50 %v p95 %v", tc.in, d, tc.p50, tc.p95)
		}
	}
}
