package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// durations is a set of measured latencies.
type durations []time.Duration

// sorted returns the latencies in increasing order.
func (d durations) sorted() durations {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted latencies,
// by the nearest-rank method, and 0 for none.
func (d durations) percentile(p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	rank := int(float64(len(d))*p/100+0.999999) - 1
	return d[min(max(rank, 0), len(d)-1)]
}

// p50p99 formats the median and the 99th percentile of sorted latencies.
func (d durations) p50p99() string {
	if len(d) == 0 {
		return "n/a"
	}
	return ms(d.percentile(50)) + " / " + ms(d.percentile(99))
}

// ms formats a duration in milliseconds.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 100:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}

// mb formats a byte count in megabytes.
func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }

// rate formats operations per second.
func rate(v float64) string {
	if v < 100 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// loadResult is what a timed load measured: the operations that completed
// inside its window.
type loadResult struct {
	ops    int
	errs   int
	window time.Duration
	lat    durations // sorted
	// firstErr is the first error of an operation, to show what failed.
	firstErr error
}

// perSecond is the rate of completed operations.
func (r loadResult) perSecond() float64 {
	if r.window <= 0 {
		return 0
	}
	return float64(r.ops) / r.window.Seconds()
}

// add merges another window of the same load (another round).
func (r loadResult) add(o loadResult) loadResult {
	r.ops += o.ops
	r.errs += o.errs
	r.window += o.window
	r.lat = append(r.lat, o.lat...).sorted()
	if r.firstErr == nil {
		r.firstErr = o.firstErr
	}
	return r
}

// median is the middle of vs (the mean of the two middle ones for an even
// count); vs is not changed.
func median(vs []float64) float64 {
	s := slices.Sorted(slices.Values(vs))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// verdict says whether a goal is met.
func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// report is the table the bench prints.
type report struct {
	rows  [][5]string
	notes []string
}

// add adds a row: section, measure, value, goal and verdict.
func (r *report) add(section, measure, value, goal, verdict string) {
	r.rows = append(r.rows, [5]string{section, measure, value, goal, verdict})
}

// note adds a line under the table.
func (r *report) note(s string) { r.notes = append(r.notes, s) }

func (r *report) print(w io.Writer) {
	if len(r.rows) == 0 && len(r.notes) == 0 {
		return
	}
	order := []string{"floor", "intake P1", "overhead P2", "throughput P3", "memory P7", "events", "running", "sessions"}
	rows := slices.Clone(r.rows)
	slices.SortStableFunc(rows, func(a, b [5]string) int {
		return slices.Index(order, a[0]) - slices.Index(order, b[0])
	})
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "section\tmeasure\tvalue\tgoal\t")
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", row[0], row[1], row[2], row[3], row[4])
	}
	_ = tw.Flush()
	if len(r.notes) > 0 {
		fmt.Fprintln(w, "\nnotes:")
		for _, n := range r.notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
}
