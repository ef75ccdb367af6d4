package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat/chattest"
)

func TestTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, m, func(c *Config) { c.TurnTimeout = 700 * time.Millisecond })
			v := e.review("scripted", nil)

			e.scripted.Push(scripted.Step{Hang: true})
			conv, _ := e.ask(v, "Will this end?")
			got := e.wait(conv, 1)
			if got.State != "failed" || got.Reason != "timeout" {
				t.Fatalf("turn 1 = %+v, want failed timeout", got)
			}

			// Cancel a hanging turn: it settles cancelled, and the next
			// question is accepted and answered.
			e.scripted.Push(scripted.Step{Hang: true})
			e.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "And this?"}, http.StatusAccepted, nil)
			e.waitCalls(2)
			var out struct{ Turn turnJSON }
			e.do("POST", "/api/v1/conversations/"+conv+"/turns/2/cancel", nil, http.StatusAccepted, &out)
			if out.Turn.State != "cancelled" || out.Turn.Reason != "cancelled" {
				t.Fatalf("cancelled turn = %+v", out.Turn)
			}
			e.scripted.Push(scripted.Step{Answer: goodAnswer("third")})
			e.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "Third?"}, http.StatusAccepted, nil)
			if got := e.wait(conv, 3); got.State != "succeeded" {
				t.Fatalf("turn 3 = %+v", got)
			}
			if got := e.wait(conv, 2); got.State != "cancelled" {
				t.Fatalf("turn 2 after the retry of its job = %+v", got)
			}
		})
	}
}

// TestCancelKillsTheAgent checks that cancelling a running turn ends the
// agent's call (its context), not only the turn's state.
func TestCancelKillsTheAgent(t *testing.T) {
	t.Parallel()
	e := setup(t, mode{name: "embedded"}, nil)
	v := e.review("scripted", nil)
	e.scripted.Push(scripted.Step{Hang: true})
	conv, _ := e.ask(v, "Hang?")
	e.waitCalls(1)
	id := mustTurnID(t, e, conv, 1)
	if !e.d.domain.runner.Running(id) {
		t.Fatal("the worker does not run the turn")
	}
	e.do("POST", "/api/v1/conversations/"+conv+"/turns/1/cancel", nil, http.StatusAccepted, nil)
	chattest.Eventually(t, "the agent call to end with the cancel", func() bool { return !e.d.domain.runner.Running(id) })
}

// waitCalls waits until the scripted agent has received n calls.
func (e *env) waitCalls(n int) {
	e.t.Helper()
	chattest.Eventually(e.t, fmt.Sprintf("the agent to receive %d calls", n), func() bool { return len(e.scripted.Requests()) >= n })
}

func mustTurnID(t *testing.T, e *env, conv string, n int) string {
	t.Helper()
	turn, err := e.d.store.Turn(context.Background(), conv, n)
	if err != nil {
		t.Fatal(err)
	}
	return turn.ID
}

// TestTurnsTotalCountsCancelsBeforeARun: a turn cancelled while queued,
// before any worker ran it, is counted in prchat_turns_total as cancelled,
// once.
func TestTurnsTotalCountsCancelsBeforeARun(t *testing.T) {
	t.Parallel()
	e := splitSetup(t, mode{name: "embedded"}) // an API and no worker: the turn stays queued
	v := e.review("scripted", nil)
	conv, _ := e.ask(v, "Why?")
	e.do("POST", "/api/v1/conversations/"+conv+"/turns/1/cancel", nil, http.StatusAccepted, nil)
	if got := e.wait(conv, 1); got.State != "cancelled" {
		t.Fatalf("turn %+v, want cancelled", got)
	}
	e.do("POST", "/api/v1/conversations/"+conv+"/turns/1/cancel", nil, http.StatusAccepted, nil)
	raw := e.do("GET", "/metrics", nil, http.StatusOK, nil)
	want := `prchat_turns_total{backend="scripted",reason="cancelled",state="cancelled"} 1`
	if !strings.Contains(string(raw), want+"\n") {
		t.Errorf("/metrics lacks %s:\n%s", want, grepLines(string(raw), "prchat_turns_total"))
	}
	if strings.Contains(string(raw), "prchat_turn_duration_seconds_count") && !strings.Contains(string(raw), `prchat_turn_duration_seconds_count{backend="scripted"} 0`) {
		t.Errorf("a turn that never ran has a duration:\n%s", grepLines(string(raw), "prchat_turn_duration_seconds_count"))
	}
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
