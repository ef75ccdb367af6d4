package main

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/forge/gitlab/gitlabtest"
)

// TestGitLabDeliveries: what TestGitHubWebhooks checks of GitHub's
// deliveries, of GitLab's: a body too large and a note with a NUL byte are
// refused, copies of one delivery make one turn, a question on a busy
// conversation waits for the pending turn, a failed turn and an answer cut
// short are answered as such, and the metrics count it all.
func TestGitLabDeliveries(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			g := prepareGitLab(t, m, nil)
			e, fake := g.env, g.gl
			hold := make(chan struct{})
			e.scripted.Fallback = func(req chat.RunRequest) scripted.Step {
				switch {
				case strings.Contains(req.Question, "fail"):
					return scripted.Step{Err: errors.New("the model's server hung up")}
				case strings.Contains(req.Question, "cut short"):
					return scripted.Step{Events: []chat.Event{{Type: chat.EventNote, Text: chat.NoteCutShort}}, Answer: goodAnswer("The first half of an answer")}
				case strings.Contains(req.Question, "hold"):
					return scripted.Step{Wait: hold, Answer: goodAnswer("Held, then answered.")}
				}
				return scripted.Step{Answer: goodAnswer("Load returns errEmptyPath.")}
			}
			e.serve(roleOf("serve"))
			e.review("scripted", nil) // MR 7
			newID := func() int64 { return 5_000_000 + commentIDs.Add(1) }
			// note makes a discussion whose first note is an /ask, and its
			// delivery.
			note := func(d, body string) []byte {
				id := newID()
				fake.AddDiscussion("acme/widget", 7, d, gitlabtest.Note{ID: id, Body: body})
				return glNotePayload(t, glPayload{IID: 7, NoteID: id, Discussion: d, Body: body})
			}
			replies := func(d string) []gitlabtest.Note { return withGitLabMarker(fake.Notes("acme/widget", 7, d)) }

			t.Run("a body too large or a NUL byte is refused", func(t *testing.T) {
				big := append(bytes.Repeat([]byte(" "), 25<<20), note("d-big", "/ask Why?")...)
				if code, r := deliverGitLab(t, e.url, uuid.NewString(), big, testGitLabSecret); code != http.StatusRequestEntityTooLarge || r.Error == nil || r.Error.Code != "invalid" {
					t.Errorf("a body over 25 MB: %d %+v", code, r)
				}
				if code, r := deliverGitLab(t, e.url, uuid.NewString(), note("d-nul", "/ask Why\u0000 this?"), testGitLabSecret); code != http.StatusOK || r.Status != "ignored" || !strings.Contains(r.Reason, "NUL") {
					t.Errorf("a NUL byte: %d %+v", code, r)
				}
				var n int64
				if err := e.d.store.DB().Table("webhook_comments").Count(&n).Error; err != nil || n != 0 {
					t.Errorf("webhook_comments: %d rows, %v", n, err)
				}
			})

			t.Run("ten copies of one delivery at once make one turn", func(t *testing.T) {
				body, key := note("d-copies", "/ask Is errEmptyPath exported?"), uuid.NewString()
				var wg sync.WaitGroup
				codes, statuses := make([]int, 10), make([]string, 10)
				convs := make([]string, 10)
				for i := range 10 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						c, r := deliverGitLab(t, e.url, key, body, testGitLabSecret)
						codes[i], statuses[i], convs[i] = c, r.Status, r.ConversationID
					}()
				}
				wg.Wait()
				queued, dup, conv := 0, 0, ""
				for i := range 10 {
					switch {
					case codes[i] == http.StatusAccepted:
						queued, conv = queued+1, convs[i]
					case codes[i] == http.StatusOK && statuses[i] == "duplicate":
						dup++
					}
				}
				if queued != 1 || dup != 9 {
					t.Fatalf("codes %v statuses %v: want one 202 and nine duplicates", codes, statuses)
				}
				e.wait(conv, 1)
				chattest.Eventually(t, "the reply", func() bool { return len(replies("d-copies")) == 1 })
				// The same note under another key is a duplicate too.
				if code, r := deliverGitLab(t, e.url, uuid.NewString(), body, testGitLabSecret); code != http.StatusOK || r.Status != "duplicate" {
					t.Errorf("same note, another key: %d %+v", code, r)
				}
			})

			t.Run("a question on a busy conversation waits for the pending turn", func(t *testing.T) {
				code, r := deliverGitLab(t, e.url, uuid.NewString(), note("d-busy", "/ask hold on, why?"), testGitLabSecret)
				if code != http.StatusAccepted || r.Turn != 1 {
					t.Fatalf("first: %d %+v", code, r)
				}
				conv := r.ConversationID
				chattest.Eventually(t, "turn 1 running", func() bool {
					var turn turnJSON
					e.do("GET", "/api/v1/conversations/"+conv+"/turns/1", nil, http.StatusOK, &turn)
					return turn.State == "running"
				})
				reply := glNotePayload(t, glPayload{IID: 7, NoteID: newID(), Discussion: "d-busy", Type: "DiscussionNote", Body: "/ask And then?"})
				code, r = deliverGitLab(t, e.url, uuid.NewString(), reply, testGitLabSecret)
				if code != http.StatusAccepted || r.Status != "waiting" || r.ConversationID != conv {
					t.Fatalf("second: %d %+v, want 202 waiting on %s", code, r, conv)
				}
				close(hold)
				e.wait(conv, 1)
				chattest.Eventually(t, "turn 2", func() bool {
					var c struct{ Turns []turnJSON }
					e.do("GET", "/api/v1/conversations/"+conv, nil, http.StatusOK, &c)
					return len(c.Turns) == 2
				})
				if got := e.wait(conv, 2); got.State != "succeeded" || got.Session != "resumed" {
					t.Fatalf("turn 2 = %+v", got)
				}
				chattest.Eventually(t, "both replies", func() bool { return len(replies("d-busy")) == 2 })
			})

			t.Run("a failed turn and an answer cut short are answered as such", func(t *testing.T) {
				code, r := deliverGitLab(t, e.url, uuid.NewString(), note("d-fail", "/ask Please fail now."), testGitLabSecret)
				if code != http.StatusAccepted {
					t.Fatalf("ask: %d %+v", code, r)
				}
				if got := e.wait(r.ConversationID, 1); got.State != "failed" {
					t.Fatalf("turn = %+v", got)
				}
				chattest.Eventually(t, "the failure's reply", func() bool { return len(replies("d-fail")) == 1 })
				if reply := replies("d-fail")[0].Body; !strings.Contains(reply, "prchat could not answer this question: the agent backend failed.") {
					t.Errorf("reply:\n%s", reply)
				}
				code, r = deliverGitLab(t, e.url, uuid.NewString(), note("d-short", "/ask Is this cut short?"), testGitLabSecret)
				if code != http.StatusAccepted {
					t.Fatalf("ask: %d %+v", code, r)
				}
				e.wait(r.ConversationID, 1)
				chattest.Eventually(t, "the cut answer's reply", func() bool { return len(replies("d-short")) == 1 })
				if reply := replies("d-short")[0].Body; !strings.HasPrefix(reply, "> **This answer is incomplete**") {
					t.Errorf("reply:\n%s", reply)
				}
			})

			t.Run("metrics", func(t *testing.T) {
				chattest.Eventually(t, "the replies' count", func() bool {
					return strings.Contains(string(e.do("GET", "/metrics", nil, http.StatusOK, nil)), `prchat_webhook_replies_total{forge="gitlab",outcome="posted"} 5`)
				})
				metrics := string(e.do("GET", "/metrics", nil, http.StatusOK, nil))
				for _, want := range []string{
					`prchat_webhook_deliveries_total{event="Note Hook",forge="gitlab",outcome="duplicate"} 10`,
					`prchat_webhook_deliveries_total{event="Note Hook",forge="gitlab",outcome="waiting"} 1`,
					`prchat_webhook_deliveries_total{event="Note Hook",forge="gitlab",outcome="ignored"} 1`,
					`prchat_webhook_duplicates_total{forge="gitlab"} 10`,
				} {
					if !strings.Contains(metrics, want) {
						t.Errorf("metrics lack %s", want)
					}
				}
			})
		})
	}
}

// TestGitLabRestartBetweenAnsweringAndPosting: GitLab stored the reply but
// had not answered when prchat stopped; the restarted daemon finds the
// reply by its marker and posts nothing more.
func TestGitLabRestartBetweenAnsweringAndPosting(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := setupGitLab(t, m, nil)
			e.review("scripted", nil) // MR 7
			e.gl.HoldPosts()
			note := 7_000_000 + commentIDs.Add(1)
			e.gl.AddDiscussion("acme/widget", 7, "d-restart", gitlabtest.Note{ID: note, Body: "/ask Why?"})
			body := glNotePayload(t, glPayload{IID: 7, NoteID: note, Discussion: "d-restart", Body: "/ask Why?"})
			if code, r := deliverGitLab(t, e.url, uuid.NewString(), body, testGitLabSecret); code != http.StatusAccepted {
				t.Fatalf("note: %d %+v", code, r)
			} else {
				e.wait(r.ConversationID, 1)
			}
			posts := "/api/v4/projects/acme%2Fwidget/merge_requests/7/discussions/d-restart/notes"
			chattest.Eventually(t, "the held post", func() bool { return len(withGitLabMarker(e.gl.Notes("acme/widget", 7, "d-restart"))) == 1 })
			e.d.Stop()
			e.gl.ReleasePosts()
			if n := len(e.gl.CallsTo("POST", posts)); n != 1 {
				t.Fatalf("%d posts before the restart, want 1", n)
			}

			d := e.boot(roleOf("serve"), e.cfg)
			e.d, e.url = d, d.URL()
			chattest.Eventually(t, "the note marked posted", func() bool { return e.commentState(chat.ForgeGitLab, note) == chat.CommentPosted })
			if n := len(e.gl.CallsTo("POST", posts)); n != 1 {
				t.Errorf("%d posts, want 1", n)
			}
			if n := len(withGitLabMarker(e.gl.Notes("acme/widget", 7, "d-restart"))); n != 1 {
				t.Errorf("%d replies, want 1", n)
			}
			if n := len(e.gl.CallsTo("GET", "/api/v4/projects/acme%2Fwidget/merge_requests/7/discussions/d-restart")); n < 1 {
				t.Errorf("the restarted daemon did not look for the earlier reply")
			}
		})
	}
}
