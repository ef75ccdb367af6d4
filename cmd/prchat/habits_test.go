package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"golang.org/x/sys/unix"
)

// singleDash finds a flag line of a help text written with one dash.
var singleDash = regexp.MustCompile(`(?m)^\s+-[a-z]`)

// TestTokenCommandHabits: `prchat token` prints each subcommand's help to
// stdout with double-dash flags and exits 0; a mistake exits 2 with one
// line on stderr and creates nothing.
func TestTokenCommandHabits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := map[string]string{"PRCHAT_DATA_DIR": dir}
	for _, args := range [][]string{{"token", "--help"}, {"token", "create", "--help"}, {"token", "list", "--help"}, {"token", "revoke", "-h"}} {
		code, out, errOut := run(t, env, args...)
		if code != 0 || !strings.HasPrefix(out, "Usage:") || errOut != "" {
			t.Errorf("prchat %s: exit %d, stdout %.40q, stderr %q; want 0 and the usage on stdout", strings.Join(args, " "), code, out, errOut)
		}
		if singleDash.MatchString(out) {
			t.Errorf("prchat %s: single-dash flags in the help:\n%s", strings.Join(args, " "), out)
		}
	}
	if _, out, _ := run(t, env, "token", "create", "--help"); !strings.Contains(out, "--scope") || !strings.Contains(out, "--repo owner/name") || !strings.Contains(out, "PRCHAT_TOKEN") {
		t.Errorf("token create --help lacks its flags or how clients send a token:\n%s", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"token"}, "prchat token: a token subcommand is required: create, list or revoke"},
		{[]string{"token", "make"}, `prchat token: unknown token subcommand "make"`},
		{[]string{"token", "create", "--nme", "x"}, "prchat token: flag provided but not defined: -nme"},
		{[]string{"token", "create", "--name", "x"}, "prchat token: --name and --scope are required"},
		{[]string{"token", "create", "--name", "x", "--scope", "root"}, `prchat token: --scope must be read, ask or admin, not "root"`},
		{[]string{"token", "create", "--name", "x", "--scope", "read", "--repo", "no-slash"}, "prchat token: "},
		{[]string{"token", "revoke"}, "prchat token: give the id of the token to revoke"},
		{[]string{"token", "list", "extra"}, `prchat token: unexpected argument "extra"`},
	} {
		code, out, errOut := run(t, env, tc.args...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("prchat %s: exit %d, stdout %q, stderr %q; want 2 and one line %q", strings.Join(tc.args, " "), code, out, errOut, tc.want)
		}
	}
	if _, list, _ := run(t, env, "token", "list"); strings.Count(list, "\n") != 1 {
		t.Errorf("a refused create made a token:\n%s", list)
	}
}

// TestHelpFlagsHaveTwoDashes: every command's help spells its flags as
// the README does, with two dashes.
func TestHelpFlagsHaveTwoDashes(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"serve", "--help"}, {"migrate", "--help"}, {"ask", "--help"}, {"review", "record", "--help"}, {"token", "create", "--help"}} {
		_, out, _ := run(t, nil, args...)
		if !strings.Contains(out, "  --") || singleDash.MatchString(out) {
			t.Errorf("prchat %s: flags not all double-dash:\n%s", strings.Join(args, " "), out)
		}
	}
}

// TestAskClientMessages: ask's help names PRCHAT_TOKEN; a server URL
// without its scheme is a usage mistake that names the URL meant; a
// stopped server and a missing or unknown token each get a sentence that
// says what to do.
func TestAskClientMessages(t *testing.T) {
	t.Parallel()
	if _, out, _ := run(t, nil, "ask", "--help"); !strings.Contains(out, "PRCHAT_TOKEN") || !strings.Contains(out, "NO_COLOR") {
		t.Errorf("ask --help does not name PRCHAT_TOKEN and NO_COLOR:\n%s", out)
	}
	for _, cmd := range [][]string{{"ask", "--repo", "a/b", "--pr", "1", "q"}, {"review", "record", "--repo", "a/b", "--pr", "1", "--markdown-file", "x.md"}} {
		code, out, errOut := run(t, map[string]string{"PRCHAT_SERVER": "127.0.0.1:8080"}, cmd...)
		if code != 2 || out != "" || !strings.Contains(errOut, "http://127.0.0.1:8080") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("prchat %s with PRCHAT_SERVER=127.0.0.1:8080: exit %d, stderr %q; want 2 and one line naming http://127.0.0.1:8080", cmd[0], code, errOut)
		}
	}

	// Nothing listens on a port just closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stopped := "http://" + ln.Addr().String()
	ln.Close()
	code, _, errOut := run(t, map[string]string{"PRCHAT_SERVER": stopped}, "ask", "--repo", "a/b", "--pr", "1", "q")
	if want := "is prchat serve running at " + stopped + "?"; code != 1 || !strings.Contains(errOut, want) || strings.Contains(errOut, "dial tcp") {
		t.Errorf("ask with no server: exit %d, stderr %q; want 1 and %q", code, errOut, want)
	}

	e := setup(t, mode{name: "embedded"}, nil)
	if code, _, errOut := tokenCLI(t, e.cfg, "create", "--name", "admin", "--scope", "admin"); code != 0 {
		t.Fatalf("token create: exit %d %s", code, errOut)
	}
	chattest.Eventually(t, "the token to be enforced", func() bool { return statusWith(t, e.url, "/api/v1/repos", "") == http.StatusUnauthorized })
	for token, want := range map[string]string{"": "set PRCHAT_TOKEN", "prc_unknown": "the token in PRCHAT_TOKEN is unknown or revoked"} {
		code, _, errOut := run(t, map[string]string{"PRCHAT_SERVER": e.url, "PRCHAT_TOKEN": token}, "ask", "--repo", e.repo, "--pr", "7", "q")
		if code != 1 || !strings.Contains(errOut, "unauthorized") || !strings.Contains(errOut, want) {
			t.Errorf("ask with token %q: exit %d, stderr %q; want 1 and %q", token, code, errOut, want)
		}
	}
}

// pty opens a pseudo-terminal and returns its terminal side; what is
// written to it is read off the other side into the returned buffer,
// complete once done is called.
func pty(t *testing.T) (tty *os.File, done func() string) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlock the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("name the pseudo-terminal: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open the pseudo-terminal: %v", err)
	}
	var buf bytes.Buffer
	read := make(chan struct{})
	go func() {
		// Reading ends with EIO once the terminal side is closed.
		_, _ = io.Copy(&buf, master)
		close(read)
	}()
	return tty, func() string {
		tty.Close()
		<-read
		return buf.String()
	}
}

// TestAskStylesFollowTheirOwnStream: the spinner is drawn only when stderr
// is a terminal, the answer styled only when stdout is one and NO_COLOR is
// unset: `ask >/dev/null 2>log` writes no escape codes into the log.
func TestAskStylesFollowTheirOwnStream(t *testing.T) {
	t.Parallel()
	e := setup(t, mode{name: "embedded"}, nil)
	e.review("scripted", nil)
	const esc = "\033["
	ask := func(stdout, stderr *os.File, noColor string) {
		t.Helper()
		release := make(chan struct{})
		close(release)
		step := liveStep(release)
		step.Answer = &chat.Answer{AnswerMarkdown: "Load **refuses** an empty path.", Citations: []chat.Citation{{Path: "settings/settings.go", StartLine: 8, EndLine: 12}}}
		e.scripted.Push(step)
		getenv := func(k string) string {
			switch k {
			case "PRCHAT_SERVER":
				return e.url
			case "NO_COLOR":
				return noColor
			}
			return ""
		}
		if code := Main(context.Background(), []string{"ask", "--repo", e.repo, "--pr", "7", "Why does Load refuse?"}, getenv, stdout, stderr); code != 0 {
			t.Fatalf("ask: exit %d", code)
		}
	}
	file := func() (*os.File, func() string) {
		f, err := os.CreateTemp(t.TempDir(), "out")
		if err != nil {
			t.Fatal(err)
		}
		return f, func() string {
			f.Close()
			raw, _ := os.ReadFile(f.Name())
			return string(raw)
		}
	}
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()

	// ask >/dev/null 2>log
	logf, logs := file()
	ask(devNull, logf, "")
	if got := logs(); strings.Contains(got, esc) || !strings.Contains(got, "· Read settings/settings.go") {
		t.Errorf("stderr to a file (stdout /dev/null) holds escape codes or lacks the steps: %q", got)
	}
	// stdout a terminal, stderr a file: styles in the answer only.
	tty, shown := pty(t)
	logf, logs = file()
	ask(tty, logf, "")
	if got := shown(); !strings.Contains(got, esc+"1m") {
		t.Errorf("the answer on a terminal is not styled: %q", got)
	}
	if got := logs(); strings.Contains(got, esc) {
		t.Errorf("stderr to a file holds escape codes: %q", got)
	}
	// NO_COLOR: no styles on the terminal either.
	tty, shown = pty(t)
	ask(tty, devNull, "1")
	if got := shown(); strings.Contains(got, esc) {
		t.Errorf("NO_COLOR=1 and the answer has escape codes: %q", got)
	}
	// stderr a terminal, stdout a file: the spinner on stderr, a plain answer.
	tty, shown = pty(t)
	outf, out := file()
	ask(outf, tty, "")
	if got := shown(); !strings.Contains(got, "\r"+esc+"K") {
		t.Errorf("stderr on a terminal shows no spinner line: %q", got)
	}
	if got := out(); strings.Contains(got, esc) || !strings.Contains(got, "Load refuses an empty path.") {
		t.Errorf("stdout to a file: %q", got)
	}
}

// TestVersion: `prchat version` and `--version` print the module version,
// the VCS revision and the Go version, on stdout, exit 0.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"version", "--version"} {
		code, out, errOut := run(t, nil, arg)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || errOut != "" || len(lines) != 3 || !strings.HasPrefix(lines[0], "prchat ") ||
			!strings.HasPrefix(lines[1], "revision ") || !strings.HasPrefix(lines[2], "go1.") {
			t.Errorf("prchat %s: exit %d, stdout %q, stderr %q", arg, code, out, errOut)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a daemon's log writes and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestOneDaemonPerDataDirectory: a second `prchat serve` on the data
// directory of a running one refuses to start, saying which process holds
// it; the first one's startup log names its data directory, dashboard and
// how to stop it. Once the first stops, the directory is free again.
func TestOneDaemonPerDataDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := func(listen string) func(string) string {
		return func(k string) string {
			return map[string]string{"PRCHAT_DATA_DIR": dir, "PRCHAT_LISTEN": listen}[k]
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var logs syncBuffer
	done := make(chan int)
	go func() { done <- Main(ctx, []string{"serve"}, env("127.0.0.1:0"), io.Discard, &logs) }()
	defer cancel()
	defer func() {
		if t.Failed() {
			t.Logf("serve's log:\n%s", logs.String())
		}
	}()
	chattest.Eventually(t, "serve to start", func() bool { return strings.Contains(logs.String(), "prchat started") })
	started := logs.String()
	for _, want := range []string{"data_dir=" + dir, "dashboard=http://127.0.0.1:", "stop=\"Ctrl+C or SIGTERM"} {
		if !strings.Contains(started, want) {
			t.Errorf("the startup log lacks %s:\n%s", want, started)
		}
	}

	code, _, errOut := run(t, map[string]string{"PRCHAT_DATA_DIR": dir, "PRCHAT_LISTEN": "127.0.0.1:0"}, "serve")
	want := fmt.Sprintf("another prchat daemon (pid %d) is using the data directory %s", os.Getpid(), dir)
	if code != 1 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "--data-dir") {
		t.Errorf("a second serve: exit %d, stderr %q; want 1 and %q", code, errOut, want)
	}
	cancel()
	if code := chattest.Receive(t, "the first serve to exit", done); code != 0 {
		t.Fatalf("the first serve exited %d:\n%s", code, logs.String())
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { done <- Main(ctx2, []string{"serve"}, env("127.0.0.1:0"), io.Discard, &logs) }()
	defer cancel2()
	chattest.Eventually(t, "serve to start again once the first stopped", func() bool { return strings.Count(logs.String(), "prchat started") >= 2 })
	cancel2()
	chattest.Receive(t, "the second serve to exit", done)
}
