package chat

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestPublicNote: a failure's note keeps a domain error's message alone
// and leaves the server's paths out of other errors, URLs untouched.
func TestPublicNote(t *testing.T) {
	t.Parallel()
	gitErr := errors.New("git -c core.hooksPath=/dev/null -C /srv/prchat/local/acme/w.git worktree add --detach /srv/prchat/runs/x abc: exit status 128: fatal: bad object")
	cases := []struct {
		err        error
		want       string
		mustNotSay []string
	}{
		{fmt.Errorf("prepare: %w", &Error{Code: CodeNeedsClone, Message: "commit abc is not in the clone of acme/w", Err: gitErr}), "commit abc is not in the clone of acme/w", []string{"/srv", "git -c"}},
		{Fail(ReasonBackendError, &Error{Code: CodeInternal, Message: "the run directory could not be prepared", Err: gitErr}), "the run directory could not be prepared", []string{"/srv"}},
		{Fail(ReasonBackendUnavailable, errors.New(`backend claude-code: exec: "/opt/claude/bin/claude": file not found`)), `backend claude-code: exec: "[path]": file not found`, nil},
		{Fail(ReasonBackendError, errors.New("POST https://api.openai.com/v1/chat/completions: 429")), "backend_error: POST https://api.openai.com/v1/chat/completions: 429", nil},
		{Fail(ReasonTimeout, errors.New("the turn took longer than 10m0s")), "timeout: the turn took longer than 10m0s", nil},
	}
	for _, c := range cases {
		got := publicNote(c.err)
		if !strings.Contains(got, c.want) {
			t.Errorf("publicNote(%v) = %q, want %q in it", c.err, got, c.want)
		}
		for _, bad := range c.mustNotSay {
			if strings.Contains(got, bad) {
				t.Errorf("publicNote(%v) = %q shows %q", c.err, got, bad)
			}
		}
	}
}
