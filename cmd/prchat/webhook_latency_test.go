package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/forge/forgetest"
	"github.com/prchat/prchat/forge/github/githubtest"
)

// stamps records when GitHub (the fake, behind a recording proxy) was
// first sent each comment's 👀 and each reply to a comment.
type stamps struct {
	mu      sync.Mutex
	eyes    map[int64]time.Time
	replies map[int64]time.Time
}

var (
	reactionPath = regexp.MustCompile(`^/repos/[^/]+/[^/]+/pulls/comments/(\d+)/reactions$`)
	replyPath    = regexp.MustCompile(`^/repos/[^/]+/[^/]+/pulls/\d+/comments/(\d+)/replies$`)
)

// record notes a request that GitHub carried out (answered 2xx), at the
// time it was sent.
func (s *stamps) record(r *http.Request, at time.Time, status int) {
	if r.Method != http.MethodPost || status/100 != 2 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range []struct {
		re *regexp.Regexp
		to map[int64]time.Time
	}{{reactionPath, s.eyes}, {replyPath, s.replies}} {
		if m := p.re.FindStringSubmatch(r.URL.Path); m != nil {
			id, _ := strconv.ParseInt(m[1], 10, 64)
			if _, ok := p.to[id]; !ok {
				p.to[id] = at
			}
		}
	}
}

func (s *stamps) got(id int64) (eyes, reply time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	eyes, e := s.eyes[id]
	reply, r := s.replies[id]
	return eyes, reply, e && r
}

// percentiles returns the p50 and p99 of ds.
func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[(len(s)*99+99)/100-1]
}

// loadavg is the host's load averages, for the figures' context.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// TestWebhookLatency measures, and prints (go test -v), how long after a
// delivery is received GitHub gets the 👀 and the posted answer, with an
// agent that answers at once, the daemon's default webhook timings (outbox
// every second) and no rate limit, over 200 review-comment questions (each
// a new conversation) sent one every 50 ms; the answer's time is split into
// the turn's and the outbox's. Nothing is asserted of the times: they
// depend on the machine's load, which is printed beside them. A
// measurement of 200 turns, it runs only with PRCHAT_TEST_BENCH=1, as
// make test-bench sets, not in make test.
func TestWebhookLatency(t *testing.T) {
	if os.Getenv("PRCHAT_TEST_BENCH") != "1" {
		t.Skip("a measurement of 200 deliveries; set PRCHAT_TEST_BENCH=1 (make test-bench)")
	}
	t.Parallel()
	const deliveries, pace = 200, 50 * time.Millisecond
	ms := modes(t)
	m := ms[len(ms)-1]
	fake := githubtest.New(t)
	st := &stamps{eyes: map[int64]time.Time{}, replies: map[int64]time.Time{}}
	target, err := url.Parse(fake.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		sw := &forgetest.StatusWriter{ResponseWriter: w, Status: http.StatusOK}
		proxy.ServeHTTP(sw, r)
		st.record(r, at, sw.Status)
	}))
	t.Cleanup(front.Close)
	e := prepare(t, m, func(c *Config) {
		c.GitHubSecret = testWebhookSecret
		c.GitHubAPIURL = front.URL
		c.GitHubToken = fake.Token
		// 20 questions a second is over the default rate of questions
		// about one repository: without a limit, the figures are the
		// pipeline's, not the limit's waits.
		c.RateQuestionsRepo = chat.Rate{}
	})
	e.scripted.Fallback = func(chat.RunRequest) scripted.Step { return scripted.Step{Answer: goodAnswer("Answered at once.")} }
	e.serve(roleOf("serve"))
	g := &ghEnv{env: e, gh: fake}
	g.reviewPR(7)

	load := loadavg()
	received := make(map[int64]time.Time, deliveries)
	var accepted []time.Duration
	statuses := map[string]int{}
	ids := make([]int64, 0, deliveries)
	next := time.Now()
	for i := range deliveries {
		time.Sleep(time.Until(next)) // the pace of the deliveries, not a wait for a condition
		next = next.Add(pace)
		id := 1_000_000 + commentIDs.Add(1)
		ids = append(ids, id)
		body := payload(t, "pull_request_review_comment.json", ghPayload{PR: 7, CommentID: id, Body: fmt.Sprintf("/ask Why this check, %d?", i),
			Path: "settings/settings.go", StartLine: "8", Line: "12", Head: g.head, Base: g.base})
		g.gh.AddReviewComment("acme/widget", 7, githubtest.Comment{ID: id, Body: "/ask Why this check?", User: githubtest.User{Login: "reviewer", Type: "User"}})
		received[id] = time.Now()
		code, r := deliver(t, g.url, "pull_request_review_comment", uuid.NewString(), body, testWebhookSecret)
		if code != http.StatusAccepted {
			t.Fatalf("delivery %d: %d %+v", i, code, r)
		}
		statuses[r.Status+" "+r.Reason]++
		accepted = append(accepted, time.Since(received[id]))
	}
	// 200 turns on a loaded machine may take minutes (they are what is
	// measured, not bounded).
	chattest.EventuallyWithin(t, chattest.Within(10*time.Minute), "every 👀 and answer", func() bool {
		for _, id := range ids {
			if _, _, ok := st.got(id); !ok {
				return false
			}
		}
		return true
	})
	var eyes, replies, answered, posted, waited, ran []time.Duration
	for _, id := range ids {
		e, r, _ := st.got(id)
		eyes = append(eyes, e.Sub(received[id]))
		replies = append(replies, r.Sub(received[id]))
		var created, started, finished time.Time
		if err := g.d.store.DB().Raw(`SELECT t.created_at, t.started_at, t.finished_at FROM turns t JOIN webhook_comments w ON w.turn_id = t.id WHERE w.comment_id = ?`, id).
			Row().Scan(&created, &started, &finished); err != nil {
			t.Fatal(err)
		}
		answered = append(answered, finished.Sub(received[id]))
		posted = append(posted, r.Sub(finished))
		waited = append(waited, started.Sub(created))
		ran = append(ran, finished.Sub(started))
	}
	a50, a99 := percentiles(accepted)
	e50, e99 := percentiles(eyes)
	r50, r99 := percentiles(replies)
	t50, t99 := percentiles(answered)
	p50, p99 := percentiles(posted)
	w50, w99 := percentiles(waited)
	x50, x99 := percentiles(ran)
	t.Logf("webhook latency, %s, %d deliveries one every %v, zero-latency agent, default outbox timings, no rate limit; load average before: %s, after: %s",
		m.name, deliveries, pace, load, loadavg())
	t.Logf("  receipts: %v", statuses)
	t.Logf("  webhook answered (202): p50 %v  p99 %v", a50.Round(time.Millisecond), a99.Round(time.Millisecond))
	t.Logf("  receipt to 👀:          p50 %v  p99 %v  (goal < 1s)", e50.Round(time.Millisecond), e99.Round(time.Millisecond))
	t.Logf("  receipt to the answer:  p50 %v  p99 %v  (goal < 2s + the agent's time, here 0)", r50.Round(time.Millisecond), r99.Round(time.Millisecond))
	t.Logf("    of which receipt to the turn settled: p50 %v  p99 %v; settled to posted: p50 %v  p99 %v",
		t50.Round(time.Millisecond), t99.Round(time.Millisecond), p50.Round(time.Millisecond), p99.Round(time.Millisecond))
	var retried int64
	var lastErr string
	if err := g.d.store.DB().Raw(`SELECT COUNT(*), COALESCE(MAX(error), '') FROM webhook_comments WHERE attempts > 0 OR error <> ''`).Row().Scan(&retried, &lastErr); err != nil {
		t.Fatal(err)
	}
	t.Logf("    questions asked again after a failed attempt: %d (%s)", retried, lastErr)
	t.Logf("    the turn's queue wait: p50 %v  p99 %v  max %v; its run (a new conversation's checkout, the agent): p50 %v  p99 %v  max %v",
		w50.Round(time.Millisecond), w99.Round(time.Millisecond), slices.Max(waited).Round(time.Millisecond),
		x50.Round(time.Millisecond), x99.Round(time.Millisecond), slices.Max(ran).Round(time.Millisecond))
}
