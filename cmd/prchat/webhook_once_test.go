package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/forge/forgetest"
	"github.com/prchat/prchat/forge/gitlab/gitlabtest"
)

// glEnv is a daemon wired to a fake GitLab.
type glEnv struct {
	*env
	gl *gitlabtest.Server
}

// setupGitLab boots a serve daemon in mode m whose GitLab API is a fake,
// with a scripted agent that answers every question.
func setupGitLab(t *testing.T, m mode, change func(*Config)) *glEnv {
	t.Helper()
	e := prepareGitLab(t, m, change)
	e.serve(roleOf("serve"))
	return e
}

// prepareGitLab is setupGitLab up to booting the daemon, for a test that
// scripts its agent first.
func prepareGitLab(t *testing.T, m mode, change func(*Config)) *glEnv {
	t.Helper()
	fake := gitlabtest.New(t)
	e := prepare(t, m, func(c *Config) {
		c.GitLabSecret = testGitLabSecret
		c.GitLabToken = fake.Token
		c.GitLabAPIURL = fake.APIURL()
		if change != nil {
			change(c)
		}
	})
	e.opts.outboxInterval = 20 * time.Millisecond
	e.opts.commentPoll = 20 * time.Millisecond
	e.opts.commentBackoff = 50 * time.Millisecond
	// A stopped daemon's notes are taken up again after this (as for
	// GitHub: longer than a note takes to be asked on a loaded machine).
	e.opts.commentLease = chattest.Within(5 * time.Second)
	e.opts.forgeTimeout = 3 * time.Second
	e.scripted.Fallback = func(chat.RunRequest) scripted.Step {
		return scripted.Step{Answer: goodAnswer("Load returns errEmptyPath.")}
	}
	return &glEnv{env: e, gl: fake}
}

// commentState returns the state of the webhook question of a comment.
func (e *env) commentState(forge string, commentID int64) string {
	e.t.Helper()
	var state string
	if err := e.d.store.DB().Table("webhook_comments").Select("state").
		Where("forge = ? AND comment_id = ?", forge, commentID).Scan(&state).Error; err != nil {
		e.t.Fatal(err)
	}
	return state
}

// TestWebhookReplyPostedOnce: when the forge stores a reply and then loses
// its answer (a 502, a dropped connection, a timeout), the answer is still
// posted exactly once, on GitHub and on GitLab: no client retries the post,
// and the outbox finds its marker before it posts again.
func TestWebhookReplyPostedOnce(t *testing.T) {
	// Not parallel with other tests: its six daemons run together, and
	// then leave the timing-bound tests (the App token cache) to run
	// without them.
	for _, m := range modes(t) {
		t.Run(m.name+"/github", func(t *testing.T) {
			t.Parallel()
			g := setupGitHub(t, m, nil)
			for i, loss := range forgetest.Losses {
				pr := 20 + i
				g.reviewPR(pr)
				posts := fmt.Sprintf("/repos/acme/widget/issues/%d/comments", pr)
				g.gh.LoseAfter("POST", posts, loss, 1)
				id := 1_000_000 + commentIDs.Add(1)
				body := payload(t, "issue_comment.json", ghPayload{PR: pr, CommentID: id, Body: "/ask Why?"})
				if code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret); code != http.StatusAccepted {
					t.Fatalf("%s: ask: %d %+v", loss, code, r)
				}
				chattest.Eventually(t, "the comment posted", func() bool { return g.commentState(chat.ForgeGitHub, id) == chat.CommentPosted })
				if n := len(withMarker(g.gh.IssueComments("acme/widget", pr))); n != 1 {
					t.Errorf("%s: %d replies, want 1", loss, n)
				}
				if n := len(g.gh.CallsTo("POST", posts)); n != 1 {
					t.Errorf("%s: %d posts, want 1 (the retry finds the reply)", loss, n)
				}
			}
		})
		t.Run(m.name+"/gitlab", func(t *testing.T) {
			t.Parallel()
			e := setupGitLab(t, m, nil)
			e.review("scripted", nil) // MR 7
			for _, loss := range forgetest.Losses {
				note := 2_000_000 + commentIDs.Add(1)
				d := fmt.Sprintf("d-once-%d", note)
				e.gl.AddDiscussion("acme/widget", 7, d, gitlabtest.Note{ID: note, Body: "/ask Why?"})
				posts := "/api/v4/projects/acme%2Fwidget/merge_requests/7/discussions/" + d + "/notes"
				e.gl.LoseAfter("POST", posts, loss, 1)
				body := glNotePayload(t, glPayload{IID: 7, NoteID: note, Discussion: d, Body: "/ask Why?"})
				if code, r := deliverGitLab(t, e.url, uuid.NewString(), body, testGitLabSecret); code != http.StatusAccepted {
					t.Fatalf("%s: ask: %d %+v", loss, code, r)
				}
				chattest.Eventually(t, "the note posted", func() bool { return e.commentState(chat.ForgeGitLab, note) == chat.CommentPosted })
				if n := len(withGitLabMarker(e.gl.Notes("acme/widget", 7, d))); n != 1 {
					t.Errorf("%s: %d replies, want 1", loss, n)
				}
				if n := len(e.gl.CallsTo("POST", posts)); n != 1 {
					t.Errorf("%s: %d posts, want 1 (the retry finds the reply)", loss, n)
				}
			}
		})
	}
}
