package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/worker/workertest"
)

// TestDeleteMeansGone: deleting a conversation, with the API and the
// worker in separate daemons, removes its run directory on the worker,
// whether its turn had settled or was still running, and leaves no job of
// it in Redis: a running turn's job is not retried, none is archived.
func TestDeleteMeansGone(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := splitSetup(t, m)
			e.serve(role{worker: true})
			v := e.review("scripted", nil) // no session: each conversation is seeded in a run directory of its own
			rdb := workertest.Connect(t, e.cfg.RedisURL)
			runDir := func(conv string) string { return filepath.Join(e.cfg.DataDir, "runs", conv) }
			exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
			jobs := func() []string {
				keys, err := rdb.Keys(context.Background(), "asynq:{*}:t:*").Result()
				if err != nil {
					t.Fatal(err)
				}
				return keys
			}

			// A settled conversation.
			e.scripted.Push(scripted.Step{Answer: goodAnswer("done")})
			settled, _ := e.ask(v, "What does Load do?")
			if got := e.wait(settled, 1); got.State != "succeeded" {
				t.Fatalf("turn %+v", got)
			}
			if !exists(runDir(settled)) {
				t.Fatalf("no run directory %s after the turn", runDir(settled))
			}
			e.do("DELETE", "/api/v1/conversations/"+settled, nil, http.StatusNoContent, nil)
			chattest.Eventually(t, "settled conversation's run directory removed", func() bool { return !exists(runDir(settled)) })

			// A conversation whose turn runs.
			e.scripted.Push(scripted.Step{Hang: true})
			running, _ := e.ask(v, "And main?")
			e.waitState(running, 1, "running")
			chattest.Eventually(t, "run directory made", func() bool { return exists(runDir(running)) })
			e.do("DELETE", "/api/v1/conversations/"+running, nil, http.StatusNoContent, nil)
			chattest.Eventually(t, "running conversation's run directory removed", func() bool { return !exists(runDir(running)) })
			chattest.Eventually(t, "no job left", func() bool { return len(jobs()) == 0 })
			// Nothing comes back: no retry, no archived job. A while for
			// one to show, not a wait for a condition.
			time.Sleep(1500 * time.Millisecond)
			if left := jobs(); len(left) != 0 {
				t.Errorf("jobs left after the delete: %s", strings.Join(left, ", "))
			}
			// (The deleted run may have been stopped before its agent call.)
			if n := len(e.scripted.Requests()); n > 2 {
				t.Errorf("the agent was called %d times, want at most 2 (no retry of the deleted turn)", n)
			}
			e.do("GET", "/api/v1/conversations/"+running, nil, http.StatusNotFound, nil)
		})
	}
}

// waitState polls a turn until it reaches state.
func (e *env) waitState(conv string, n int, state string) {
	e.t.Helper()
	chattest.Eventually(e.t, fmt.Sprintf("turn %s/%d to reach %s", conv, n, state), func() bool {
		var t turnJSON
		e.do("GET", fmt.Sprintf("/api/v1/conversations/%s/turns/%d", conv, n), nil, http.StatusOK, &t)
		return t.State == state
	})
}
