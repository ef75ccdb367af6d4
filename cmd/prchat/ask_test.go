package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat"
)

// askCLI runs `prchat ask` against e's daemon.
func (e *env) askCLI(args ...string) (code int, stdout, stderr string) {
	e.t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(k string) string {
		if k == "PRCHAT_SERVER" {
			return e.url
		}
		return ""
	}
	code = Main(context.Background(), append([]string{"ask"}, args...), getenv, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestAskCommand(t *testing.T) {
	t.Parallel()
	e := setup(t, mode{name: "embedded"}, nil)
	e.review("scripted", nil)
	release := make(chan struct{})
	close(release)
	step := liveStep(release)
	step.Answer = &chat.Answer{
		AnswerMarkdown: "## Why\n\nLoad **refuses** an empty path:\n\n- it returns `errEmptyPath`\n",
		Citations:      []chat.Citation{{Path: "settings/settings.go", StartLine: 8, EndLine: 12}, {Path: "main.go", StartLine: 3, EndLine: 5}},
	}
	e.scripted.Push(step)

	code, out, errOut := e.askCLI("--repo", e.repo, "--pr", "7", "Why does Load refuse?")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"Why\n", "Load refuses an empty path:", "• it returns errEmptyPath", "settings/settings.go:8-12", "main.go:3-5"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "Read settings/settings.go") || !strings.Contains(errOut, "Read: read 13 lines") {
		t.Errorf("the tool steps were not shown:\n%s", errOut)
	}
	conv := strings.TrimSuffix(strings.Fields(strings.SplitN(errOut, "\n", 2)[0])[1], ",")

	// --json prints the final turn; continuing the conversation.
	e.scripted.Push(scripted.Step{Answer: goodAnswer("again")})
	code, out, errOut = e.askCLI("--conversation", conv, "--json", "And again?")
	var turn chat.Turn
	if code != 0 || json.Unmarshal([]byte(out), &turn) != nil || turn.Number != 2 || turn.State != chat.StateSucceeded {
		t.Fatalf("--json: exit %d, %s %s", code, out, errOut)
	}

	// A failing turn: exit status 1 and the reason.
	e.scripted.Push(scripted.Step{Err: errors.New("upstream broke")})
	code, out, errOut = e.askCLI("--conversation", conv, "--no-stream", "Third?")
	if code != 1 || !strings.Contains(errOut, "backend_error") || !strings.Contains(out, "The turn failed (backend_error)") {
		t.Fatalf("failing turn: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	// Usage mistakes: exit status 2.
	if code, _, _ := e.askCLI("--repo", e.repo, "no pr given"); code != 2 {
		t.Errorf("missing --pr: exit %d, want 2", code)
	}
	// Server errors are shown with their code.
	code, _, errOut = e.askCLI("--repo", "acme/nope", "--pr", "1", "q")
	if code != 1 || !strings.Contains(errOut, "repository_not_found") {
		t.Errorf("unknown repository: exit %d, %s", code, errOut)
	}
}

func TestReviewRecordCommand(t *testing.T) {
	t.Parallel()
	e := setup(t, mode{name: "embedded"}, nil)
	md := filepath.Join(t.TempDir(), "review.md")
	if err := os.WriteFile(md, []byte("# Review\n\nLoad refuses empty paths."), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	getenv := func(k string) string {
		switch k {
		case "PRCHAT_SERVER":
			return e.url
		case "PRCHAT_WORKER_ID":
			return "host-a"
		}
		return ""
	}
	code := Main(context.Background(), []string{"review", "record", "--repo", e.repo, "--pr", "7", "--backend", "claude-code",
		"--session-id", "0b7c6a3e-7a8f-4c1e-9a3e-2f1d5c9b8a71", "--run-dir", e.repoDir, "--markdown-file", md, "--base", e.base}, getenv, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var r chat.Review
	e.do("GET", "/api/v1/repos/"+e.repo+"/pulls/7/reviews/latest", nil, http.StatusOK, &r)
	want := chat.Review{Repository: e.repo, PR: 7, Version: 1, HeadSHA: e.head, BaseSHA: e.base, Backend: "claude-code",
		SessionID: "0b7c6a3e-7a8f-4c1e-9a3e-2f1d5c9b8a71", RunDir: e.repoDir, Markdown: "# Review\n\nLoad refuses empty paths."}
	r.CreatedAt, r.Sections = time.Time{}, nil
	// The session host is no longer this host's worker id by default: the
	// session's file travels with the review instead (none is found here).
	if diff := cmp.Diff(want, r); diff != "" {
		t.Fatalf("recorded review (-want +got):\n%s", diff)
	}
	if !strings.Contains(errOut.String(), "no claude-code session file of 0b7c6a3e-7a8f-4c1e-9a3e-2f1d5c9b8a71 found") {
		t.Errorf("stderr = %q, want a warning that no session file was found", errOut.String())
	}
	if !strings.Contains(out.String(), "recorded review version 1") {
		t.Errorf("stdout = %q", out.String())
	}
	if code := Main(context.Background(), []string{"review", "record", "--repo", e.repo}, getenv, &out, &errOut); code != 2 {
		t.Errorf("missing flags: exit %d, want 2", code)
	}
}

// TestAskShowsANoteOnce: the note of a seeded turn, sent as an event when
// the turn starts and again when it ends, and kept with the turn, is shown
// once: live on stderr while streaming, else with the answer.
func TestAskShowsANoteOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, mode{name: "embedded"}, nil)
	gone := e.reviewSession()
	e.scripted.Forget(gone)
	e.review("scripted", map[string]any{"session_id": gone})
	const note = "Started without the review's own context: the review's session is gone"

	e.scripted.Push(scripted.Step{Answer: goodAnswer("seeded")})
	code, out, errOut := e.askCLI("--repo", e.repo, "--pr", "7", "Why?")
	if code != 0 || strings.Count(out+errOut, note) != 1 || !strings.Contains(errOut, "note: "+note) {
		t.Errorf("streamed: exit %d, the note %d times; want it once, on stderr\nstdout:\n%s\nstderr:\n%s", code, strings.Count(out+errOut, note), out, errOut)
	}

	e.scripted.Push(scripted.Step{Answer: goodAnswer("seeded")})
	code, out, errOut = e.askCLI("--repo", e.repo, "--pr", "7", "--no-stream", "Why?")
	if code != 0 || strings.Count(out+errOut, note) != 1 || !strings.Contains(out, note) {
		t.Errorf("long-polled: exit %d, the note %d times; want it once, on stdout\nstdout:\n%s\nstderr:\n%s", code, strings.Count(out+errOut, note), out, errOut)
	}
}
