package main

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/forge/github/githubtest"
	"github.com/prchat/prchat/forge/gitlab/gitlabtest"
)

// TestWebhookAskers: PRCHAT_WEBHOOK_ASKERS decides whose /ask is taken. A
// refused author gets the confused reaction and nothing else: no 👀, no
// stored question, no turn.
func TestWebhookAskers(t *testing.T) {
	// Not parallel with other tests: its six daemons run together, and
	// then leave the timing-bound tests (the App token cache) to run
	// without them.
	ms := modes(t)
	for _, askers := range []string{chat.AskersWriters, chat.AskersMembers, chat.AskersAnyone} {
		m := ms[len(ms)-1]
		t.Run(askers+"/github", func(t *testing.T) {
			t.Parallel()
			g := setupGitHub(t, m, func(c *Config, _ *githubtest.Server) { c.WebhookAskers = askers })
			g.reviewPR(7)
			g.gh.SetPermission("acme/widget", "reader", "read")
			for _, c := range []struct {
				association, login string
				answered           map[string]bool
			}{
				{"OWNER", "owner", map[string]bool{chat.AskersWriters: true, chat.AskersMembers: true, chat.AskersAnyone: true}},
				{"COLLABORATOR", "collaborator", map[string]bool{chat.AskersWriters: true, chat.AskersMembers: true, chat.AskersAnyone: true}},
				{"MEMBER", "writer", map[string]bool{chat.AskersWriters: true, chat.AskersMembers: true, chat.AskersAnyone: true}},
				{"MEMBER", "reader", map[string]bool{chat.AskersMembers: true, chat.AskersAnyone: true}},
				{"CONTRIBUTOR", "contributor", map[string]bool{chat.AskersAnyone: true}},
				{"NONE", "passer-by", map[string]bool{chat.AskersAnyone: true}},
			} {
				id := 1_000_000 + commentIDs.Add(1)
				turns := g.count("turns")
				body := payload(t, "issue_comment.json", ghPayload{PR: 7, CommentID: id, Body: "/ask Why?", Login: c.login, Association: c.association})
				code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret)
				var reactions []string
				for _, re := range g.gh.Reactions() {
					if re.CommentID == id {
						reactions = append(reactions, re.Content)
					}
				}
				if c.answered[askers] {
					if code != http.StatusAccepted || r.Turn == 0 {
						t.Errorf("%s %s: %d %+v, want it taken", c.association, c.login, code, r)
						continue
					}
					g.wait(r.ConversationID, r.Turn)
					chattest.Eventually(t, "the 👀", func() bool {
						for _, re := range g.gh.Reactions() {
							if re.CommentID == id && re.Content == "eyes" {
								return true
							}
						}
						return false
					})
					continue
				}
				if code != http.StatusOK || r.Status != "ignored" {
					t.Errorf("%s %s: %d %+v, want ignored", c.association, c.login, code, r)
				}
				if fmt.Sprint(reactions) != "[confused]" {
					t.Errorf("%s %s: reactions %v, want only confused", c.association, c.login, reactions)
				}
				if n := g.count("turns"); n != turns {
					t.Errorf("%s %s: a turn was made", c.association, c.login)
				}
				var rows int64
				if err := g.d.store.DB().Table("webhook_comments").Where("comment_id = ?", id).Count(&rows).Error; err != nil || rows != 0 {
					t.Errorf("%s %s: %d stored questions (%v)", c.association, c.login, rows, err)
				}
			}
		})
		t.Run(askers+"/gitlab", func(t *testing.T) {
			t.Parallel()
			e := setupGitLab(t, m, func(c *Config) { c.WebhookAskers = askers })
			e.review("scripted", nil) // MR 7
			for _, c := range []struct {
				role     string
				user     int64
				level    int
				answered map[string]bool
			}{
				{"Maintainer", 40, 40, map[string]bool{chat.AskersWriters: true, chat.AskersMembers: true, chat.AskersAnyone: true}},
				{"Developer", 30, 30, map[string]bool{chat.AskersWriters: true, chat.AskersMembers: true, chat.AskersAnyone: true}},
				{"Reporter", 20, 20, map[string]bool{chat.AskersMembers: true, chat.AskersAnyone: true}},
				{"Guest", 10, 10, map[string]bool{chat.AskersMembers: true, chat.AskersAnyone: true}},
				{"no member", 99, 0, map[string]bool{chat.AskersAnyone: true}},
			} {
				e.gl.SetAccess("acme/widget", c.user, c.level)
				note := 2_000_000 + commentIDs.Add(1)
				d := fmt.Sprintf("d-askers-%d", note)
				e.gl.AddDiscussion("acme/widget", 7, d, gitlabtest.Note{ID: note, Body: "/ask Why?"})
				body := glNotePayload(t, glPayload{IID: 7, NoteID: note, Discussion: d, Body: "/ask Why?", UserID: c.user, Username: "user" + fmt.Sprint(c.user)})
				code, r := deliverGitLab(t, e.url, uuid.NewString(), body, testGitLabSecret)
				awards := func() []string {
					var out []string
					for _, a := range e.gl.Awards() {
						if a.NoteID == note {
							out = append(out, a.Name)
						}
					}
					return out
				}
				if c.answered[askers] {
					if code != http.StatusAccepted || r.Turn == 0 {
						t.Errorf("%s: %d %+v, want it taken", c.role, code, r)
						continue
					}
					e.wait(r.ConversationID, r.Turn)
					chattest.Eventually(t, "the 👀", func() bool { return fmt.Sprint(awards()) == "[eyes]" })
					continue
				}
				if code != http.StatusOK || r.Status != "ignored" {
					t.Errorf("%s: %d %+v, want ignored", c.role, code, r)
				}
				if got := fmt.Sprint(awards()); got != "[confused]" {
					t.Errorf("%s: awards %s, want only confused", c.role, got)
				}
				var rows int64
				if err := e.d.store.DB().Table("webhook_comments").Where("comment_id = ?", note).Count(&rows).Error; err != nil || rows != 0 {
					t.Errorf("%s: %d stored questions (%v)", c.role, rows, err)
				}
			}
		})
	}
}
