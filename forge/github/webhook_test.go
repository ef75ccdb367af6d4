package github_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/forge"
	"github.com/prchat/prchat/forge/github"
)

func sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func headers(event, sig string) http.Header {
	h := http.Header{}
	h.Set("X-GitHub-Event", event)
	h.Set("X-GitHub-Delivery", "d-1")
	if sig != "" {
		h.Set("X-Hub-Signature-256", sig)
	}
	return h
}

const reviewComment = `{"action":"created",
 "comment":{"id":11,"in_reply_to_id":10,"body":"/ask Why this lock?","path":"a/b.go","start_line":null,"line":null,
   "original_start_line":3,"original_line":5,"subject_type":"line","user":{"login":"reviewer","type":"User"}},
 "pull_request":{"number":7,"head":{"sha":"h1"},"base":{"sha":"b1"}},
 "repository":{"full_name":"acme/widget","clone_url":"https://github.com/acme/widget.git","html_url":"https://github.com/acme/widget"},
 "sender":{"login":"reviewer","type":"User"},"installation":{"id":5}}`

// TestWebhookRead: a delivery is verified before it is read, and an /ask
// review comment becomes a question in its thread, focused on its lines
// (the original ones of an outdated comment).
func TestWebhookRead(t *testing.T) {
	t.Parallel()
	self := func(context.Context) (string, error) { return "prchat-bot", nil }
	w := github.NewWebhook(forge.WebhookConfig{Secrets: []string{"new", "old"}, AutoRegister: true, Self: self})
	body := []byte(reviewComment)
	read := func(h http.Header, b []byte) (chat.Delivery, error) {
		return w.Read(t.Context(), h, func() ([]byte, error) { return b, nil })
	}

	d, err := read(headers("pull_request_review_comment", sign("old", body)), body)
	if err != nil {
		t.Fatal(err)
	}
	want := chat.Delivery{Event: "pull_request_review_comment", AutoRegister: true, Comment: chat.Comment{
		Forge: chat.ForgeGitHub, DeliveryID: "d-1", Repository: "acme/widget", CloneURL: "https://github.com/acme/widget.git",
		HTMLURL: "https://github.com/acme/widget", PR: 7, CommentID: 11, Question: "Why this lock?", Thread: "10", Installation: 5,
		HeadSHA: "h1", BaseSHA: "b1", Author: chat.Author{Login: "reviewer"},
		Focus: &chat.Focus{Kind: chat.FocusSection, Anchors: []chat.Anchor{{Path: "a/b.go", StartLine: 3, EndLine: 5}}},
	}}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("delivery (-want +got):\n%s", diff)
	}

	for _, c := range []struct {
		name string
		h    http.Header
		code chat.Code
	}{
		{"unsigned", headers("pull_request_review_comment", ""), chat.CodeUnauthorized},
		{"another secret", headers("pull_request_review_comment", sign("other", body)), chat.CodeUnauthorized},
		{"another body", headers("pull_request_review_comment", sign("new", append(body, ' '))), chat.CodeUnauthorized},
		{"no delivery id", func() http.Header {
			h := headers("pull_request_review_comment", sign("new", body))
			h.Del("X-GitHub-Delivery")
			return h
		}(), chat.CodeInvalid},
	} {
		if _, err := read(c.h, body); chat.ErrorCode(err) != c.code {
			t.Errorf("%s: %v, want code %s", c.name, err, c.code)
		}
	}
	if _, err := github.NewWebhook(forge.WebhookConfig{}).Read(t.Context(), headers("ping", ""), nil); chat.ErrorCode(err) != chat.CodeUnavailable {
		t.Errorf("without a secret: %v, want unavailable", err)
	}
	// The body's own error (too large) is returned as it is.
	tooLarge := errors.New("too large")
	if _, err := w.Read(t.Context(), headers("ping", ""), func() ([]byte, error) { return nil, tooLarge }); !errors.Is(err, tooLarge) {
		t.Errorf("body error: %v", err)
	}

	ping := []byte(`{"zen":"hi"}`)
	if d, err := read(headers("ping", sign("new", ping)), ping); err != nil || !d.Ping {
		t.Errorf("ping: %+v %v", d, err)
	}
	if d, err := read(headers("push", sign("new", ping)), ping); err != nil || d.Event != "other" || d.Ignored == "" {
		t.Errorf("push: %+v %v", d, err)
	}
	own := []byte(`{"action":"created","comment":{"id":12,"body":"/ask Why?","user":{"login":"PRCHAT-BOT","type":"User"}},
 "pull_request":{"number":7},"repository":{"full_name":"acme/widget"},"sender":{"login":"PRCHAT-BOT","type":"User"}}`)
	if d, err := read(headers("pull_request_review_comment", sign("new", own)), own); err != nil || d.Ignored != "comments by prchat's own account are ignored" {
		t.Errorf("own comment: %+v %v", d, err)
	}
}

func TestLineLink(t *testing.T) {
	t.Parallel()
	var c *github.Client
	got := c.LineLink("https://github.com/o/r/", "abc", "dir/a b.go", 3, 9)
	if want := "https://github.com/o/r/blob/abc/dir/a%20b.go#L3-L9"; got != want {
		t.Errorf("LineLink = %q, want %q", got, want)
	}
}

// TestWebhookReadMissingObjects: a signed event that lacks the issue, the
// pull request or the comment it is about is invalid, not a crash.
func TestWebhookReadMissingObjects(t *testing.T) {
	t.Parallel()
	w := github.NewWebhook(forge.WebhookConfig{Secrets: []string{"s"}})
	for _, c := range []struct{ event, body string }{
		{"issue_comment", `{"action":"created","comment":{"id":3,"body":"/ask Why?"},"repository":{"full_name":"acme/widget"},"sender":{"login":"r"}}`},
		{"issue_comment", `{"action":"created","issue":{"number":7,"pull_request":{"url":"u"}},"repository":{"full_name":"acme/widget"}}`},
		{"pull_request_review_comment", `{"action":"created","comment":{"id":3,"body":"/ask Why?"},"repository":{"full_name":"acme/widget"}}`},
		{"pull_request_review_comment", `{"action":"created","pull_request":{"number":7},"repository":{"full_name":"acme/widget"}}`},
	} {
		body := []byte(c.body)
		_, err := w.Read(t.Context(), headers(c.event, sign("s", body)), func() ([]byte, error) { return body, nil })
		if chat.ErrorCode(err) != chat.CodeInvalid {
			t.Errorf("%s %s: %v, want invalid", c.event, c.body, err)
		}
	}
}

// fixture reads testdata/<file>, an event as GitHub delivers it, with the
// comment's fields in set changed (nil deletes one).
func fixture(t *testing.T, file string, set map[string]any) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var e map[string]any
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	c := e["comment"].(map[string]any)
	for k, v := range set {
		c[k] = v
		if v == nil {
			delete(c, k)
		}
	}
	out, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWebhookReadFixtures: GitHub's events as it delivers them become
// questions: a timeline comment, and review comments focused on their
// lines, on the base side for a comment on the diff's left (side LEFT).
func TestWebhookReadFixtures(t *testing.T) {
	t.Parallel()
	w := github.NewWebhook(forge.WebhookConfig{Secrets: []string{"s"}})
	const head, base = "c0ffee0000000000000000000000000000000001", "ba5e000000000000000000000000000000000001"
	author := chat.Author{Login: "reviewer", ID: 21031067, Association: "COLLABORATOR"}
	review := func(thread string, a ...chat.Anchor) chat.Comment {
		c := chat.Comment{Forge: chat.ForgeGitHub, DeliveryID: "d-1", Repository: "acme/widget", CloneURL: "https://github.com/acme/widget.git",
			HTMLURL: "https://github.com/acme/widget", PR: 7, CommentID: 1865220002, Question: "Why this check?", Thread: thread,
			Installation: 5, HeadSHA: head, BaseSHA: base, Author: author}
		if len(a) > 0 {
			c.Focus = &chat.Focus{Kind: chat.FocusSection, Anchors: a}
		}
		return c
	}
	const rc = "pull_request_review_comment_created.json"
	for _, c := range []struct {
		name, event, file string
		set               map[string]any
		want              chat.Comment
	}{
		{"timeline comment", "issue_comment", "issue_comment_created.json", nil, chat.Comment{
			Forge: chat.ForgeGitHub, DeliveryID: "d-1", Repository: "acme/widget", CloneURL: "https://github.com/acme/widget.git",
			HTMLURL: "https://github.com/acme/widget", PR: 7, CommentID: 1796330001, Question: "Why does Load return errEmptyPath?",
			Installation: 5, Author: chat.Author{Login: "reviewer", ID: 21031067, Association: "OWNER"}}},
		{"lines of the head", "pull_request_review_comment", rc, nil,
			review("1865220002", chat.Anchor{Path: "settings/settings.go", StartLine: 8, EndLine: 12})},
		{"a line of the base", "pull_request_review_comment", rc,
			map[string]any{"start_line": nil, "original_start_line": nil, "start_side": nil, "line": 3, "original_line": 3, "side": "LEFT"},
			review("1865220002", chat.Anchor{Path: "settings/settings.go", StartLine: 3, EndLine: 3, Side: chat.SideBase})},
		{"lines of the base", "pull_request_review_comment", rc,
			map[string]any{"start_line": 2, "start_side": "LEFT", "line": 3, "side": "LEFT"},
			review("1865220002", chat.Anchor{Path: "settings/settings.go", StartLine: 2, EndLine: 3, Side: chat.SideBase})},
		{"an outdated line of the base", "pull_request_review_comment", rc,
			map[string]any{"start_line": nil, "start_side": nil, "line": nil, "original_start_line": nil, "original_line": 3, "side": "LEFT"},
			review("1865220002", chat.Anchor{Path: "settings/settings.go", StartLine: 3, EndLine: 3, Side: chat.SideBase})},
		{"from the base to the head", "pull_request_review_comment", rc,
			map[string]any{"start_line": 3, "start_side": "LEFT", "line": 5, "side": "RIGHT"},
			review("1865220002", chat.Anchor{Path: "settings/settings.go", StartLine: 5, EndLine: 5})},
		{"a reply", "pull_request_review_comment", rc, map[string]any{"in_reply_to_id": 1865220001},
			review("1865220001", chat.Anchor{Path: "settings/settings.go", StartLine: 8, EndLine: 12})},
		{"a file", "pull_request_review_comment", rc,
			map[string]any{"subject_type": "file", "start_line": nil, "original_start_line": nil, "start_side": nil, "line": nil, "original_line": nil, "side": nil},
			review("1865220002", chat.Anchor{Path: "settings/settings.go"})},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			body := fixture(t, c.file, c.set)
			d, err := w.Read(t.Context(), headers(c.event, sign("s", body)), func() ([]byte, error) { return body, nil })
			if err != nil {
				t.Fatal(err)
			}
			want := chat.Delivery{Event: c.event, Comment: c.want}
			if diff := cmp.Diff(want, d); diff != "" {
				t.Errorf("delivery (-want +got):\n%s", diff)
			}
		})
	}
}
