package agentsession_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/chat/chattest"
)

func TestGitError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := agentsession.Git{}.Output(t.Context(), dir, "clone", "--quiet", "--", "https://user:s3cret@127.0.0.1:1/x.git", dir+"/x")
	var gerr *agentsession.GitError
	if !errors.As(err, &gerr) {
		t.Fatalf("Output = %v, want a *GitError", err)
	}
	if gerr.ExitCode <= 0 {
		t.Errorf("exit code = %d, want > 0", gerr.ExitCode)
	}
	if msg := err.Error(); strings.Contains(msg, "s3cret") || !strings.Contains(msg, "git clone") || !strings.Contains(msg, "https://***@127.0.0.1:1/x.git") {
		t.Errorf("error = %q: want the command with the credentials masked", msg)
	}

	out, err := agentsession.Git{Path: "git"}.Output(t.Context(), "", "--version")
	if err != nil || !strings.HasPrefix(string(out), "git version") {
		t.Errorf("git --version = %q, %v", out, err)
	}
	if _, err := (agentsession.Git{Path: "/nonexistent/git"}).Output(t.Context(), "", "--version"); err == nil {
		t.Error("a missing git binary gave no error")
	}
}

func TestCommandKillsProcessGroup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The shell starts a grandchild that holds stdout open and reports its
	// pid.
	cmd := agentsession.Command(ctx, "sh", "-c", "sleep 60 & echo $!; wait")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, err := stdout.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("grandchild pid %q: %v", buf[:n], err)
	}
	t.Cleanup(func() {
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	cancel()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	if werr := chattest.Receive(t, "Wait to return after the cancel", waited); werr == nil {
		t.Error("Wait after cancel = nil error")
	}
	chattest.Eventually(t, fmt.Sprintf("grandchild %d to end with the cancel", pid), func() bool { return !alive(pid) })
}

// alive reports whether process pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil && !errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state ...
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
