package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/prchat/prchat/chat"
)

const (
	reviewSession = "5b0c53c4-3f52-4f5e-9a55-0d8d3c1f6f11"
	otherSession  = "0d6a1f3e-2b49-4c6f-8c0a-0e7e3b7a9c22"
)

// claudeSessionFile is a Claude Code session file of session id.
func claudeSessionFile(id, text string) string {
	return `{"type":"user","sessionId":"` + id + `","cwd":"/laptop/widget","message":{"role":"user","content":"Review PR 7"}}
{"type":"assistant","sessionId":"` + id + `","cwd":"/laptop/widget","message":{"role":"assistant","content":"` + text + `"}}
`
}

// putSession uploads data as the session file of review version v and
// returns the response.
func (f *fixture) putSession(v int, data any, contentType string) response {
	f.t.Helper()
	return f.c.send(f.t, "PUT", fmt.Sprintf("/api/v1/repos/%s/pulls/7/reviews/%d/session", repoName, v), data, "Content-Type", contentType)
}

// storedSession returns the digest of the session file stored for review
// version v ("" for none).
func (f *fixture) storedSession(v int) string {
	f.t.Helper()
	rev, err := f.store.Review(f.t.Context(), repoName, 7, v)
	if err != nil {
		f.t.Fatal(err)
	}
	sf, err := f.store.SessionFile(f.t.Context(), chat.SessionOwner{ReviewID: rev.ID})
	if chat.ErrorCode(err) == chat.CodeNotFound {
		return ""
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return sf.Digest
}

func wantError(t *testing.T, r response, status int, code, says string) {
	t.Helper()
	if r.status != status || !bytes.Contains(r.body, []byte(`"code":"`+code+`"`)) || !bytes.Contains(r.body, []byte(says)) {
		t.Errorf("status %d %s, want %d %s saying %q", r.status, r.body, status, code, says)
	}
}

func TestUploadReviewSession(t *testing.T) {
	t.Parallel()
	f := setup(t, func(o *options) { o.api.MaxSessionBytes = 4096 })
	v := f.review(chat.BackendClaudeCode, map[string]any{"session_id": reviewSession, "session_cwd": "/laptop/widget"})
	before := f.do("GET", fmt.Sprintf("/api/v1/repos/%s/pulls/7/reviews/%d", repoName, v), nil, http.StatusOK, nil)
	if !bytes.Contains(before, []byte(`"session_cwd":"/laptop/widget"`)) || !bytes.Contains(before, []byte(`"run_dir":"/laptop/widget"`)) {
		t.Errorf("the review does not show its session_cwd (and run_dir): %s", before)
	}

	codexFile := `{"timestamp":"2026-01-02T03:04:05Z","type":"session_meta","payload":{"id":"` + reviewSession + `","cwd":"/laptop/widget"}}` + "\n"
	good := claudeSessionFile(reviewSession, "FINDING-1")
	for _, tc := range []struct {
		name, body, contentType string
		status                  int
		code, says              string
	}{
		{"garbage", "\x00\x01garbage\n", "application/x-ndjson", 400, "invalid", "not JSON lines"},
		{"truncated", good[:len(good)-15], "application/x-ndjson", 400, "invalid", "truncated"},
		{"the other backend's file", codexFile, "application/x-ndjson", 400, "invalid", "no line names a session"},
		{"another session id", claudeSessionFile(otherSession, "x"), "application/x-ndjson", 400, "invalid", "holds session"},
		{"empty", "", "application/x-ndjson", 400, "invalid", "empty"},
		{"over the limit", good + strings.Repeat(`{"type":"summary","summary":"padding"}`+"\n", 200), "application/x-ndjson", 413, "invalid", "larger than 4096 bytes"},
		{"not ndjson", good, "application/json", 415, "invalid", "application/x-ndjson"},
	} {
		wantError(t, f.putSession(v, tc.body, tc.contentType), tc.status, tc.code, tc.says)
		if d := f.storedSession(v); d != "" {
			t.Fatalf("%s: a session file was stored", tc.name)
		}
	}

	if r := f.putSession(v, good, "application/x-ndjson"); r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("upload: %d %s", r.status, r.body)
	}
	first := f.storedSession(v)
	if first == "" {
		t.Fatal("nothing stored")
	}
	// Replacing is allowed until the first conversation; a refused one
	// keeps the stored file.
	if r := f.putSession(v, claudeSessionFile(reviewSession, "FINDING-2"), "application/x-ndjson; charset=utf-8"); r.status != http.StatusNoContent {
		t.Fatalf("replace: %d %s", r.status, r.body)
	}
	second := f.storedSession(v)
	if second == first {
		t.Fatal("the replacement was not stored")
	}
	wantError(t, f.putSession(v, claudeSessionFile(otherSession, "x"), "application/x-ndjson"), 400, "invalid", "holds session")
	if f.storedSession(v) != second {
		t.Error("a refused upload changed the stored file")
	}
	f.ask(v, "Why does Load refuse an empty path?")
	wantError(t, f.putSession(v, good, "application/x-ndjson"), 409, "conflict", "already has conversations")
	if f.storedSession(v) != second {
		t.Error("a refused upload changed the stored file")
	}
	after := f.do("GET", fmt.Sprintf("/api/v1/repos/%s/pulls/7/reviews/%d", repoName, v), nil, http.StatusOK, nil)
	if !bytes.Equal(before, after) {
		t.Errorf("the review changed:\n%s\n%s", before, after)
	}
	// No route returns the file.
	if r := f.c.send(t, "GET", fmt.Sprintf("/api/v1/repos/%s/pulls/7/reviews/%d/session", repoName, v), nil); r.status == http.StatusOK || bytes.Contains(r.body, []byte("FINDING")) {
		t.Errorf("GET of the upload route: %d %s", r.status, r.body)
	}
	for _, path := range []string{
		fmt.Sprintf("/api/v1/repos/%s/pulls/7/reviews/%d", repoName, v),
		fmt.Sprintf("/api/v1/repos/%s/pulls/7/reviews", repoName),
	} {
		if body := f.do("GET", path, nil, http.StatusOK, nil); bytes.Contains(body, []byte("FINDING")) {
			t.Errorf("GET %s returns the session file: %s", path, body)
		}
	}
}

// TestUploadCodexReviewSession: a Codex review's upload is checked as a
// rollout: a Claude Code file, a truncated rollout, another thread's and a
// fork's are refused, nothing stored, the review unchanged.
func TestUploadCodexReviewSession(t *testing.T) {
	t.Parallel()
	f := setup(t)
	v := f.review(chat.BackendCodex, map[string]any{"session_id": reviewSession, "session_cwd": "/laptop/widget"})
	path := fmt.Sprintf("/api/v1/repos/%s/pulls/7/reviews/%d", repoName, v)
	before := f.do("GET", path, nil, http.StatusOK, nil)
	rollout := func(id, extra string) string {
		return `{"timestamp":"2026-01-02T03:04:05Z","type":"session_meta","payload":{"id":"` + id + `","cwd":"/laptop/widget"` + extra + `}}` + "\n" +
			`{"timestamp":"2026-01-02T03:04:06Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"FINDING"}]}}` + "\n"
	}
	good := rollout(reviewSession, "")
	for _, tc := range []struct{ name, body, says string }{
		{"a Claude Code file", claudeSessionFile(reviewSession, "FINDING"), "not a Codex session"},
		{"truncated", good[:40], "truncated or damaged"},
		{"another thread's", rollout(otherSession, ""), "holds session"},
		{"a fork", rollout(reviewSession, `,"forked_from_id":"`+otherSession+`"`), "is a fork of session"},
	} {
		wantError(t, f.putSession(v, tc.body, "application/x-ndjson"), 400, "invalid", tc.says)
		if f.storedSession(v) != "" {
			t.Fatalf("%s: a session file was stored", tc.name)
		}
	}
	if after := f.do("GET", path, nil, http.StatusOK, nil); !bytes.Equal(before, after) {
		t.Errorf("the review changed:\n%s\n%s", before, after)
	}
	if r := f.putSession(v, good, "application/x-ndjson"); r.status != http.StatusNoContent || f.storedSession(v) == "" {
		t.Fatalf("upload of the rollout: %d %s", r.status, r.body)
	}
}

func TestUploadSessionOfReviewWithoutOne(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tc := range []struct {
		backend string
		extra   map[string]any
		says    string
	}{
		{chat.BackendLocal, nil, `backend \"local\" keeps no session file`},
		{"", nil, `backend \"\" keeps no session file`},
		{chat.BackendClaudeCode, nil, "names no session_id"},
	} {
		v := f.review(tc.backend, tc.extra)
		wantError(t, f.putSession(v, claudeSessionFile(reviewSession, "x"), "application/x-ndjson"), 422, "unsupported_backend", tc.says)
		if f.storedSession(v) != "" {
			t.Errorf("%q: a session file was stored", tc.backend)
		}
	}
	wantError(t, f.putSession(99, claudeSessionFile(reviewSession, "x"), "application/x-ndjson"), 404, "no_review", "")
}
