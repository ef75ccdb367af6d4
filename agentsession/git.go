package agentsession

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

// Git runs git commands for prchat. Every command runs under a context
// (killed with its process group when the context ends), never prompts for
// credentials (GIT_TERMINAL_PROMPT=0), reads stdin from the null device, runs
// no hooks of the repository, and speaks the C locale. Its environment is
// CommonEnv and GitEnv of the worker's, nothing else: no PRCHAT_* variable
// and no cloud credentials reach git or what it runs.
type Git struct {
	// Path is the git binary; empty means "git" from PATH.
	Path string
	// Secrets are the daemon's configured secret values: a variable that
	// holds one is not passed to git, whatever its name.
	Secrets []string
	// Env is added to each command's environment (credentials of a fetch
	// as GIT_CONFIG_* entries, which git never prints).
	Env []string
}

// GitError is a git command that failed: its arguments, its exit code (-1
// when it did not run or was killed) and the end of what it printed on
// standard error. Credentials in URLs (https://user:token@host) are
// replaced by *** in both.
type GitError struct {
	Args     []string
	ExitCode int
	Stderr   string
	Err      error
}

// Error says which git command failed, how, and what git said.
func (e *GitError) Error() string {
	msg := fmt.Sprintf("git %s: %v", strings.Join(e.Args, " "), e.Err)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

// Unwrap returns the cause: the exec error, or the context's error.
func (e *GitError) Unwrap() error { return e.Err }

// maxStderr is how much of a failed command's standard error GitError keeps.
const maxStderr = 2000

// Output runs git with args in dir (git -C dir; "" for the current
// directory) and returns its standard output. A failure is a *GitError; when
// ctx ended, the error wraps ctx.Err().
func (g Git) Output(ctx context.Context, dir string, args ...string) ([]byte, error) {
	var stdout bytes.Buffer
	if err := g.run(ctx, dir, nil, &stdout, args...); err != nil {
		return nil, err
	}
	return stdout.Bytes(), nil
}

// Cmd returns a git command with prchat's settings (see Git) for callers
// that stream its input or output. Run it with Start and Wait.
func (g Git) Cmd(ctx context.Context, dir string, args ...string) *exec.Cmd {
	full := make([]string, 0, len(args)+6)
	full = append(full, "-c", "core.hooksPath="+os.DevNull, "-c", "core.fsmonitor=false")
	if dir != "" {
		full = append(full, "-C", dir)
	}
	full = append(full, args...)
	cmd := Command(ctx, g.bin(), full...)
	cmd.Env, _ = EnvPolicy{Allow: GitEnv(), Secrets: g.Secrets}.Env(os.Environ(), append([]string{
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=",
		"SSH_ASKPASS=",
		"LC_ALL=C",
		"GIT_OPTIONAL_LOCKS=0",
		// Large files stay pointers: a checkout never downloads them.
		"GIT_LFS_SKIP_SMUDGE=1",
	}, g.Env...)...)
	return cmd
}

func (g Git) run(ctx context.Context, dir string, stdin io.Reader, stdout io.Writer, args ...string) error {
	cmd := g.Cmd(ctx, dir, args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var stderr bytes.Buffer
	cmd.Stdout = stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil {
		return nil
	}
	gerr := &GitError{Args: redactArgs(args), ExitCode: -1, Stderr: redact(tail(stderr.String(), maxStderr)), Err: err}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		gerr.ExitCode = exit.ExitCode()
	}
	if ctx.Err() != nil {
		gerr.Err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return gerr
}

func (g Git) bin() string { return cmp.Or(g.Path, "git") }

// tail returns the last max bytes of s, trimmed of surrounding space.
func tail(s string, max int) string {
	s = strings.TrimSpace(s)
	if len(s) > max {
		s = "..." + s[len(s)-max:]
	}
	return s
}

// userinfo is the credentials part of a URL.
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@`)

// redact replaces the credentials of URLs in s by ***.
func redact(s string) string { return userinfo.ReplaceAllString(s, "${1}***@") }

func redactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = redact(a)
	}
	return out
}
