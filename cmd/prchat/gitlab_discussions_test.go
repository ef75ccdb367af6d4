package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/forge/gitlab/gitlabtest"
)

// lastRequest is the last agent call of the scripted backend.
func (e *env) lastRequest() chat.RunRequest {
	e.t.Helper()
	reqs := e.scripted.Requests()
	if len(reqs) == 0 {
		e.t.Fatal("the agent was not called")
	}
	return reqs[len(reqs)-1]
}

// TestGitLabDiscussions: on GitLab a conversation follows its discussion,
// also one that began as a plain timeline note; a note on a removed line
// is focused on the base's line and the agent is told which commit that
// is; a project in nested groups is a registered repository's through its
// forge_project, and is answered in that project.
func TestGitLabDiscussions(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := setupGitLab(t, m, nil)
			e.review("scripted", nil) // MR 7
			newID := func() int64 { return 3_000_000 + commentIDs.Add(1) }
			ask := func(project string, iid int, p glPayload) receipt {
				t.Helper()
				p.Repo, p.IID = project, iid
				if p.NoteID == 0 {
					p.NoteID = newID()
				}
				code, r := deliverGitLab(t, e.url, uuid.NewString(), glNotePayload(t, p), testGitLabSecret)
				if code != http.StatusAccepted || r.Status != "queued" {
					t.Fatalf("note %d: %d %+v", p.NoteID, code, r)
				}
				return r
			}
			replies := func(project string, iid int, d string, n int) []gitlabtest.Note {
				t.Helper()
				chattest.Eventually(t, fmt.Sprintf("%d replies in %s", n, d), func() bool { return len(withGitLabMarker(e.gl.Notes(project, iid, d))) >= n })
				return withGitLabMarker(e.gl.Notes(project, iid, d))
			}

			t.Run("a reply to a timeline note continues its conversation", func(t *testing.T) {
				first := newID()
				e.gl.AddDiscussion("acme/widget", 7, "d-note", gitlabtest.Note{ID: first, Body: "/ask Why does Load fail?"})
				r := ask("acme/widget", 7, glPayload{NoteID: first, Discussion: "d-note", Body: "/ask Why does Load fail?"})
				conv := r.ConversationID
				e.wait(conv, 1)
				replies("acme/widget", 7, "d-note", 1)
				// prchat's reply made the note a discussion; a reply in it
				// is a DiscussionNote of the same discussion.
				r = ask("acme/widget", 7, glPayload{Discussion: "d-note", Type: "DiscussionNote", Body: "/ask And for a blank path?"})
				if r.ConversationID != conv || r.Turn != 2 {
					t.Fatalf("reply: %+v, want turn 2 of %s", r, conv)
				}
				if got := e.wait(conv, 2); got.State != "succeeded" || got.Session != "resumed" {
					t.Errorf("turn 2 = %+v", got)
				}
				replies("acme/widget", 7, "d-note", 2)

				// Another timeline note is a discussion, and a conversation, of
				// its own.
				other := newID()
				e.gl.AddDiscussion("acme/widget", 7, "d-other", gitlabtest.Note{ID: other, Body: "/ask Where is Load called?"})
				r = ask("acme/widget", 7, glPayload{NoteID: other, Discussion: "d-other", Body: "/ask Where is Load called?"})
				if r.ConversationID == conv || r.Turn != 1 {
					t.Fatalf("another note: %+v, want a new conversation", r)
				}
				e.wait(r.ConversationID, 1)
				replies("acme/widget", 7, "d-other", 1)
			})

			t.Run("a note on a removed line is focused on the base", func(t *testing.T) {
				note := newID()
				e.gl.AddDiscussion("acme/widget", 7, "d-removed", gitlabtest.Note{ID: note, Body: "/ask What did this comment say?"})
				r := ask("acme/widget", 7, glPayload{NoteID: note, Discussion: "d-removed", Type: "DiffNote", Body: "/ask What did this comment say?",
					Path: "settings/settings.go", StartLine: 3, EndLine: 3, Removed: true, Head: e.head, Base: e.base})
				e.wait(r.ConversationID, 1)
				req := e.lastRequest()
				want := chat.Anchor{Path: "settings/settings.go", StartLine: 3, EndLine: 3, Side: chat.SideBase}
				if req.Focus == nil || len(req.Focus.Anchors) != 1 || req.Focus.Anchors[0] != want {
					t.Errorf("focus = %+v, want %+v", req.Focus, want)
				}
				if s := `"side": "base" are files and lines of the pull request's base commit ` + e.base; !strings.Contains(req.Prompt, s) {
					t.Errorf("the prompt does not name the base commit:\n%s", req.Prompt)
				}
				var turn struct{ Focus *chat.Focus }
				e.do("GET", fmt.Sprintf("/api/v1/conversations/%s/turns/1", r.ConversationID), nil, http.StatusOK, &turn)
				if turn.Focus == nil || len(turn.Focus.Anchors) != 1 || turn.Focus.Anchors[0] != want {
					t.Errorf("stored focus = %+v", turn.Focus)
				}
				replies("acme/widget", 7, "d-removed", 1)

				// A note on an added line is focused on the head.
				note = newID()
				e.gl.AddDiscussion("acme/widget", 7, "d-added", gitlabtest.Note{ID: note, Body: "/ask Why this check?"})
				r = ask("acme/widget", 7, glPayload{NoteID: note, Discussion: "d-added", Type: "DiffNote", Body: "/ask Why this check?",
					Path: "settings/settings.go", StartLine: 9, EndLine: 11, Head: e.head, Base: e.base})
				e.wait(r.ConversationID, 1)
				req = e.lastRequest()
				if req.Focus == nil || len(req.Focus.Anchors) != 1 || req.Focus.Anchors[0] != (chat.Anchor{Path: "settings/settings.go", StartLine: 9, EndLine: 11}) {
					t.Errorf("focus = %+v, want settings/settings.go 9-11 at the head", req.Focus)
				}
				if s := "head commit " + e.head; !strings.Contains(req.Prompt, s) || strings.Contains(req.Prompt, "base commit "+e.base+",") {
					t.Errorf("the prompt does not name the head commit alone:\n%s", req.Prompt)
				}
			})

			t.Run("a project in nested groups", func(t *testing.T) {
				const project = "acme/platform/widget"
				var repo struct {
					ForgeProject string `json:"forge_project"`
				}
				e.do("POST", "/api/v1/repos", map[string]any{"name": "platform/widget", "clone_path": e.repoDir, "forge_project": project}, http.StatusCreated, &repo)
				if repo.ForgeProject != project {
					t.Fatalf("registered %+v", repo)
				}
				e.do("POST", "/api/v1/repos/platform/widget/pulls/4/reviews", map[string]any{"head_sha": e.head, "base_sha": e.base, "backend": "scripted"}, http.StatusCreated, nil)
				note := newID()
				e.gl.AddDiscussion(project, 4, "d-nested", gitlabtest.Note{ID: note, Body: "/ask Why does Load fail?"})
				r := ask(project, 4, glPayload{NoteID: note, Discussion: "d-nested", Body: "/ask Why does Load fail?"})
				if got := e.wait(r.ConversationID, 1); got.State != "succeeded" {
					t.Fatalf("turn = %+v", got)
				}
				reply := replies(project, 4, "d-nested", 1)[0].Body
				if want := fmt.Sprintf("(https://gitlab.com/%s/-/blob/%s/settings/settings.go#L8-12)", project, e.head); !strings.Contains(reply, want) {
					t.Errorf("reply lacks %s:\n%s", want, reply)
				}
				var convs struct{ Conversations []struct{ ID string } }
				e.do("GET", "/api/v1/repos/platform/widget/pulls/4/conversations", nil, http.StatusOK, &convs)
				if len(convs.Conversations) != 1 || convs.Conversations[0].ID != r.ConversationID {
					t.Errorf("conversations of platform/widget#4 = %+v, want %s", convs, r.ConversationID)
				}
				// Every call went to the nested project.
				escaped := "/api/v4/projects/acme%2Fplatform%2Fwidget/"
				for _, c := range []string{
					fmt.Sprintf("POST %smerge_requests/4/notes/%d/award_emoji", escaped, note),
					fmt.Sprintf("POST %smerge_requests/4/discussions/d-nested/notes", escaped),
				} {
					method, path, _ := strings.Cut(c, " ")
					if len(e.gl.CallsTo(method, path)) == 0 {
						t.Errorf("no %s: %+v", c, e.gl.Calls())
					}
				}
				for _, c := range e.gl.Calls() {
					if strings.Contains(c.Path, "/projects/platform%2Fwidget/") {
						t.Errorf("a call to the repository's name, not its project: %+v", c)
					}
				}
				// A project in nested groups that no repository names is
				// told that prchat does not know it.
				unknown := newID()
				e.gl.AddDiscussion("acme/other/thing", 3, "d-unknown", gitlabtest.Note{ID: unknown, Body: "/ask Why?"})
				code, r3 := deliverGitLab(t, e.url, uuid.NewString(), glNotePayload(t, glPayload{Repo: "acme/other/thing", IID: 3, NoteID: unknown, Discussion: "d-unknown", Body: "/ask Why?"}), testGitLabSecret)
				if code != http.StatusOK || !strings.Contains(r3.Reason, "prchat does not know the repository acme/other/thing") {
					t.Errorf("an unknown nested project: %d %+v", code, r3)
				}
				if got := replies("acme/other/thing", 3, "d-unknown", 1); !strings.Contains(got[0].Body, "prchat does not know the repository acme/other/thing") {
					t.Errorf("reply:\n%s", got[0].Body)
				}
				// GitLab delivering the note again is a duplicate.
				if code, r2 := deliverGitLab(t, e.url, uuid.NewString(), glNotePayload(t, glPayload{Repo: project, IID: 4, NoteID: note, Discussion: "d-nested", Body: "/ask Why does Load fail?"}), testGitLabSecret); code != http.StatusOK || r2.Status != "duplicate" {
					t.Errorf("the same note again: %d %+v", code, r2)
				}
			})

			t.Run("events that are not questions are ignored", func(t *testing.T) {
				mr, err := os.ReadFile(filepath.Join("testdata", "gitlab", "merge_request_update.json"))
				if err != nil {
					t.Fatal(err)
				}
				req, _ := http.NewRequest(http.MethodPost, e.url+"/webhooks/gitlab", bytes.NewReader(mr))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Gitlab-Event", "Merge Request Hook")
				req.Header.Set("X-Gitlab-Token", testGitLabSecret)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("merge request event: %d", resp.StatusCode)
				}
				for _, c := range []struct {
					name   string
					p      glPayload
					reason string
				}{
					{"an edited note", glPayload{Action: "update"}, "only new notes"},
					{"a system note", glPayload{System: true}, "system notes"},
					{"no /ask", glPayload{Body: "Thanks /ask"}, "does not start with /ask"},
				} {
					p := c.p
					p.Repo, p.IID, p.NoteID, p.Discussion = "acme/widget", 7, newID(), "d-ignored"
					if p.Body == "" {
						p.Body = "/ask Why?"
					}
					code, r := deliverGitLab(t, e.url, uuid.NewString(), glNotePayload(t, p), testGitLabSecret)
					if code != http.StatusOK || r.Status != "ignored" || !strings.Contains(r.Reason, c.reason) {
						t.Errorf("%s: %d %+v, want ignored: %s", c.name, code, r, c.reason)
					}
				}
			})
		})
	}
}

// TestGitLabPrivateProjectInNestedGroup: a private project in nested
// groups, registered with its clone URL and forge project, is cloned with
// the GitLab token (only on GitLab's own host), its unreviewed merge
// request gets a review version from GitLab, and the answer goes to the
// project's discussion.
func TestGitLabPrivateProjectInNestedGroup(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := setupGitLab(t, m, func(c *Config) {
				c.AllowFileURLs = true     // the fake git server speaks http://
				c.CloneAllowPrivate = true // ... on 127.0.0.1
			})
			const project = "acme/platform/private"
			root := t.TempDir()
			bare := filepath.Join(root, project+".git")
			for _, args := range [][]string{
				{"clone", "-q", "--bare", e.repoDir, bare},
				{"-C", bare, "update-ref", "refs/heads/main", e.head},
			} {
				if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			cloneURL := e.gl.ServeGit(t, root) + "/" + project + ".git"
			e.do("POST", "/api/v1/repos", map[string]any{"name": "platform/private", "clone_url": cloneURL, "forge_project": project}, http.StatusCreated, nil)
			e.gl.AddMR(project, 8, e.head, e.base)
			note := 6_000_000 + commentIDs.Add(1)
			e.gl.AddDiscussion(project, 8, "d-private", gitlabtest.Note{ID: note, Body: "/ask Where does Load check the path?"})
			body := glNotePayload(t, glPayload{Repo: project, IID: 8, NoteID: note, Discussion: "d-private", Body: "/ask Where does Load check the path?",
				CloneURL: cloneURL, Head: e.head})
			code, r := deliverGitLab(t, e.url, uuid.NewString(), body, testGitLabSecret)
			if code != http.StatusAccepted {
				t.Fatalf("note: %d %+v", code, r)
			}
			if got := e.wait(r.ConversationID, 1); got.State != "succeeded" {
				t.Fatalf("turn = %+v", got)
			}
			chattest.Eventually(t, "the reply", func() bool { return len(withGitLabMarker(e.gl.Notes(project, 8, "d-private"))) == 1 })
			var rev struct {
				HeadSHA string `json:"head_sha"`
			}
			e.do("GET", "/api/v1/repos/platform/private/pulls/8/reviews/latest", nil, http.StatusOK, &rev)
			if rev.HeadSHA != e.head {
				t.Errorf("review head = %q, want %q", rev.HeadSHA, e.head)
			}
			if n := len(e.gl.CallsTo("GET", "/api/v4/projects/acme%2Fplatform%2Fprivate/merge_requests/8")); n != 1 {
				t.Errorf("the merge request was looked up %d times, want once", n)
			}
			var fetched bool
			for _, c := range e.gl.GitCalls() {
				if c.Status == http.StatusOK && strings.HasPrefix(c.Auth, "Basic ") {
					fetched = true
				}
			}
			if !fetched {
				t.Errorf("no authenticated fetch from GitLab's git server: %+v", e.gl.GitCalls())
			}
		})
	}
}
