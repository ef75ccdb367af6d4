package codex_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/codex"
	"github.com/prchat/prchat/agentsession/fakeapi/responses"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
)

// TestAPIErrors checks that the model API's errors fail the call with
// backend_error and a short message that names the API's.
func TestAPIErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		reply responses.Reply
		want  string
	}{
		{"bad request", responses.Reply{Status: http.StatusBadRequest, Message: "Invalid schema for response_format"}, "Invalid schema for response_format"},
		{"server error", responses.Reply{Status: http.StatusInternalServerError, Message: "boom"}, "high demand"},
		{"failed response", responses.Reply{Failed: "the model broke down"}, "the model broke down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			e.api.Push(tc.reply)
			_, _, err := e.call(t.Context(), request(e.runDir(), chat.SessionSeeded, ""))
			if r := chat.FailureReason(err, ""); r != chat.ReasonBackendError {
				t.Fatalf("Run = %v (reason %q), want a backend_error", err, r)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, `{"error"`) || len(msg) > 400 {
				t.Errorf("error = %q, want a short message with %q", msg, tc.want)
			}
		})
	}
}

// TestHangingAPIMeetsTheDeadline checks that a call whose model API hangs
// returns soon after its deadline and leaves no process behind.
func TestHangingAPIMeetsTheDeadline(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.api.Push(responses.Reply{Hang: true})
	// The deadline passes once the request hangs, however long the CLI
	// took to start.
	ctx, expire := chattest.Expiring(t)
	done := make(chan error, 1)
	go func() {
		_, _, err := e.call(ctx, request(e.runDir(), chat.SessionSeeded, ""))
		done <- err
	}()
	chattest.EventuallyWithin(t, agentsessiontest.CLIStart, "the CLI's request to reach the API and hang", func() bool { return len(e.api.Requests()) > 0 || len(done) > 0 })
	expire()
	err := chattest.Receive(t, "Run to return after its deadline", done)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run past its deadline = %v, want an error wrapping context.DeadlineExceeded", err)
	}
	if n := len(e.api.Requests()); n != 1 {
		t.Fatalf("the API received %d requests, want the 1 that hangs", n)
	}
	checkNothingLeft(t, "CODEX_HOME="+e.cfg.Home)
}

// TestCancelKillsCommands checks that a call cancelled while a command the
// model started runs returns promptly and leaves neither the CLI nor the
// command behind (the CLI runs commands in sessions of their own).
func TestCancelKillsCommands(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const marker = "sleep 31.4159"
	// The CLI waits for the command before it calls the API again.
	e.api.Push(responses.Reply{Calls: []responses.Call{responses.Shell(marker)}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, _, err := e.call(ctx, request(e.runDir(), chat.SessionSeeded, ""))
		done <- err
	}()
	chattest.EventuallyWithin(t, agentsessiontest.CLIStart, "the model's command to run", func() bool { return len(processes(t, marker)) > 0 || len(done) > 0 })
	if len(processes(t, marker)) == 0 {
		t.Fatalf("the command never ran (Run: %v)", <-done)
	}
	cancel()
	err := chattest.Receive(t, "Run to return once cancelled", done)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Run = %v, want an error wrapping context.Canceled", err)
	}
	checkNothingLeft(t, "CODEX_HOME="+e.cfg.Home, marker)
}

// checkNothingLeft fails the test if a process whose command line or
// environment holds one of needles is still there after a moment.
func checkNothingLeft(t *testing.T, needles ...string) {
	t.Helper()
	var left []string
	defer func() {
		if len(left) > 0 {
			t.Logf("processes left after the call ended: %v", left)
		}
	}()
	chattest.Eventually(t, "the call's processes to end", func() bool {
		left = nil
		for _, n := range needles {
			left = append(left, processes(t, n)...)
		}
		return len(left) == 0
	})
}

// processes returns the pids and command lines of the processes whose
// command line or environment contains needle.
func processes(t *testing.T, needle string) []string {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil || len(dirs) == 0 {
		t.Skip("no /proc to look for processes in")
	}
	var out []string
	for _, d := range dirs {
		cmdline, _ := os.ReadFile(filepath.Join(d, "cmdline"))
		environ, _ := os.ReadFile(filepath.Join(d, "environ"))
		if len(cmdline) == 0 { // a zombie or a kernel thread
			continue
		}
		if strings.Contains(string(cmdline), needle) || strings.Contains(string(environ), needle) {
			out = append(out, filepath.Base(d)+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return out
}

// TestWritesAreRefused checks that a new session runs read-only: neither a
// shell write nor apply_patch creates a file.
func TestWritesAreRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	dir := e.runDir()
	e.api.Push(
		responses.Reply{Calls: []responses.Call{
			responses.Shell("echo x > shell-write.txt"),
			responses.ApplyPatch(responses.AddFilePatch("patch-write.txt", "x")),
		}},
		responses.Reply{Text: answer("I could not write.")},
	)
	res, _ := e.run(request(dir, chat.SessionSeeded, ""))
	checkAnswer(t, e, res)
	for _, name := range []string{"shell-write.txt", "patch-write.txt"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was written (stat: %v)", name, err)
		}
	}
	outs := e.last().ToolOutputs()
	if len(outs) != 2 {
		t.Fatalf("tool outputs = %v, want the shell's and apply_patch's", outs)
	}
	for id, out := range outs {
		if !strings.Contains(out, "Read-only file system") && !strings.Contains(out, "read-only sandbox") {
			t.Errorf("tool call %s was not refused by the sandbox: %q", id, out)
		}
	}
}

// TestRepairThroughResume checks the repair of an answer that breaks the
// schema: chat resumes the call's session with what was wrong, and the
// model sees its bad answer.
func TestRepairThroughResume(t *testing.T) {
	t.Parallel()
	e := setup(t)
	dir := e.runDir()
	e.api.Push(responses.Reply{Text: `{"answer_markdown": ""}`})
	first, _ := e.run(request(dir, chat.SessionSeeded, ""))
	_, problem := chat.ParseAnswer(first.Structured, first.Text)
	if problem == nil {
		t.Fatalf("the bad answer %q passed the schema", first.Text)
	}

	e.api.Push(responses.Reply{Text: answer("Fixed.")})
	req := request(dir, chat.SessionResumed, first.SessionID)
	req.Prompt = chat.RepairPrompt(problem)
	second, _ := e.run(req)
	checkAnswer(t, e, second)
	if second.SessionID != first.SessionID {
		t.Errorf("the repair ran in session %q, want %q", second.SessionID, first.SessionID)
	}
	last := e.last()
	if !last.Contains(`{"answer_markdown": ""}`) || !strings.Contains(last.LastUserText(), "Your answer could not be used") {
		t.Errorf("the repair request lacks the bad answer or the problem:\n%v", last.Texts(""))
	}
	if m := last.Metadata; m.HistoryInitialization != "cold_resume" || m.ThreadID != first.SessionID {
		t.Errorf("repair metadata = %+v", m)
	}
}

// TestConcurrentResumesAreSerialised checks that two calls resuming one
// session at once both succeed: the CLI refuses a second writer, so the
// backend runs them one after the other.
func TestConcurrentResumesAreSerialised(t *testing.T) {
	t.Parallel()
	e := setup(t)
	dir := e.runDir()
	e.api.Push(responses.Reply{Text: answer("one")})
	first, _ := e.run(request(dir, chat.SessionSeeded, ""))

	// Each resume's request is answered only after a moment, so that the
	// two would overlap if the backend let them.
	e.api.Handle(func(responses.Request) responses.Reply {
		return responses.Reply{Text: answer("again"), Delay: 300 * time.Millisecond}
	})
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			_, _, errs[i] = e.call(t.Context(), request(dir, chat.SessionResumed, first.SessionID))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("resume %d: %v", i, err)
		}
	}
	if n := len(e.api.Requests()); n != 3 {
		t.Errorf("the API received %d requests, want 3", n)
	}
}

// TestMissingBinary checks that a CLI that is not installed makes the
// backend unavailable.
func TestMissingBinary(t *testing.T) {
	t.Parallel()
	b, err := codex.New(codex.Config{Bin: filepath.Join(t.TempDir(), "codex"), Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if b.Name() != chat.BackendCodex {
		t.Errorf("Name() = %q", b.Name())
	}
	if err := b.Available(t.Context()); err == nil {
		t.Error("Available() = nil for a missing binary")
	}
	_, err = b.Run(t.Context(), request(t.TempDir(), chat.SessionSeeded, ""), nil)
	if r := chat.FailureReason(err, ""); r != chat.ReasonBackendUnavailable {
		t.Errorf("Run = %v (reason %q), want backend_unavailable", err, r)
	}
}
