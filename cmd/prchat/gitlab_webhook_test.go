package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/google/uuid"
	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/forge/gitlab/gitlabtest"
)

const testGitLabSecret = "gitlab-webhook-secret-42"

// glPayload fills testdata/gitlab/note_merge_request.json.
type glPayload struct {
	Repo, Username, CloneURL string
	// UserID is the note author's id (default 1).
	UserID                 int64
	IID                    int
	NoteID                 int64
	Discussion, Body, Type string
	// Action is the note's action (default create); System marks a
	// system note.
	Action string
	System bool
	// A diff note's position: lines of the head, or with Removed lines of
	// the base (old_line only).
	Path               string
	StartLine, EndLine int
	Removed            bool
	Head, Base         string
}

// Namespace is the project's group (the last of nested groups); Name its
// name.
func (p glPayload) Namespace() string {
	g, _ := path.Split(p.Repo)
	return path.Base(strings.TrimSuffix(g, "/"))
}
func (p glPayload) Name() string { return path.Base(p.Repo) }

func glNotePayload(t *testing.T, p glPayload) []byte {
	t.Helper()
	if p.Repo == "" {
		p.Repo = "acme/widget"
	}
	if p.UserID == 0 {
		p.UserID = 1
	}
	if p.Username == "" {
		p.Username = "reviewer"
	}
	if p.Action == "" {
		p.Action = "create"
	}
	if p.CloneURL == "" {
		p.CloneURL = "https://gitlab.com/" + p.Repo + ".git"
	}
	tmpl, err := template.New("note_merge_request.json").Funcs(template.FuncMap{"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	}}).ParseFiles(filepath.Join("testdata", "gitlab", "note_merge_request.json"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, p); err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b.Bytes()) {
		t.Fatalf("the note payload is not valid JSON:\n%s", b.Bytes())
	}
	return b.Bytes()
}

// deliverGitLab posts a GitLab Note Hook delivery with token.
func deliverGitLab(t *testing.T, base, key string, body []byte, token string) (int, receipt) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/gitlab", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Gitlab-Event", "Note Hook")
	req.Header.Set("X-Gitlab-Instance", "https://gitlab.com")
	req.Header.Set("Idempotency-Key", key)
	if token != "" {
		req.Header.Set("X-Gitlab-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	checkResponse(t, req, resp, raw)
	var r receipt
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return resp.StatusCode, r
}

func withGitLabMarker(ns []gitlabtest.Note) []gitlabtest.Note {
	var out []gitlabtest.Note
	for _, n := range ns {
		if strings.Contains(n.Body, "<!-- prchat:turn:") {
			out = append(out, n)
		}
	}
	return out
}

func TestGitLabWebhooks(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			fake := gitlabtest.New(t)
			e := prepare(t, m, func(c *Config) {
				c.GitLabSecret = testGitLabSecret
				c.GitLabToken = fake.Token
				c.GitLabAPIURL = fake.APIURL()
			})
			e.opts.outboxInterval = 20 * time.Millisecond
			e.opts.commentPoll = 20 * time.Millisecond
			e.opts.commentBackoff = 50 * time.Millisecond
			e.scripted.Fallback = func(chat.RunRequest) scripted.Step {
				return scripted.Step{Answer: goodAnswer("Load returns errEmptyPath.")}
			}
			e.serve(roleOf("serve"))
			e.review("scripted", nil) // MR 7
			newID := func() int64 { return 2_000_000 + commentIDs.Add(1) }

			// A wrong or missing token is refused and stores nothing.
			body := glNotePayload(t, glPayload{IID: 7, NoteID: newID(), Discussion: "d-forged", Body: "/ask Why?"})
			for _, tok := range []string{"wrong", ""} {
				if code, r := deliverGitLab(t, e.url, uuid.NewString(), body, tok); code != http.StatusUnauthorized || r.Error == nil || r.Error.Code != "unauthorized" {
					t.Errorf("token %q: %d %+v", tok, code, r)
				}
			}
			var n int64
			if err := e.d.store.DB().Table("webhook_comments").Count(&n).Error; err != nil || n != 0 {
				t.Fatalf("webhook_comments: %d rows, %v", n, err)
			}

			// A note on the MR's timeline is answered in its discussion.
			note := newID()
			fake.AddDiscussion("acme/widget", 7, "d-timeline", gitlabtest.Note{ID: note, Body: "/ask Why does Load fail?"})
			body = glNotePayload(t, glPayload{IID: 7, NoteID: note, Discussion: "d-timeline", Body: "/ask Why does Load fail?"})
			key := uuid.NewString()
			code, r := deliverGitLab(t, e.url, key, body, testGitLabSecret)
			if code != http.StatusAccepted || r.Status != "queued" || r.Turn != 1 {
				t.Fatalf("timeline note: %d %+v", code, r)
			}
			timeline := r.ConversationID
			e.wait(timeline, 1)
			chattest.Eventually(t, "the reply", func() bool { return len(withGitLabMarker(fake.Notes("acme/widget", 7, "d-timeline"))) == 1 })
			reply := withGitLabMarker(fake.Notes("acme/widget", 7, "d-timeline"))[0].Body
			if want := fmt.Sprintf("(https://gitlab.com/acme/widget/-/blob/%s/settings/settings.go#L8-12)", e.head); !strings.Contains(reply, want) {
				t.Errorf("reply lacks %s:\n%s", want, reply)
			}
			checkReplyLines(t, reply)
			if aw := fake.Awards(); len(aw) == 0 || aw[0].NoteID != note || aw[0].Name != "eyes" {
				t.Errorf("awards = %+v", aw)
			}
			// GitLab retrying the delivery, or the same note under another key.
			for _, k := range []string{key, uuid.NewString()} {
				if code, r := deliverGitLab(t, e.url, k, body, testGitLabSecret); code != http.StatusOK || r.Status != "duplicate" {
					t.Errorf("redelivery: %d %+v", code, r)
				}
			}

			// A diff note focuses on its lines; a reply in its thread goes on.
			diff := newID()
			fake.AddDiscussion("acme/widget", 7, "d-diff", gitlabtest.Note{ID: diff, Body: "/ask Why this check?"})
			body = glNotePayload(t, glPayload{IID: 7, NoteID: diff, Discussion: "d-diff", Type: "DiffNote", Body: "/ask Why this check?",
				Path: "settings/settings.go", StartLine: 8, EndLine: 12, Head: e.head, Base: e.base})
			code, r = deliverGitLab(t, e.url, uuid.NewString(), body, testGitLabSecret)
			if code != http.StatusAccepted || r.ConversationID == timeline {
				t.Fatalf("diff note: %d %+v", code, r)
			}
			thread := r.ConversationID
			e.wait(thread, 1)
			focus := e.scripted.Requests()[len(e.scripted.Requests())-1].Focus
			if focus == nil || len(focus.Anchors) != 1 || focus.Anchors[0] != (chat.Anchor{Path: "settings/settings.go", StartLine: 8, EndLine: 12}) {
				t.Errorf("focus = %+v", focus)
			}
			body = glNotePayload(t, glPayload{IID: 7, NoteID: newID(), Discussion: "d-diff", Type: "DiffNote", Body: "/ask And a blank path?",
				Path: "settings/settings.go", StartLine: 8, EndLine: 12, Head: e.head, Base: e.base})
			code, r = deliverGitLab(t, e.url, uuid.NewString(), body, testGitLabSecret)
			if code != http.StatusAccepted || r.ConversationID != thread || r.Turn != 2 {
				t.Fatalf("thread reply: %d %+v, want turn 2 of %s", code, r, thread)
			}
			e.wait(thread, 2)
			chattest.Eventually(t, "both thread replies", func() bool { return len(withGitLabMarker(fake.Notes("acme/widget", 7, "d-diff"))) == 2 })

			// Bots and prchat's own notes are ignored.
			for _, user := range []string{"project_5_bot_0a1b2c", fake.Username} {
				body = glNotePayload(t, glPayload{IID: 7, NoteID: newID(), Discussion: "d-x", Body: "/ask Me?", Username: user})
				if code, r := deliverGitLab(t, e.url, uuid.NewString(), body, testGitLabSecret); code != http.StatusOK || r.Status != "ignored" {
					t.Errorf("note by %s: %d %+v", user, code, r)
				}
			}

			// An unreviewed MR gets a review version from the API.
			fake.AddMR("acme/widget", 8, e.head, e.base)
			note = newID()
			fake.AddDiscussion("acme/widget", 8, "d-8", gitlabtest.Note{ID: note, Body: "/ask Where is Load called?"})
			body = glNotePayload(t, glPayload{IID: 8, NoteID: note, Discussion: "d-8", Body: "/ask Where is Load called?", Head: e.head})
			code, r = deliverGitLab(t, e.url, uuid.NewString(), body, testGitLabSecret)
			if code != http.StatusAccepted {
				t.Fatalf("unreviewed MR: %d %+v", code, r)
			}
			if got := e.wait(r.ConversationID, 1); got.State != "succeeded" {
				t.Fatalf("turn = %+v", got)
			}
			chattest.Eventually(t, "the reply", func() bool { return len(withGitLabMarker(fake.Notes("acme/widget", 8, "d-8"))) == 1 })
			if len(fake.CallsTo("GET", "/api/v4/projects/acme%2Fwidget/merge_requests/8")) != 1 {
				t.Errorf("the MR was not looked up once")
			}
		})
	}
}
