package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prchat/prchat/agentsession/claude"
	"github.com/prchat/prchat/agentsession/codex"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/cmd/internal/cliflag"
)

const reviewUsage = `Usage: prchat review record [flags]

Records a review version from an agent session you ran yourself (for
reviews written outside prchat: a laptop, a CI job), so that questions
about the PR fork that session, on any worker. The head SHA defaults to
the run directory's HEAD.

The session's file is uploaded with the review (it is kept in prchat's
database, so the machine that ran the review may go away): --session-file
names it; given --session-id alone, a claude-code or codex session's file
is looked up in the CLI's own state directory (CLAUDE_CONFIG_DIR or
~/.claude, CODEX_HOME or ~/.codex). --session-host is only needed for a
session whose file is not uploaded and stays on a worker host.

Flags:
`

// Review is `prchat review record`: it records a review version from an
// agent session run outside prchat and uploads the session's file. Asked
// for help it prints it to stdout and returns flag.ErrHelp; a mistake in
// the command line is a UsageError.
func Review(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prchat review record", flag.ContinueOnError)
	server := fs.String("server", cmp.Or(getenv("PRCHAT_SERVER"), "http://127.0.0.1:8080"), "prchat server URL (PRCHAT_SERVER)")
	repo := fs.String("repo", "", "repository owner/name (required)")
	pr := fs.Int("pr", 0, "pull request number (required)")
	head := fs.String("head", "", "head commit SHA (default: HEAD of --run-dir)")
	base := fs.String("base", "", "base commit SHA")
	backend := fs.String("backend", "", "agent that wrote the review: claude-code, codex, openai, local")
	model := fs.String("model", "", "model of the review")
	session := fs.String("session-id", "", "the agent session id of the review")
	host := fs.String("session-host", "", "worker id of a host that holds the session's files (none: the uploaded file is used)")
	sessionFile := fs.String("session-file", "", "the review's agent session file to upload (default: found from --session-id)")
	runDir := fs.String("run-dir", "", "directory the review's session ran in")
	markdown := fs.String("markdown-file", "", "the review as a markdown file (required)")
	sections := fs.String("sections-file", "", "optional JSON array of review sections with anchors")
	fs.Usage = func() { fmt.Fprint(fs.Output(), reviewUsage); cliflag.Print(fs.Output(), fs) }
	switch {
	case len(args) > 0 && slices.Contains([]string{"help", "-h", "-help", "--help"}, args[0]):
		return cliflag.Parse(fs, []string{"--help"}, stdout)
	case len(args) == 0 || args[0] != "record":
		return cliflag.UsageError{Msg: "the only review subcommand is record"}
	}
	if err := cliflag.Parse(fs, args[1:], stdout); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return cliflag.Usagef("unexpected argument %q", fs.Arg(0))
	case *repo == "" || *pr < 1 || *markdown == "":
		return cliflag.UsageError{Msg: "--repo, --pr and --markdown-file are required"}
	}
	serverURL, err := ServerURL(*server)
	if err != nil {
		return cliflag.UsageError{Msg: err.Error()}
	}
	md, err := os.ReadFile(*markdown)
	if err != nil {
		return fmt.Errorf("read the review: %w", err)
	}
	body := map[string]any{
		"head_sha": *head, "base_sha": *base, "backend": *backend, "model": *model,
		"session_id": *session, "markdown": string(md),
	}
	if *host != "" {
		body["session_host"] = *host
	}
	upload := *sessionFile
	if upload == "" && *session != "" {
		upload = findSessionFile(*backend, *session, getenv)
		if upload == "" && (*backend == chat.BackendClaudeCode || *backend == chat.BackendCodex) {
			fmt.Fprintf(stderr, "prchat: no %s session file of %s found on this machine; give --session-file, or questions start without the review's context\n", *backend, *session)
		}
	}
	var data []byte
	if upload != "" {
		if *session == "" {
			return cliflag.UsageError{Msg: "--session-file needs --session-id"}
		}
		if data, err = os.ReadFile(upload); err != nil {
			return fmt.Errorf("read the session file: %w", err)
		}
		// Checked as the server will check it, before anything is
		// recorded: a bad file records no review.
		if err := checkSessionFile(*backend, *session, data); err != nil {
			return fmt.Errorf("the session file %s: %w; nothing was recorded", upload, err)
		}
	}
	if *runDir != "" {
		abs, err := filepath.Abs(*runDir)
		if err != nil {
			return err
		}
		body["session_cwd"] = abs
		if *head == "" {
			out, err := exec.CommandContext(ctx, "git", "-C", abs, "rev-parse", "HEAD").Output()
			if err != nil {
				return fmt.Errorf("find the head commit of %s (give --head): %w", abs, err)
			}
			body["head_sha"] = strings.TrimSpace(string(out))
		}
	}
	if *sections != "" {
		raw, err := os.ReadFile(*sections)
		if err != nil {
			return fmt.Errorf("read the sections: %w", err)
		}
		var s []chat.Section
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("the sections file is not a JSON array of sections: %w", err)
		}
		body["sections"] = s
	}
	c := New(serverURL, getenv("PRCHAT_TOKEN"))
	var r chat.Review
	if err := c.Do(ctx, "POST", fmt.Sprintf("/api/v1/repos/%s/pulls/%d/reviews", *repo, *pr), body, &r); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "recorded review version %d of %s#%d (head %s)\n", r.Version, r.Repository, r.PR, r.HeadSHA)
	if data == nil {
		return nil
	}
	path := fmt.Sprintf("/api/v1/repos/%s/pulls/%d/reviews/%d/session", *repo, *pr, r.Version)
	if err := c.Put(ctx, path, "application/x-ndjson", bytes.NewReader(data)); err != nil {
		return fmt.Errorf("review version %d was recorded, but its session file was not stored, so questions start without the review's context (upload it again with PUT %s before the first question): %w", r.Version, path, err)
	}
	fmt.Fprintf(stdout, "uploaded its %s session %s (%d bytes)\n", *backend, *session, len(data))
	return nil
}

// checkSessionFile checks that data is a session file of backend that
// holds session id and is not a fork, as the server does with an upload.
// A backend whose sessions are no files takes none.
func checkSessionFile(backend, id string, data []byte) error {
	var info chat.SessionFileInfo
	var err error
	switch backend {
	case chat.BackendClaudeCode:
		info, err = claude.CheckSessionFile(data, id)
	case chat.BackendCodex:
		info, err = codex.CheckSessionFile(data, id)
	default:
		return fmt.Errorf("backend %q keeps no session file (only %s and %s do)", backend, chat.BackendClaudeCode, chat.BackendCodex)
	}
	if err == nil && info.Parent != "" {
		err = fmt.Errorf("the session is a fork of session %s, whose file it needs too; upload a session that is not a fork", info.Parent)
	}
	return err
}

// findSessionFile returns the file of session id in the state directory
// of backend's CLI on this machine, or "" when there is none: Claude
// Code's <config>/projects/*/<id>.jsonl (CLAUDE_CONFIG_DIR, else
// ~/.claude), Codex's $CODEX_HOME/sessions/YYYY/MM/DD/rollout-*-<id>.jsonl
// (else ~/.codex).
func findSessionFile(backend, id string, getenv func(string) string) string {
	if id == "" || strings.ContainsAny(id, `/\*?[`) {
		return ""
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	var pattern string
	switch backend {
	case chat.BackendClaudeCode:
		dir := cmp.Or(getenv("CLAUDE_CONFIG_DIR"), filepath.Join(home, ".claude"))
		pattern = filepath.Join(dir, "projects", "*", id+".jsonl")
	case chat.BackendCodex:
		dir := cmp.Or(getenv("CODEX_HOME"), filepath.Join(home, ".codex"))
		pattern = filepath.Join(dir, "sessions", "*", "*", "*", "rollout-*-"+strings.ToLower(id)+".jsonl")
	default:
		return ""
	}
	matches, _ := filepath.Glob(pattern)
	if len(matches) == 0 {
		return ""
	}
	return matches[0]
}
