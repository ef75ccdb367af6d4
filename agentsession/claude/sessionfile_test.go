package claude_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/agentsession/claude"
	"github.com/prchat/prchat/agentsession/claude/claudetest"
	"github.com/prchat/prchat/agentsession/fakeapi/anthropic"
	"github.com/prchat/prchat/chat"
)

// host is one machine's Claude Code: a configuration directory of its own
// and a backend using it, against a shared fake API.
func host(t *testing.T, api *anthropic.Server) (claude.Config, *claude.Backend) {
	t.Helper()
	cfg := claudetest.Config(t, api)
	b, err := claude.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, b
}

// TestSessionTravels makes a review session on a "laptop" (a directory and
// configuration directory of its own, deleted afterwards), restores its
// file on a worker that never saw it and forks it there, then restores the
// fork's file on a second worker, in another run directory, and resumes it:
// each time the model gets the whole history, with the paths of the
// review's reads mapped to the run directory.
func TestSessionTravels(t *testing.T) {
	t.Parallel()
	api := anthropic.New(t)
	w := newWorkspace(t, nil)

	// The laptop.
	laptopCfg, laptop := host(t, api)
	laptopDir := w.prepare(t, "laptop")
	const reviewPrompt, finding = "Review pull request 7 (REVIEW-PROMPT-7e1).", "FINDING-3a9: parseConfig does not bound max_retries."
	api.Push(
		anthropic.ToolUse("Read", map[string]any{"file_path": filepath.Join(laptopDir, "config/config.go")}),
		anthropic.Text(finding),
	)
	reviewID := claudetest.Bare(t, laptopCfg, laptopDir, "--", reviewPrompt)
	data, err := laptop.ReadSessionFile(t.Context(), chat.SessionRef{ID: reviewID, Dir: laptopDir})
	if err != nil {
		t.Fatal(err)
	}
	info, err := laptop.CheckSessionFile(data, reviewID)
	if err != nil {
		t.Fatalf("CheckSessionFile(the review's file) = %v", err)
	}
	if real, _ := filepath.EvalSymlinks(laptopDir); info.Cwd != real || info.Parent != "" {
		t.Errorf("the review's file says cwd %q, parent %q; want %q, none", info.Cwd, info.Parent, real)
	}
	review := chat.SessionFile{Backend: chat.BackendClaudeCode, SessionID: reviewID, Cwd: info.Cwd, Data: data}
	if err := os.RemoveAll(laptop.ConfigDir()); err != nil {
		t.Fatal(err)
	}
	if err := w.ws.Remove(t.Context(), laptopDir); err != nil {
		t.Fatal(err)
	}

	// Worker 1 restores it into a run directory of its own and forks it.
	_, w1 := host(t, api)
	dir1 := w.prepare(t, "conversation-on-w1")
	ref := chat.SessionRef{ID: reviewID, Dir: dir1}
	if err := w1.HasSession(t.Context(), ref); err == nil {
		t.Fatal("worker 1 has the review's session before the restore")
	}
	if err := w1.RestoreSession(t.Context(), dir1, []chat.SessionFile{review}); err != nil {
		t.Fatal(err)
	}
	if err := w1.HasSession(t.Context(), ref); err != nil {
		t.Fatalf("HasSession after the restore = %v", err)
	}
	seen := len(api.Messages())
	api.Handle(readThenAnswer(dir1, "config/config.go", theAnswer()))
	const q1 = "Q1-c40: why did you flag parseConfig?"
	fork, _ := run(t, w1, request(dir1, chat.SessionForked, ref, q1))
	if fork.SessionID == "" || fork.SessionID == reviewID {
		t.Fatalf("the fork ran in session %q", fork.SessionID)
	}
	first := api.Messages()[seen]
	if diff := cmp.Diff([]string{reviewPrompt, q1}, first.Prompts()); diff != "" {
		t.Errorf("prompts of the fork's first request (-want +got):\n%s", diff)
	}
	if !first.Contains(finding) || !first.Contains("package config") {
		t.Errorf("the fork's first request lacks the review's finding or the file it read:\n%s", first.Body)
	}
	if first.Contains(laptopDir) || !first.Contains(filepath.Join(dir1, "config/config.go")) {
		t.Errorf("the review's read is not mapped to the run directory %s:\n%s", dir1, first.Body)
	}

	// Its file, as worker 1 stores it after the turn.
	forkData, err := w1.ReadSessionFile(t.Context(), chat.SessionRef{ID: fork.SessionID, Dir: dir1})
	if err != nil {
		t.Fatal(err)
	}
	forkInfo, err := w1.CheckSessionFile(forkData, fork.SessionID)
	if err != nil {
		t.Fatalf("CheckSessionFile(the fork's file) = %v", err)
	}

	// Worker 2, in another run directory, restores it and resumes.
	_, w2 := host(t, api)
	dir2 := w.prepare(t, "conversation-on-w2")
	forkFile := chat.SessionFile{Backend: chat.BackendClaudeCode, SessionID: fork.SessionID, Cwd: forkInfo.Cwd, Data: forkData}
	if err := w2.RestoreSession(t.Context(), dir2, []chat.SessionFile{forkFile}); err != nil {
		t.Fatal(err)
	}
	seen = len(api.Messages())
	const q2 = "Q2-51d: and how would you bound it?"
	resumed, _ := run(t, w2, request(dir2, chat.SessionResumed, chat.SessionRef{ID: fork.SessionID, Dir: dir2}, q2))
	if resumed.SessionID != fork.SessionID {
		t.Errorf("the resume ran in session %q, want %s", resumed.SessionID, fork.SessionID)
	}
	next := api.Messages()[seen]
	if diff := cmp.Diff([]string{reviewPrompt, q1, q2}, next.Prompts()); diff != "" {
		t.Errorf("prompts of the resume's first request (-want +got):\n%s", diff)
	}
	if !next.Contains(finding) || !next.Contains(theAnswer().AnswerMarkdown) {
		t.Error("the resume's history lacks the review's finding or turn 1's answer")
	}
	if next.Contains(dir1) {
		t.Errorf("the resumed history still names worker 1's run directory %s", dir1)
	}
}

// TestCheckSessionFile refuses what is not a session file of the id.
func TestCheckSessionFile(t *testing.T) {
	t.Parallel()
	b, err := claude.New(claude.Config{ConfigDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	const id = "5b0c53c4-3f52-4f5e-9a55-0d8d3c1f6f11"
	good := `{"type":"summary","summary":"x"}
{"type":"user","sessionId":"` + id + `","cwd":"/home/me/src","message":{"role":"user","content":"hi"}}
{"type":"assistant","sessionId":"` + id + `","cwd":"/home/me/src","message":{"role":"assistant","content":"hello"}}
`
	info, err := b.CheckSessionFile([]byte(good), id)
	if err != nil || info.Cwd != "/home/me/src" {
		t.Fatalf("CheckSessionFile(good) = %+v, %v", info, err)
	}
	for name, tc := range map[string]struct{ data, id, want string }{
		"truncated":   {good[:len(good)-20], id, "line 3 is not a JSON object"},
		"garbage":     {"\x00\x01 not json\n", id, "line 1 is not a JSON object"},
		"empty":       {"", id, "is empty"},
		"other id":    {good, "0d6a1f3e-2b49-4c6f-8c0a-0e7e3b7a9c22", "holds session"},
		"not an id":   {good, "review-1", "not a Claude Code session id"},
		"codex file":  {`{"timestamp":"2026-01-02T03:04:05Z","type":"session_meta","payload":{"id":"` + id + `","cwd":"/x"}}` + "\n", id, "no line names a session"},
		"json array":  {"[1,2]\n", id, "not a JSON object"},
		"other lines": {`{"type":"user","sessionId":"` + id + `"}` + "\n" + `{"sessionId":"0d6a1f3e-2b49-4c6f-8c0a-0e7e3b7a9c22"}` + "\n", id, "line 2"},
	} {
		_, err := b.CheckSessionFile([]byte(tc.data), tc.id)
		if chat.ErrorCode(err) != chat.CodeInvalid || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: CheckSessionFile = %v, want invalid saying %q", name, err, tc.want)
		}
	}
}
