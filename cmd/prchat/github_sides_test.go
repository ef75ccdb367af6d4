package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/forge/github/githubtest"
)

// TestGitHubRemovedLines: a review comment on the diff's left (side LEFT:
// lines the PR removed) is focused on the base's lines, the agent is told
// the base commit, and the answer goes to the comment's thread.
func TestGitHubRemovedLines(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			g := setupGitHub(t, m, nil)
			g.reviewPR(7)
			id := 4_000_000 + commentIDs.Add(1)
			g.gh.AddReviewComment("acme/widget", 7, githubtest.Comment{ID: id, Body: "/ask What did this say?", User: githubtest.User{Login: "reviewer", Type: "User"}})
			body := payload(t, "pull_request_review_comment.json", ghPayload{PR: 7, CommentID: id, Body: "/ask What did this say?",
				Path: "settings/settings.go", StartLine: "2", Line: "3", Side: "LEFT", Head: g.head, Base: g.base})
			code, r := deliver(t, g.url, "pull_request_review_comment", uuid.NewString(), body, testWebhookSecret)
			if code != http.StatusAccepted {
				t.Fatalf("review comment: %d %+v", code, r)
			}
			g.wait(r.ConversationID, 1)
			req := g.lastRequest()
			want := chat.Anchor{Path: "settings/settings.go", StartLine: 2, EndLine: 3, Side: chat.SideBase}
			if req.Focus == nil || len(req.Focus.Anchors) != 1 || req.Focus.Anchors[0] != want {
				t.Errorf("focus = %+v, want %+v", req.Focus, want)
			}
			if s := `"side": "base" are files and lines of the pull request's base commit ` + g.base; !strings.Contains(req.Prompt, s) {
				t.Errorf("the prompt does not name the base commit:\n%s", req.Prompt)
			}
			chattest.Eventually(t, "the thread reply", func() bool { return len(withMarker(g.gh.ReviewComments("acme/widget", 7))) == 1 })
			if got := withMarker(g.gh.ReviewComments("acme/widget", 7))[0]; got.InReplyTo != id {
				t.Errorf("reply in reply to %d, want %d", got.InReplyTo, id)
			}
		})
	}
}
