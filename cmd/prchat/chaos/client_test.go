//go:build chaos

package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// client is the suite's HTTP client. It keeps a ledger of what clients
// were shown: every status, and every response that breaks a rule (a 5xx
// other than 503 unavailable, an error without a trace id, internal detail
// in any text).
type client struct {
	hc        *http.Client
	forbidden []string // lower case

	mu         sync.Mutex
	statuses   map[int]int
	violations []string
	seen       map[string]bool
}

func newClient(forbidden []string) *client {
	c := &client{hc: &http.Client{Timeout: 40 * time.Second}, statuses: map[int]int{}, seen: map[string]bool{}}
	for _, f := range forbidden {
		if f != "" {
			c.forbidden = append(c.forbidden, strings.ToLower(f))
		}
	}
	return c
}

// violate records a broken rule once.
func (c *client) violate(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[msg] || len(c.violations) >= 50 {
		return
	}
	c.seen[msg] = true
	c.violations = append(c.violations, msg)
}

// takeViolations returns the broken rules recorded since the last call.
func (c *client) takeViolations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.violations
	c.violations = nil
	return v
}

// checkText records internal detail in text a client was shown at where.
func (c *client) checkText(where, text string) {
	low := strings.ToLower(text)
	for _, f := range c.forbidden {
		if i := strings.Index(low, f); i >= 0 {
			from, to := max(0, i-80), min(len(text), i+len(f)+80)
			c.violate("%s shows internal detail %q: …%s…", where, f, text[from:to])
		}
	}
}

// route names a request without its host and ids, for the ledger.
func route(method, rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return method + " " + rawURL
	}
	return method + " " + u.Path
}

// do sends a JSON request to rawURL and decodes a response of status want
// into out. A transport error or another status is returned as an error
// (with the status, 0 for a transport error).
func (c *client) do(method, rawURL string, body any, want int, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, rawURL, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	c.record(route(method, rawURL), resp.StatusCode, raw)
	if resp.StatusCode != want {
		return resp.StatusCode, fmt.Errorf("%s %s: status %d, want %d: %.300s", method, rawURL, resp.StatusCode, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode %.300s: %w", method, rawURL, raw, err)
		}
	}
	return resp.StatusCode, nil
}

// record enters a response in the ledger.
func (c *client) record(where string, status int, body []byte) {
	c.mu.Lock()
	c.statuses[status]++
	c.mu.Unlock()
	c.checkText(where, string(body))
	if status >= 500 && status != http.StatusServiceUnavailable {
		c.violate("%s answered %d: %.300s", where, status, body)
	}
	if status >= 400 {
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				TraceID string `json:"trace_id"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
			c.violate("%s answered %d without an error object: %.300s", where, status, body)
		} else if status == http.StatusServiceUnavailable && (e.Error.Code != "unavailable" || e.Error.TraceID == "") {
			c.violate("%s answered 503 with code %q and trace id %q, want unavailable with a trace id", where, e.Error.Code, e.Error.TraceID)
		}
	}
}

// sseFrame is one thing an SSE stream sent: an event (id, event, data), a
// retry field, or a comment.
type sseFrame struct {
	ID, Event, Data, Retry string
	Comment                bool
	At                     time.Time
}

// eventType returns the "type" of an event's data.
func (f sseFrame) eventType() string {
	var d struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal([]byte(f.Data), &d)
	return d.Type
}

// stream reads the SSE stream at rawURL from after lastID until it ends or
// ctx does, calling onFrame (when not nil) with each frame as it comes. It
// returns the frames and why the stream ended (nil: the server closed it).
func (c *client) stream(ctx context.Context, rawURL, lastID string, onFrame func(sseFrame)) ([]sseFrame, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		// The client had the final event: an empty stream.
		c.record(route("GET", rawURL), resp.StatusCode, nil)
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		c.record(route("GET", rawURL), resp.StatusCode, raw)
		return nil, fmt.Errorf("GET %s: status %d: %.300s", rawURL, resp.StatusCode, raw)
	}
	c.record(route("GET", rawURL), resp.StatusCode, nil)
	var (
		frames []sseFrame
		cur    sseFrame
		has    bool
	)
	emit := func(f sseFrame) {
		f.At = time.Now()
		frames = append(frames, f)
		if f.Data != "" {
			c.checkText(route("SSE", rawURL), f.Data)
		}
		if onFrame != nil {
			onFrame(f)
		}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if has {
				emit(cur)
			}
			cur, has = sseFrame{}, false
		case strings.HasPrefix(line, ":"):
			emit(sseFrame{Comment: true, Data: strings.TrimSpace(line[1:])})
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			has = true
			switch field {
			case "id":
				cur.ID = value
			case "event":
				cur.Event = value
			case "data":
				if cur.Data != "" {
					cur.Data += "\n"
				}
				cur.Data += value
			case "retry":
				cur.Retry = value
			}
		}
	}
	if has {
		emit(cur)
	}
	return frames, sc.Err()
}

// events returns the data frames among frames.
func events(frames []sseFrame) []sseFrame {
	var out []sseFrame
	for _, f := range frames {
		if !f.Comment && f.Data != "" {
			out = append(out, f)
		}
	}
	return out
}

// turnJSON is the part of a turn the suite reads.
type turnJSON struct {
	State  string `json:"state"`
	Reason string `json:"reason"`
	Note   string `json:"note"`
	Answer *struct {
		AnswerMarkdown string `json:"answer_markdown"`
	} `json:"answer"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

func (t turnJSON) final() bool {
	switch t.State {
	case "succeeded", "failed", "cancelled", "interrupted":
		return true
	}
	return false
}

// turn is one accepted question of the suite (the first turn of its own
// conversation).
type turn struct {
	token      string
	conv       string
	acceptedAt time.Time

	final   turnJSON
	settled bool
}

// question is the text of token's question.
func question(token string) string {
	return "Why does Load refuse an empty path? (" + token + ")"
}

// ask asks a new question whose model calls take delay each. It returns the
// turn when the API accepted it, and the status it answered (0: no answer).
func (c *cluster) ask(delay time.Duration) (*turn, int, error) {
	token := "chaos-" + randomHex(16)
	lab.model.setDelay(token, delay)
	var out struct {
		Conversation struct {
			ID string `json:"id"`
		} `json:"conversation"`
		Turn turnJSON `json:"turn"`
	}
	status, err := c.http.do("POST", fmt.Sprintf("%s/api/v1/repos/acme/chaos/pulls/7/reviews/%d/conversations", c.apiURL(), c.version),
		map[string]any{"question": question(token)}, http.StatusAccepted, &out)
	if err != nil {
		return nil, status, err
	}
	return &turn{token: token, conv: out.Conversation.ID, acceptedAt: time.Now()}, status, nil
}

// askLog is what askAtRate did: every ask, the turns accepted, and the
// polls of accepted turns by status.
type askLog struct {
	asks     []askRecord
	accepted []*turn
	polls    map[string]int
}

// askRecord is one ask: when it was sent, the status it got (0: no answer)
// and its turn if accepted.
type askRecord struct {
	at     time.Time
	status int
	turn   *turn
}

// askAtRate asks rate questions a second until end (each turn's model
// calls taking delay), and with each ask polls a turn accepted earlier, as
// a waiting client does. It returns once every request has been answered.
func (c *cluster) askAtRate(rate int, end time.Time, delay time.Duration) *askLog {
	var (
		mu  sync.Mutex
		log = &askLog{polls: map[string]int{}}
		wg  sync.WaitGroup
	)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for now := range tick.C {
		if now.After(end) {
			break
		}
		wg.Go(func() {
			tr, status, _ := c.ask(delay)
			mu.Lock()
			defer mu.Unlock()
			log.asks = append(log.asks, askRecord{at: now, status: status, turn: tr})
			if tr != nil {
				log.accepted = append(log.accepted, tr)
			}
		})
		mu.Lock()
		var tr *turn
		if len(log.accepted) > 0 {
			tr = log.accepted[rand.IntN(len(log.accepted))]
		}
		mu.Unlock()
		if tr != nil {
			wg.Go(func() {
				status, _ := c.http.do("GET", c.turnURL(tr), nil, http.StatusOK, nil)
				mu.Lock()
				log.polls[fmt.Sprint(status)]++
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return log
}

// mustAsk asks n questions and fails the test if one is refused.
func (c *cluster) mustAsk(n int, delay time.Duration) []*turn {
	c.t.Helper()
	var ts []*turn
	for range n {
		tr, _, err := c.ask(delay)
		if err != nil {
			c.t.Fatalf("ask: %v", err)
		}
		ts = append(ts, tr)
	}
	return ts
}

// waitRunning waits until every turn's model has been called at least
// once, at most d. A turn that never gets there fails the test, with what
// became of it.
func (c *cluster) waitRunning(t *testing.T, trial string, ts []*turn, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for _, tr := range ts {
		if !lab.model.waitCalls(tr.token, 1, time.Until(deadline)) {
			c.settle([]*turn{tr}, time.Now().Add(5*time.Second))
			c.verify(t, trial, []*turn{tr})
			t.Fatalf("%s: turn %s never reached the model within %s", trial, tr.conv, d)
		}
	}
}

// turnURL is the path of a turn under the API.
func (c *cluster) turnURL(tr *turn) string {
	return fmt.Sprintf("%s/api/v1/conversations/%s/turns/1", c.apiURL(), tr.conv)
}

// settle waits, at most until deadline, for every turn to reach a final
// state, polling with ?wait= through whichever API runs. A turn still
// pending at the deadline is stuck.
func (c *cluster) settle(ts []*turn, deadline time.Time) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, tr := range ts {
		if tr.settled {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			for time.Now().Before(deadline) {
				wait := min(20*time.Second, time.Until(deadline))
				var got turnJSON
				_, err := c.http.do("GET", fmt.Sprintf("%s?wait=%dms", c.turnURL(tr), max(wait.Milliseconds(), 1)), nil, http.StatusOK, &got)
				if err != nil {
					time.Sleep(200 * time.Millisecond)
					continue
				}
				if got.final() {
					tr.final, tr.settled = got, true
					return
				}
			}
		}()
	}
	wg.Wait()
}

// verify checks each turn of a trial after settle: settled, succeeded
// with its own answer, one done event in its transcript and in a replay of
// its events, nothing after it. It reports each broken rule with t.Errorf.
func (c *cluster) verify(t *testing.T, trial string, ts []*turn) {
	t.Helper()
	var mu sync.Mutex
	var problems []string
	problem := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, tr := range ts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c.verifyTurn(tr, problem)
		}()
	}
	wg.Wait()
	slices.Sort(problems)
	for i, p := range problems {
		if i == 20 {
			t.Errorf("%s: … and %d more", trial, len(problems)-i)
			break
		}
		t.Errorf("%s: %s", trial, p)
	}
	for _, v := range c.http.takeViolations() {
		t.Errorf("%s: %s", trial, v)
	}
	if n, err := c.pendingTurns(time.Now().Add(time.Minute)); err != nil {
		t.Errorf("%s: count the pending turns: %v", trial, err)
	} else if n > 0 {
		t.Errorf("%s: %d turns no client was given are still queued or running a minute after the trial's turns settled", trial, n)
	}
	if t.Failed() {
		c.explainPending(t)
	}
}

// explainPending logs the turns the cluster's database still holds queued
// or running, and every line of the processes' logs that names one of them
// or its conversation, so that a failed trial says where each stopped.
func (c *cluster) explainPending(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.dbURL)
	if err != nil {
		t.Logf("pending turns: %v", err)
		return
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT id, conversation_id, state, queue, runner, fence, last_seq, created_at, started_at
		FROM turns WHERE state IN ('queued', 'running') ORDER BY created_at LIMIT 10`)
	if err != nil {
		t.Logf("pending turns: %v", err)
		return
	}
	var ids []string
	for rows.Next() {
		var id, conv, state, queue, runner string
		var fence, lastSeq int64
		var created time.Time
		var started *time.Time
		if err := rows.Scan(&id, &conv, &state, &queue, &runner, &fence, &lastSeq, &created, &started); err != nil {
			t.Logf("pending turns: %v", err)
			return
		}
		t.Logf("pending turn %s of conversation %s: state %s, queue %q, runner %q, fence %d, last seq %d, created %s, started %v",
			id, conv, state, queue, runner, fence, lastSeq, created.Format(time.RFC3339Nano), started)
		ids = append(ids, id, conv)
	}
	if err := rows.Err(); err != nil {
		t.Logf("pending turns: %v", err)
	}
	if len(ids) == 0 {
		return
	}
	for _, p := range append(append([]*proc{}, c.apis...), c.workers...) {
		if lines := grepLines(p.logs, ids, 60); lines != "" {
			t.Logf("%s/%s log, lines naming a pending turn:\n%s", c.name, p.name, lines)
		}
	}
}

// pendingTurns waits, at most until deadline, until the cluster's database
// holds no queued or running turn, and returns how many are left. It sees
// the turns of asks whose answer never reached the client too.
func (c *cluster) pendingTurns(deadline time.Time) (int, error) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	for {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM turns WHERE state IN ('queued', 'running')").Scan(&n); err != nil {
			return 0, err
		}
		if n == 0 || time.Now().After(deadline) {
			return n, nil
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (c *cluster) verifyTurn(tr *turn, problem func(string, ...any)) {
	c.http.checkText("turn "+tr.conv, tr.final.Note+" "+tr.final.Reason)
	switch {
	case !tr.settled:
		problem("turn %s (%s) is stuck: not settled", tr.conv, tr.token)
		return
	case tr.final.State != "succeeded":
		problem("turn %s ended %s/%s: %q", tr.conv, tr.final.State, tr.final.Reason, tr.final.Note)
	case tr.final.Answer == nil || tr.final.Answer.AnswerMarkdown != answerText(tr.token):
		problem("turn %s succeeded without its own answer: %+v", tr.conv, tr.final.Answer)
	}
	want := "done"
	if tr.final.State != "succeeded" {
		want = "error"
	}
	var tx struct {
		Events []json.RawMessage `json:"events"`
	}
	if _, err := c.http.do("GET", c.turnURL(tr)+"/transcript", nil, http.StatusOK, &tx); err != nil {
		problem("transcript of %s: %v", tr.conv, err)
	} else {
		finals, last := 0, int64(0)
		for _, raw := range tx.Events {
			var e struct {
				Type string `json:"type"`
				Seq  int64  `json:"seq"`
			}
			_ = json.Unmarshal(raw, &e)
			if e.Seq <= last {
				problem("transcript of %s: seq %d after %d", tr.conv, e.Seq, last)
			}
			last = e.Seq
			if e.Type == "done" || e.Type == "error" {
				finals++
			}
		}
		if finals != 1 {
			problem("transcript of %s holds %d final events, want one %s", tr.conv, finals, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	frames, err := c.http.stream(ctx, c.turnURL(tr)+"/events", "", nil)
	if err != nil && !errors.Is(err, context.Canceled) {
		problem("events of %s: %v", tr.conv, err)
		return
	}
	evs := events(frames)
	finals := 0
	for _, f := range evs {
		if ty := f.eventType(); ty == "done" || ty == "error" {
			finals++
		}
	}
	if finals != 1 || len(evs) == 0 || evs[len(evs)-1].eventType() != want {
		problem("a replay of %s's events holds %d final events and ends with %q, want one %s at the end", tr.conv, finals, lastType(evs), want)
	}
}

func lastType(evs []sseFrame) string {
	if len(evs) == 0 {
		return ""
	}
	return evs[len(evs)-1].eventType()
}
