//go:build prchatbench

package main

import (
	"net/http"
	"testing"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/cmd/prchat-bench/benchagent"
)

// TestBenchAgent: a prchatbench build registers the bench's agent, which
// answers a question about a review it wrote (make test-bench runs it).
func TestBenchAgent(t *testing.T) {
	t.Parallel()
	base, repo := bootBench(t)
	doAt(t, base, "POST", "/api/v1/repos/bench/repo/pulls/1/reviews", map[string]any{"head_sha": repo.Head(), "backend": benchagent.Backend, "markdown": "r"}, http.StatusCreated, nil)
	var asked struct{ Conversation struct{ ID string } }
	doAt(t, base, "POST", "/api/v1/repos/bench/repo/pulls/1/reviews/1/conversations", map[string]any{"question": "q"}, http.StatusAccepted, &asked)
	var turn turnJSON
	chattest.Eventually(t, "the bench agent's turn to settle", func() bool {
		turn = turnJSON{}
		doAt(t, base, "GET", "/api/v1/conversations/"+asked.Conversation.ID+"/turns/1?wait=5s", nil, http.StatusOK, &turn)
		return chat.State(turn.State).Final()
	})
	if turn.State != "succeeded" || turn.Answer == nil || turn.Answer.AnswerMarkdown != "ok" {
		t.Errorf("turn = %+v, want the bench agent's answer", turn)
	}
}
