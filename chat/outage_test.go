package chat_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/store/storetest"
)

// outageSetup is setup on a Postgres store reached through a proxy the test
// can cut.
func outageSetup(t *testing.T) (*fixture, *storetest.Proxy) {
	t.Helper()
	st, proxy := storetest.NewPostgresBehindProxy(t)
	return setupStore(t, st), proxy
}

// TestRunWaitsOutAnOutageBeforeItsClaim: a run whose database is
// unreachable when it claims its turn waits until it is back, and the turn
// is answered (not failed, not left for the queue to retry).
func TestRunWaitsOutAnOutageBeforeItsClaim(t *testing.T) {
	t.Parallel()
	f, proxy := outageSetup(t)
	f.scripted.Push(scripted.Step{Answer: answer("after the outage")})
	proxy.Cut()
	done := make(chan error, 1)
	go func() { done <- f.services[0].Runner.Run(context.Background(), f.turn, "w1/a") }()
	time.Sleep(800 * time.Millisecond) // the outage lasts a while: the behaviour under test
	select {
	case err := <-done:
		t.Fatalf("run ended during the outage: %v", err)
	default:
	}
	proxy.Restore()
	if err := chattest.Receive(t, "the run to end after the outage", done); err != nil {
		t.Fatalf("run: %v", err)
	}
	turn, err := f.store.Turn(context.Background(), f.conv, 1)
	if err != nil || turn.State != chat.StateSucceeded {
		t.Fatalf("turn %s/%s (%v), want succeeded", turn.State, turn.Reason, err)
	}
}

// TestRunWaitsOutAnOutageBeforeItsFinish: the database goes away while the
// agent works; the run keeps its outcome and its events until the database
// is back and stores them then, every event once.
func TestRunWaitsOutAnOutageBeforeItsFinish(t *testing.T) {
	t.Parallel()
	f, proxy := outageSetup(t)
	release := make(chan struct{})
	f.scripted.Push(scripted.Step{Wait: release, Answer: answer("after the outage"),
		Events: []chat.Event{{Type: chat.EventToolStart, ToolID: "1", ToolName: "read_file"}}})
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- f.services[0].Runner.Run(ctx, f.turn, "w1/a") }()
	chattest.Eventually(t, "the agent call", func() bool { return len(f.scripted.Requests()) == 1 })
	chattest.Eventually(t, "the call's first event stored", func() bool {
		evs, err := f.store.Events(ctx, f.turn, 0)
		return err == nil && slices.ContainsFunc(evs, func(e chat.Event) bool { return e.Type == chat.EventToolStart })
	})
	proxy.Cut()
	close(release)
	time.Sleep(800 * time.Millisecond) // the outage lasts a while: the behaviour under test
	proxy.Restore()
	if err := chattest.Receive(t, "the run to end after the outage", done); err != nil {
		t.Fatalf("run: %v", err)
	}
	turn, err := f.store.Turn(ctx, f.conv, 1)
	if err != nil || turn.State != chat.StateSucceeded || turn.Answer == nil || turn.Answer.AnswerMarkdown != "after the outage" {
		t.Fatalf("turn %+v (%v), want succeeded with the agent's answer", turn, err)
	}
	evs, err := f.store.Events(ctx, f.turn, 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Errorf("event %d has seq %d", i, e.Seq)
		}
		types = append(types, string(e.Type))
	}
	if got := strings.Join(types, ","); !strings.HasPrefix(got, "state,") || strings.Count(got, "tool_start") != 1 || !strings.HasSuffix(got, ",done") {
		t.Errorf("events %s, want state,...,tool_start,...,done", got)
	}
}

// cutSettings are settings whose database goes away (cut) as the active
// provider is read, once armed.
type cutSettings struct {
	chat.SettingsStore
	armed atomic.Bool
	cut   func()
}

func (c *cutSettings) ActiveProvider(ctx context.Context) (string, string, error) {
	if c.armed.CompareAndSwap(true, false) {
		c.cut()
	}
	return c.SettingsStore.ActiveProvider(ctx)
}

// TestRunWaitsOutAnOutageWhilePlanning: the database goes away while a
// run plans the agent's start, as it reads the active provider of an
// OpenAI-compatible backend's turn, a read that does not wait out an
// outage itself. The run waits until the database is back and answers the
// turn. It does not return to the queue: another worker would take the
// retry only to find the turn held by this live run, and leave it running
// with no job.
func TestRunWaitsOutAnOutageWhilePlanning(t *testing.T) {
	t.Parallel()
	st, proxy := storetest.NewPostgresBehindProxy(t)
	cut := make(chan struct{})
	settings := &cutSettings{SettingsStore: st, cut: func() { proxy.Cut(); close(cut) }}
	f := setupWith(t, st, fixtureOptions{backend: chat.BackendOpenAI, settings: settings})
	f.scripted.Push(scripted.Step{Answer: answer("after the outage")})
	settings.armed.Store(true)
	done := make(chan error, 1)
	go func() { done <- f.services[1].Runner.Run(context.Background(), f.turn, "w2/b") }()
	chattest.Receive(t, "the run to read the active provider", cut)
	time.Sleep(800 * time.Millisecond) // the outage lasts a while: the behaviour under test
	select {
	case err := <-done:
		t.Fatalf("run ended during the outage (its job would go back to the queue): %v", err)
	default:
	}
	if n := len(f.scripted.Requests()); n != 0 {
		t.Fatalf("the agent ran during the outage: %d calls", n)
	}
	proxy.Restore()
	if err := chattest.Receive(t, "the run to end after the outage", done); err != nil {
		t.Fatalf("run: %v", err)
	}
	turn, err := st.Turn(context.Background(), f.conv, 1)
	if err != nil || turn.State != chat.StateSucceeded || turn.Answer == nil || turn.Answer.AnswerMarkdown != "after the outage" {
		t.Fatalf("turn %+v (%v), want succeeded with the agent's answer", turn, err)
	}
	if turn.Fence != 1 {
		t.Errorf("turn fence %d, want 1: one run, claimed once", turn.Fence)
	}
}

// TestInternalFailureShowsATraceIDOnly: a turn that fails for a reason
// prchat cannot explain to its client (here an agent's error that is no
// chat.Failure) tells the client a plain sentence with a trace
// id, in its note and its error event; the cause, with its paths and
// commands, stays in the log.
func TestInternalFailureShowsATraceIDOnly(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	// The agent fails with an error that is no chat.Failure: prchat cannot
	// tell what of it a client may see.
	cause := errors.New("exec /opt/agent --config /etc/prchat: dial tcp db.internal:5432: user prchat: connection refused")
	f.scripted.Push(scripted.Step{Err: cause})
	if err := f.services[0].Runner.Run(ctx, f.turn, "w1/a"); err != nil {
		t.Fatal(err)
	}
	turn, err := f.store.Turn(ctx, f.conv, 1)
	if err != nil || turn.State != chat.StateFailed {
		t.Fatalf("turn %s (%v), want failed", turn.State, err)
	}
	evs, err := f.store.Events(ctx, f.turn, 0)
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	if last.Type != chat.EventError || last.TraceID == "" {
		t.Fatalf("last event %+v, want an error with a trace id", last)
	}
	for what, text := range map[string]string{"note": turn.Note, "error event": last.Message} {
		if !strings.Contains(text, "trace id "+last.TraceID) {
			t.Errorf("%s %q does not name trace id %s", what, text, last.TraceID)
		}
		for _, internal := range []string{"/opt/agent", "/etc/prchat", "db.internal", "5432", "prchat:", "refused"} {
			if strings.Contains(text, internal) {
				t.Errorf("%s %q shows %q", what, text, internal)
			}
		}
	}
}
