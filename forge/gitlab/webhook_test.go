package gitlab_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/forge"
	"github.com/prchat/prchat/forge/gitlab"
)

const diffNote = `{"object_kind":"note","event_type":"note","user":{"id":1,"username":"reviewer"},
 "project":{"id":5,"web_url":"https://gitlab.com/acme/platform/widget","git_http_url":"https://gitlab.com/acme/platform/widget.git",
   "path_with_namespace":"acme/platform/widget"},
 "object_attributes":{"id":31,"discussion_id":"d9","note":"/ask Why?","noteable_type":"MergeRequest","type":"DiffNote",
   "system":false,"action":"create",
   "position":{"base_sha":"b1","head_sha":"h1","old_path":"a.go","new_path":"a.go","position_type":"text","new_line":12,
     "line_range":{"start":{"type":"new","new_line":8},"end":{"type":"new","new_line":12}}}},
 "merge_request":{"iid":4}}`

func headers(token string) http.Header {
	h := http.Header{}
	h.Set("X-Gitlab-Event", "Note Hook")
	h.Set("X-Gitlab-Token", token)
	return h
}

// TestWebhookRead: the token is checked before the body is read, and an
// /ask diff note becomes a question in its discussion, focused on its
// lines, de-duplicated on the note id when GitLab sends no key.
func TestWebhookRead(t *testing.T) {
	t.Parallel()
	w := gitlab.NewWebhook(forge.WebhookConfig{Secrets: []string{"tok"}})
	read := func(h http.Header, body string) (chat.Delivery, bool, error) {
		read := false
		d, err := w.Read(t.Context(), h, func() ([]byte, error) { read = true; return []byte(body), nil })
		return d, read, err
	}
	d, _, err := read(headers("tok"), diffNote)
	if err != nil {
		t.Fatal(err)
	}
	want := chat.Delivery{Event: "Note Hook", Comment: chat.Comment{
		Forge: chat.ForgeGitLab, DeliveryID: "note:31", Repository: "acme/platform/widget",
		CloneURL: "https://gitlab.com/acme/platform/widget.git", HTMLURL: "https://gitlab.com/acme/platform/widget",
		PR: 4, CommentID: 31, Question: "Why?", Thread: "d9", Discussion: "d9", HeadSHA: "h1", BaseSHA: "b1",
		Author: chat.Author{Login: "reviewer", ID: 1},
		Focus:  &chat.Focus{Kind: chat.FocusSection, Anchors: []chat.Anchor{{Path: "a.go", StartLine: 8, EndLine: 12}}},
	}}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("delivery (-want +got):\n%s", diff)
	}
	if _, read, err := read(headers("nope"), diffNote); chat.ErrorCode(err) != chat.CodeUnauthorized || read {
		t.Errorf("wrong token: %v (body read: %v), want unauthorized before the body is read", err, read)
	}
	bot := `{"object_kind":"note","user":{"username":"project_5_bot_0a1b"},"project":{"path_with_namespace":"a/b"},
 "object_attributes":{"id":32,"discussion_id":"d","note":"/ask Why?","noteable_type":"MergeRequest"},"merge_request":{"iid":4}}`
	if d, _, err := read(headers("tok"), bot); err != nil || d.Ignored != "notes by bots are ignored" {
		t.Errorf("bot: %+v %v", d, err)
	}
}

func TestLineLink(t *testing.T) {
	t.Parallel()
	var c *gitlab.Client
	got := c.LineLink("https://gitlab.com/g/p", "abc", "dir/a b.go", 2, 2)
	if want := "https://gitlab.com/g/p/-/blob/abc/dir/a%20b.go#L2-2"; got != want {
		t.Errorf("LineLink = %q, want %q", got, want)
	}
}

// fixture reads testdata/<file>, an event as GitLab delivers it, changed
// by edit.
func fixture(t *testing.T, file string, edit func(e map[string]any)) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var e map[string]any
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(e)
	}
	out, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// obj returns the object at a path of keys in e.
func obj(e map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		e = e[k].(map[string]any)
	}
	return e
}

// setPosition sets the fields of a note's position and original position.
func setPosition(fields map[string]any) func(map[string]any) {
	return func(e map[string]any) {
		for _, k := range []string{"position", "original_position"} {
			maps.Copy(obj(e, "object_attributes", k), fields)
		}
	}
}

// TestWebhookReadFixtures: GitLab's note events as it delivers them become
// questions in their discussion (every note has one: a reply continues the
// conversation of its discussion's first note, a plain note's too), focused
// on a diff note's lines: new_line at the head, old_line alone at the base;
// a project in nested groups is named by its full path.
func TestWebhookReadFixtures(t *testing.T) {
	t.Parallel()
	w := gitlab.NewWebhook(forge.WebhookConfig{Secrets: []string{"tok"}})
	const head, base = "c0ffee0000000000000000000000000000000001", "ba5e000000000000000000000000000000000001"
	const timelineID, diffID = "6a9c1750b37d513a43987b574953fceb50b03ce7", "f3d09a3b6bb4d4a6e2a1fe8b8d3e0e6c1c2b9f41"
	comment := func(id int64, question, discussion string, a ...chat.Anchor) chat.Comment {
		c := chat.Comment{Forge: chat.ForgeGitLab, DeliveryID: "note:" + strconv.FormatInt(id, 10), Repository: "acme/widget",
			CloneURL: "https://gitlab.com/acme/widget.git", HTMLURL: "https://gitlab.com/acme/widget", PR: 7, CommentID: id,
			Question: question, Thread: discussion, Discussion: discussion, Author: chat.Author{Login: "reviewer", ID: 31}}
		if len(a) > 0 {
			c.Focus = &chat.Focus{Kind: chat.FocusSection, Anchors: a}
			c.HeadSHA, c.BaseSHA = head, base
		}
		return c
	}
	const diff = "note_merge_request_diff.json"
	removed := setPosition(map[string]any{"old_line": 3, "new_line": nil, "line_range": map[string]any{
		"start": map[string]any{"line_code": "x_3_0", "type": "old", "old_line": 3, "new_line": nil},
		"end":   map[string]any{"line_code": "x_3_0", "type": "old", "old_line": 3, "new_line": nil}}})
	for _, c := range []struct {
		name, file string
		edit       func(map[string]any)
		want       chat.Comment
	}{
		{"a timeline note", "note_merge_request.json", nil, comment(2201, "Why does Load fail?", timelineID)},
		{"a reply to a timeline note", "note_merge_request_reply.json", nil, comment(2203, "And then?", timelineID)},
		{"added lines", diff, nil, comment(2202, "Why this check?", diffID, chat.Anchor{Path: "settings/settings.go", StartLine: 8, EndLine: 12})},
		{"a kept line", diff, setPosition(map[string]any{"old_line": 3, "new_line": 7, "line_range": nil}),
			comment(2202, "Why this check?", diffID, chat.Anchor{Path: "settings/settings.go", StartLine: 7, EndLine: 7})},
		{"a removed line", diff, removed,
			comment(2202, "Why this check?", diffID, chat.Anchor{Path: "settings/settings.go", StartLine: 3, EndLine: 3, Side: chat.SideBase})},
		{"removed lines of a renamed file", diff, setPosition(map[string]any{"old_path": "config/settings.go", "old_line": 4, "new_line": nil, "line_range": map[string]any{
			"start": map[string]any{"type": "old", "old_line": 2, "new_line": nil},
			"end":   map[string]any{"type": "old", "old_line": 4, "new_line": nil}}}),
			comment(2202, "Why this check?", diffID, chat.Anchor{Path: "config/settings.go", StartLine: 2, EndLine: 4, Side: chat.SideBase})},
		{"from a removed line to an added one", diff, setPosition(map[string]any{"old_line": nil, "new_line": 5, "line_range": map[string]any{
			"start": map[string]any{"type": "old", "old_line": 3, "new_line": nil},
			"end":   map[string]any{"type": "new", "old_line": nil, "new_line": 5}}}),
			comment(2202, "Why this check?", diffID, chat.Anchor{Path: "settings/settings.go", StartLine: 5, EndLine: 5})},
		{"a file", diff, setPosition(map[string]any{"position_type": "file", "old_line": nil, "new_line": nil, "line_range": nil}),
			comment(2202, "Why this check?", diffID, chat.Anchor{Path: "settings/settings.go"})},
		{"a reply on the diff", diff, func(e map[string]any) {
			obj(e, "object_attributes")["id"] = 2204
		}, comment(2204, "Why this check?", diffID, chat.Anchor{Path: "settings/settings.go", StartLine: 8, EndLine: 12})},
		{"only an original position", diff, func(e map[string]any) {
			removed(e)
			obj(e, "object_attributes")["position"] = nil
		}, comment(2202, "Why this check?", diffID, chat.Anchor{Path: "settings/settings.go", StartLine: 3, EndLine: 3, Side: chat.SideBase})},
		{"a position on an older version", diff, func(e map[string]any) {
			obj(e, "merge_request", "last_commit")["id"] = "c0ffee0000000000000000000000000000000002"
		}, func() chat.Comment {
			c := comment(2202, "Why this check?", diffID, chat.Anchor{Path: "settings/settings.go", StartLine: 8, EndLine: 12})
			c.HeadSHA, c.BaseSHA = "", "" // looked up: the MR's head is not the position's
			return c
		}()},
		{"a project in nested groups", "note_merge_request.json", func(e map[string]any) {
			p := obj(e, "project")
			p["path_with_namespace"], p["namespace"] = "acme/platform/widget", "platform"
			p["web_url"], p["git_http_url"] = "https://gitlab.com/acme/platform/widget", "https://gitlab.com/acme/platform/widget.git"
		}, func() chat.Comment {
			c := comment(2201, "Why does Load fail?", timelineID)
			c.Repository, c.HTMLURL, c.CloneURL = "acme/platform/widget", "https://gitlab.com/acme/platform/widget", "https://gitlab.com/acme/platform/widget.git"
			return c
		}()},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			body := fixture(t, c.file, c.edit)
			d, err := w.Read(t.Context(), headers("tok"), func() ([]byte, error) { return body, nil })
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(chat.Delivery{Event: "Note Hook", Comment: c.want}, d); diff != "" {
				t.Errorf("delivery (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWebhookReadIgnores: GitLab's deliveries that are no question are
// answered as ignored, with why.
func TestWebhookReadIgnores(t *testing.T) {
	t.Parallel()
	w := gitlab.NewWebhook(forge.WebhookConfig{Secrets: []string{"tok"}, Self: func(context.Context) (string, error) { return "prchat", nil }})
	note := func(edit func(a map[string]any)) []byte {
		return fixture(t, "note_merge_request.json", func(e map[string]any) { edit(obj(e, "object_attributes")) })
	}
	mrHook := headers("tok")
	mrHook.Set("X-Gitlab-Event", "Merge Request Hook")
	for _, c := range []struct {
		name   string
		h      http.Header
		body   []byte
		reason string
	}{
		{"a merge request event", mrHook, fixture(t, "merge_request_update.json", nil), `event "Merge Request Hook" is not acted on`},
		{"an edited note", headers("tok"), note(func(a map[string]any) { a["action"] = "update" }), `only new notes are acted on, not "update"`},
		{"a system note", headers("tok"), note(func(a map[string]any) { a["system"] = true }), "system notes are ignored"},
		{"no /ask", headers("tok"), note(func(a map[string]any) { a["note"] = "LGTM /ask" }), "does not start with /ask"},
		{"prchat's own note", headers("tok"), fixture(t, "note_merge_request.json", func(e map[string]any) { obj(e, "user")["username"] = "PRCHAT" }),
			"notes by prchat's own account are ignored"},
		{"a note on an issue", headers("tok"), fixture(t, "note_merge_request.json", func(e map[string]any) {
			obj(e, "object_attributes")["noteable_type"] = "Issue"
			e["issue"] = map[string]any{"iid": 3, "title": "x"}
			delete(e, "merge_request")
		}), "the note is not on a merge request"},
	} {
		d, err := w.Read(t.Context(), c.h, func() ([]byte, error) { return c.body, nil })
		if err != nil || !strings.Contains(d.Ignored, c.reason) {
			t.Errorf("%s: %+v %v, want ignored: %s", c.name, d, err, c.reason)
		}
	}
	// A note that names no discussion to reply in is invalid.
	body := note(func(a map[string]any) { delete(a, "discussion_id") })
	if _, err := w.Read(t.Context(), headers("tok"), func() ([]byte, error) { return body, nil }); chat.ErrorCode(err) != chat.CodeInvalid {
		t.Errorf("no discussion: %v, want invalid", err)
	}
}
