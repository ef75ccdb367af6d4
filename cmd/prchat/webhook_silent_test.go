package main

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
)

// TestWebhookNeverSilent: an accepted /ask that cannot be answered (here:
// no review can be made, as GitHub does not show the PR) gets one reply
// saying why, with its trace id, and no turn.
func TestWebhookNeverSilent(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			g := setupGitHub(t, m, nil)
			id := 1_000_000 + commentIDs.Add(1)
			body := payload(t, "issue_comment.json", ghPayload{PR: 404, CommentID: id, Body: "/ask Why?"})
			if code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret); code != http.StatusAccepted {
				t.Fatalf("ask: %d %+v", code, r)
			}
			chattest.Eventually(t, "the question given up", func() bool { return g.commentState(chat.ForgeGitHub, id) == chat.CommentFailed })
			replies := withMarker(g.gh.IssueComments("acme/widget", 404))
			if len(replies) != 1 {
				t.Fatalf("%d replies, want 1: %+v", len(replies), replies)
			}
			var trace string
			if err := g.d.store.DB().Table("webhook_comments").Select("id").Where("comment_id = ?", id).Scan(&trace).Error; err != nil {
				t.Fatal(err)
			}
			if r := replies[0].Body; !strings.Contains(r, "prchat could not answer this question: github refused") || !strings.Contains(r, "(trace "+trace+")") {
				t.Errorf("reply:\n%s", r)
			}
			checkReplyLines(t, replies[0].Body)
			if n := g.count("turns"); n != 0 {
				t.Errorf("%d turns", n)
			}
		})
	}
}

// TestWebhookOneReviewForConcurrentAsks: /asks arriving together on a PR
// with no review make one review version.
func TestWebhookOneReviewForConcurrentAsks(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			g := setupGitHub(t, m, nil)
			g.gh.AddPull("acme/widget", 31, g.head, g.base)
			var wg sync.WaitGroup
			for i := 0; i < 4; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					body := payload(t, "issue_comment.json", ghPayload{PR: 31, CommentID: 1_000_000 + commentIDs.Add(1), Body: "/ask Why?"})
					deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret)
				}()
			}
			wg.Wait()
			chattest.Eventually(t, "four replies", func() bool { return len(withMarker(g.gh.IssueComments("acme/widget", 31))) == 4 })
			var versions int64
			if err := g.d.store.DB().Table("reviews").Where("pr = ?", 31).Count(&versions).Error; err != nil || versions != 1 {
				t.Errorf("%d review versions (%v), want 1", versions, err)
			}
		})
	}
}
