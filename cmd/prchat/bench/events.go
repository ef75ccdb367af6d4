package bench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// eventsPerTurn and eventsInterval are the tool_result events each
	// turn of the events phase emits, and their spacing.
	eventsPerTurn  = 50
	eventsInterval = 20 * time.Millisecond
	// subscribersPerTurn is how many subscribers follow one turn.
	subscribersPerTurn = 100
	// connectParallelism bounds the subscriptions being opened at once.
	connectParallelism = 32
)

// eventsHold is how long the turns of the events phase wait before their
// first event: long enough for n subscribers to connect on a busy machine.
func eventsHold(n int) time.Duration {
	return min(2*time.Second+time.Duration(n)*4*time.Millisecond, 30*time.Second)
}

// goStats reads the Go runtime gauges of d's /metrics.
func (b *bencher) goStats(ctx context.Context, d *benchDaemon) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read metrics: HTTP %d", resp.StatusCode)
	}
	want := map[string]bool{"go_goroutines": true, "go_memstats_heap_inuse_bytes": true, "go_memstats_stack_inuse_bytes": true}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !want[name] {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			out[name] = v
		}
	}
	if len(out) != len(want) {
		return nil, fmt.Errorf("read metrics: %d of the %d Go gauges found", len(out), len(want))
	}
	return out, sc.Err()
}

// events opens n subscribers on the API process api, spread over turns
// that emit timestamped events, and measures the delivery latency (receive
// time minus the send time the bench agent writes in each tool_result's
// summary) and the API process's memory per subscriber.
func (b *bencher) events(ctx context.Context, api *benchDaemon, n int) error {
	k := min(max((n+subscribersPerTurn-1)/subscribersPerTurn, 1), b.cfg.Concurrency)
	hold := eventsHold(n)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.cfg.Settle / 3): // let the fresh daemon settle
	}
	before, rssErr := api.rss()
	goBefore, goErr := b.goStats(ctx, api)
	cpuBefore, cpuErr := api.cpu()

	body := askBody(fmt.Sprintf("events=%d interval=%s hold=%s", eventsPerTurn, eventsInterval, hold))
	convs := make([]string, k)
	for i := range convs {
		var err error
		if convs[i], err = b.ask(ctx, api.url, body, true); err != nil {
			return fmt.Errorf("events: %w", err)
		}
	}
	askedAt := time.Now()

	client := &http.Client{Transport: &http.Transport{
		DialContext:        (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		DisableCompression: true,
		DisableKeepAlives:  true,
	}}
	defer client.CloseIdleConnections()
	sctx, cancel := context.WithTimeout(ctx, hold+eventsPerTurn*eventsInterval+time.Minute)
	defer cancel()
	lat := make([]durations, n)
	finals := make([]string, n)
	errs := make([]error, n)
	sem := make(chan struct{}, connectParallelism)
	var connected, done sync.WaitGroup
	connected.Add(n)
	for i := range n {
		done.Go(func() {
			sem <- struct{}{}
			up := sync.OnceFunc(func() { <-sem; connected.Done() })
			defer up()
			finals[i], errs[i] = follow(sctx, client, api.url, convs[i%k], up, func(data []byte, at time.Time) {
				if ns, ok := summaryNanos(data); ok {
					lat[i] = append(lat[i], time.Duration(at.UnixNano()-ns))
				}
			})
		})
	}
	connected.Wait()
	connectedAt := time.Now()
	// Let the last subscriptions register with the event reader.
	select {
	case <-sctx.Done():
	case <-time.After(500 * time.Millisecond):
	}
	with, rssErr2 := api.rss()
	goWith, goErr2 := b.goStats(ctx, api)
	done.Wait()
	cpuAfter, cpuErr2 := api.cpu()

	var all durations
	failed, late := 0, connectedAt.After(askedAt.Add(hold))
	var firstErr error
	for i := range n {
		all = append(all, lat[i]...)
		if errs[i] != nil || finals[i] != "done" {
			failed++
			if firstErr == nil {
				firstErr = errs[i]
				if firstErr == nil {
					firstErr = fmt.Errorf("the stream ended with %q", finals[i])
				}
			}
		}
	}
	all = all.sorted()
	turns := "turns"
	if k == 1 {
		turns = "turn"
	}
	what := fmt.Sprintf("%d subscribers on %d %s: delivery p50 / p99", n, k, turns)
	b.rep.add("events", what, all.p50p99(), "", "")
	perSub := "n/a"
	if rssErr == nil && rssErr2 == nil {
		perSub = fmt.Sprintf("%.1f KB", float64(with-before)/float64(n)/1024)
	}
	b.rep.add("events", fmt.Sprintf("%d subscribers: %s RSS per subscriber", n, api.name), perSub, "", "")
	if goErr == nil && goErr2 == nil {
		per := func(k string) float64 { return (goWith[k] - goBefore[k]) / float64(n) }
		b.rep.add("events", "  of which Go heap in use / stacks, per subscriber",
			fmt.Sprintf("%.1f KB / %.1f KB", per("go_memstats_heap_inuse_bytes")/1024, per("go_memstats_stack_inuse_bytes")/1024), "", "")
		b.rep.add("events", "  goroutines per subscriber", fmt.Sprintf("%.1f", per("go_goroutines")), "", "")
	}
	if cpuErr == nil && cpuErr2 == nil && len(all) > 0 {
		b.rep.add("events", fmt.Sprintf("  %s CPU per delivered event", api.name),
			fmt.Sprintf("%.0f µs", float64((cpuAfter-cpuBefore).Microseconds())/float64(len(all))), "", "")
	}
	if want := n * eventsPerTurn; len(all) != want {
		b.rep.note(fmt.Sprintf("events (%d subscribers): %d of %d tool_result events received", n, len(all), want))
	}
	if failed > 0 {
		b.rep.note(fmt.Sprintf("events (%d subscribers): %d streams did not end with done; first: %v", n, failed, firstErr))
	}
	if late {
		b.rep.note(fmt.Sprintf("events (%d subscribers): the last subscriber connected %s after the asks, after the turns' hold of %s; its first events came from the stored replay",
			n, connectedAt.Sub(askedAt).Round(time.Millisecond), hold))
	}
	if n == b.cfg.Subscribers[0] {
		b.rep.note(fmt.Sprintf("events: one turn per %d subscribers (at most --concurrency turns); each waits 2 s + 4 ms per subscriber for them to connect, then emits %d tool_result events %s apart; latency is the time the bench read an event minus the send time the agent wrote in it; CPU per delivered event counts the API process's CPU from the asks to the last done event (subscribing, holding and sending) over the events delivered",
			subscribersPerTurn, eventsPerTurn, eventsInterval))
	}
	return nil
}
