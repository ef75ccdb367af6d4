package gitlab_test

import (
	"net/http"
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
