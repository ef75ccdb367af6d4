package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/cmd/prchat-bench/benchagent"
	"github.com/prchat/prchat/store"
	"github.com/prchat/prchat/worker"
)

const (
	// loadGrace is how long an operation still running when its load
	// phase ends may take to finish.
	loadGrace = 30 * time.Second
	// floorHost names the queue (host:bench-floor) the floor enqueues to:
	// no worker consumes it, and the bench deletes it after each round.
	floorHost = "bench-floor"
	// benchQuestion is the question of the intake and throughput asks: no
	// directives, so the bench agent answers at once.
	benchQuestion = "Why did the review flag bench.txt?"
)

// newLoadClient returns an HTTP client that keeps up to conns connections
// to the daemon open.
func newLoadClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}}
}

// runLoad runs op in n concurrent loops for warm + dur and returns the
// operations that completed in the dur window after the warm-up. Loops
// start no operation after the window; one still running gets loadGrace
// to end. With pace > 0 each loop starts an operation every pace (the
// loops spread evenly over it) instead of right after the last one, and an
// operation's latency counts from the time it was due, so that a daemon
// that falls behind is not spared the wait of the operations it delayed.
func runLoad(ctx context.Context, n int, warm, dur, pace time.Duration, op func(ctx context.Context) error) loadResult {
	start := time.Now()
	from, until := start.Add(warm), start.Add(warm+dur)
	opCtx, cancel := context.WithDeadline(ctx, until.Add(loadGrace))
	defer cancel()
	type loop struct {
		lat  durations
		errs int
		err  error
	}
	loops := make([]loop, n)
	var wg sync.WaitGroup
	for i := range loops {
		l := &loops[i]
		due := start.Add(pace * time.Duration(i) / time.Duration(n))
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(until) {
				t0 := time.Now()
				if pace > 0 {
					if wait := time.Until(due); wait > 0 {
						time.Sleep(wait)
					}
					t0, due = due, due.Add(pace)
				}
				err := op(opCtx)
				t1 := time.Now()
				if t1.Before(from) || t1.After(until) {
					continue
				}
				if err != nil {
					l.errs++
					if l.err == nil {
						l.err = err
					}
					// A failing daemon must not turn the loop into a spin.
					time.Sleep(time.Millisecond)
					continue
				}
				l.lat = append(l.lat, t1.Sub(t0))
			}
		})
	}
	wg.Wait()
	end := time.Now()
	if end.After(until) {
		end = until
	}
	r := loadResult{window: max(end.Sub(from), 0)}
	for _, l := range loops {
		r.ops += len(l.lat)
		r.errs += l.errs
		r.lat = append(r.lat, l.lat...)
		if r.firstErr == nil {
			r.firstErr = l.err
		}
	}
	r.lat = r.lat.sorted()
	return r
}

// askBody is the JSON body of a question.
func askBody(question string) []byte {
	b, _ := json.Marshal(map[string]string{"question": question})
	return b
}

// ask posts a new question about the bench review (a new conversation) to
// the API at base. With wantID it returns the conversation's id.
func (b *bencher) ask(ctx context.Context, base string, body []byte, wantID bool) (string, error) {
	return b.askAt(ctx, base, b.askPath, body, wantID)
}

// askOn posts a new question to the conversations of another review, at
// path, and returns the conversation's id.
func (b *bencher) askOn(ctx context.Context, base, path string, body []byte) (string, error) {
	return b.askAt(ctx, base, path, body, true)
}

func (b *bencher) askAt(ctx context.Context, base, path string, body []byte, wantID bool) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("ask: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return "", fmt.Errorf("ask: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
	}
	if !wantID {
		_, err = io.Copy(io.Discard, resp.Body)
		return "", err
	}
	var out struct {
		Conversation struct {
			ID string `json:"id"`
		} `json:"conversation"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Conversation.ID == "" {
		return "", fmt.Errorf("ask: no conversation id in the answer (%v)", err)
	}
	return out.Conversation.ID, nil
}

// postJSON sends a setup request and checks its status.
func (b *bencher) postJSON(ctx context.Context, url string, body any, want ...int) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.http.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	for _, w := range want {
		if resp.StatusCode == w {
			return nil
		}
	}
	return fmt.Errorf("POST %s: HTTP %d: %s", url, resp.StatusCode, bytes.TrimSpace(msg))
}

// follow reads the SSE stream of turn 1 of conversation conv until its done
// or error event and returns that event's type. connected is called once
// the stream's headers arrived; onData gets every data line with the time
// it was read. With toEnd it goes on reading until the server ends the
// stream, as an EventSource does (it cannot tell a final event), rather
// than closing at the final event.
func follow(ctx context.Context, client *http.Client, base, conv string, toEnd bool, connected func(), onData func(data []byte, at time.Time)) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/conversations/"+conv+"/turns/1/events", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("subscribe: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return "", fmt.Errorf("subscribe: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
	}
	if connected != nil {
		connected()
	}
	br := bufio.NewReaderSize(resp.Body, 8192)
	var long []byte
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if err != nil {
			return "", fmt.Errorf("read events of conversation %s: %w", conv, err)
		}
		at := time.Now()
		if long != nil {
			line = append(long, line...)
			long = nil
		}
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		if onData != nil {
			onData(data, at)
		}
		switch typ := jsonString(data, "type"); typ {
		case "done", "error":
			if toEnd {
				if _, err := io.Copy(io.Discard, br); err != nil {
					return typ, fmt.Errorf("read the end of the events of conversation %s: %w", conv, err)
				}
			}
			return typ, nil
		}
	}
}

// jsonString returns the string value of a top-level field of a compact
// JSON object without decoding it (the events phase reads a great many).
// It does not unescape; the fields it reads hold no escapes.
func jsonString(data []byte, field string) string {
	key := `"` + field + `":"`
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return ""
	}
	rest := data[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}

// summaryNanos returns the send time a bench agent's tool_result event
// carries in its summary, or false for any other event.
func summaryNanos(data []byte) (int64, bool) {
	if !bytes.Contains(data, []byte(`"type":"tool_result"`)) {
		return 0, false
	}
	n, err := strconv.ParseInt(jsonString(data, "summary"), 10, 64)
	return n, err == nil
}

// floor is the intake's floor: in the bench's process, with no HTTP, what
// every first question must do: insert the conversation and its turn in
// one transaction and enqueue the turn's job.
type floor struct {
	st       *store.Store
	rdb      redis.UniversalClient
	embedded *worker.EmbeddedRedis
	queue    *worker.Queue
	review   int64
	// where says what the floor runs against, for the report.
	where string
}

// openFloor prepares the floor: on the same Postgres server and database as
// the daemon (a schema of its own, so that the daemon's reconciler never
// sees its turns), or, for the embedded default, on an SQLite file and a
// miniredis of its own (the daemon's file belongs to the daemon's process).
// Its jobs go to the same Redis as the daemon's when one is given, to a
// queue no worker consumes.
func (b *bencher) openFloor(ctx context.Context) (_ *floor, err error) {
	f := &floor{}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	// One transaction per ask, as the floor is defined: the daemon's store
	// commits the asks that arrive together in one.
	sc := store.Config{DatabaseURL: b.floorURL, CommitEachAsk: true}
	where := "the same Postgres (a schema of its own)"
	if b.floorURL == "" {
		sc.SQLitePath = filepath.Join(b.dir, "floor.db")
		where = "an SQLite file of its own"
	}
	if f.st, err = store.Open(ctx, sc); err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	if err = f.st.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	if b.cfg.RedisURL == "" {
		if f.embedded, err = worker.StartEmbeddedRedis(); err != nil {
			return nil, fmt.Errorf("floor: %w", err)
		}
		// In memory, as serve reaches its own.
		f.rdb, err = f.embedded.Client(ctx)
		where += " + a miniredis of its own"
	} else {
		f.rdb, err = worker.OpenRedis(ctx, b.cfg.RedisURL)
		where += " + the same Redis (a queue no worker takes)"
	}
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	f.where = where
	if f.queue, err = worker.NewQueue(f.rdb, worker.QueueConfig{}); err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	repo := chat.Repository{Name: "bench/floor", ClonePath: b.repoDir}
	if _, err = f.st.UpsertRepository(ctx, &repo); err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	rev := chat.Review{RepositoryID: repo.ID, Repository: repo.Name, PR: 1, HeadSHA: b.head, Backend: benchagent.Backend,
		SessionID: "bench-review", RunDir: b.repoDir, Markdown: "The bench review.", Sections: []chat.Section{}}
	if err = f.st.CreateReview(ctx, &rev); err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	f.review = rev.ID
	return f, nil
}

// ask does what intake must do for one first question.
func (f *floor) ask(ctx context.Context) error {
	c := chat.Conversation{ReviewID: f.review, Title: chat.Title(benchQuestion), Backend: benchagent.Backend}
	t := chat.Turn{Question: benchQuestion, Backend: benchagent.Backend, State: chat.StateQueued}
	if err := f.st.CreateConversation(ctx, &c, &t); err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	if err := f.queue.Enqueue(ctx, t.ID, floorHost); err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	return nil
}

// dropJobs deletes the floor's queue and its jobs.
func (f *floor) dropJobs() error {
	err := asynq.NewInspectorFromRedisClient(f.rdb).DeleteQueue(worker.HostQueue(floorHost), true)
	if err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
		return fmt.Errorf("floor: delete its queue: %w", err)
	}
	return nil
}

// close releases what the floor opened. Safe on a half-opened floor.
func (f *floor) close() {
	if f.rdb != nil {
		_ = f.dropJobs()
		_ = f.rdb.Close()
	}
	if f.embedded != nil {
		f.embedded.Close()
	}
	if f.st != nil {
		_ = f.st.Close()
	}
}
