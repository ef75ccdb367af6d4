// Package claude is prchat's claude-code agent backend (chat.BackendClaudeCode):
// it answers turns by running the Claude Code CLI in print mode.
//
// Each call runs
//
//	claude -p --output-format stream-json --verbose
//	       --tools Read,Grep,Glob --permission-mode dontAsk
//	       --setting-sources user --strict-mcp-config --disable-slash-commands
//	       --system-prompt-snapshot off
//	       [--session-id NEW | --resume ID | --resume ID --fork-session --session-id NEW]
//	       [--json-schema SCHEMA] [--max-turns N] [--model M] [--append-system-prompt S]
//	       -- PROMPT
//
// in the run directory, with stdin from the null device, in a process group
// of its own that is killed with the call's context. The agent is
// read-only: the tool list holds only Read, Grep and Glob, and dontAsk
// denies anything that would need a permission (such as reading outside
// the run directory). The checkout is untrusted, so its project settings
// (hooks, permissions) and MCP servers are not loaded, and slash commands
// are off. The system prompt is rendered afresh on each call (snapshot
// off), so prchat's instructions reach a forked or resumed session too: by
// default the CLI replays the system prompt recorded when the session
// started and ignores --append-system-prompt.
//
// The CLI's stream-json events become prchat's as they arrive: assistant
// text becomes text_delta, tool calls tool_start, their results tool_result
// with a short summary, and the final result a usage event. The answer is
// the result's structured_output (the --json-schema tool call); when the
// model never called that tool, the result's text is returned for chat's
// checks to reject, and chat repairs through a resume of the same session.
//
// Sessions are the CLI's own files, <config dir>/projects/<run dir with
// every character other than a letter or digit replaced by '-'>/<id>.jsonl,
// so a worker finds the sessions that the reviewing agent left on its host
// when it shares the agent's HOME or CLAUDE_CONFIG_DIR. Session ids are
// UUIDs; the backend picks the ids of new sessions and forks itself and
// checks that the CLI used them. Calls on one session are serialised
// within the process (a resume holds the session alone; forks only read
// it), since two CLIs resuming one session at once branch its file.
package claude

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/chat"
)

// Config configures the claude-code backend. The zero Config runs "claude"
// from PATH with the environment policy's share of the worker's
// environment (see ModelEnv).
type Config struct {
	// Bin is the Claude Code CLI binary, a path or a name looked up in
	// PATH; default "claude" (cmd/prchat sets it from PRCHAT_CLAUDE_BIN).
	Bin string
	// Env is the CLI's own settings (KEY=value), added to what the
	// environment policy takes from the worker's environment and replacing
	// variables of the same name: for example ANTHROPIC_BASE_URL or
	// ANTHROPIC_API_KEY. A PRCHAT_* name is refused.
	Env []string
	// ExtraEnv names variables of the worker's environment that the CLI
	// gets on purpose besides CommonEnv and ModelEnv (cmd/prchat sets it
	// from PRCHAT_AGENT_ENV), such as a cloud's credentials for Bedrock or
	// Vertex. A PRCHAT_* name is refused.
	ExtraEnv []string
	// Secrets are the daemon's configured secret values (API keys, tokens,
	// passwords): no variable holding one reaches the CLI, whatever its
	// name, and the CLI's messages are redacted of them.
	Secrets []string
	// ConfigDir, if set, is the CLI's configuration directory: it is passed
	// as CLAUDE_CONFIG_DIR and is where session files are looked for.
	// Default: CLAUDE_CONFIG_DIR from Env or the worker's environment, else
	// $HOME/.claude.
	ConfigDir string
	// Model is the model of a call whose request names none; default: the
	// CLI's own default.
	Model string
	// Logger receives what the backend does (modes, session ids, sizes,
	// durations; never prompts or answers); default: discard.
	Logger *slog.Logger
}

// Backend is the claude-code backend. It implements chat.Backend and is
// safe for concurrent use.
type Backend struct {
	bin       string
	env       []string // the CLI's whole environment
	configDir string
	model     string
	log       *slog.Logger
	secrets   []string // values of env variables that look secret
	locks     agentsession.SessionLocks
	now       func() time.Time
}

var _ chat.Backend = (*Backend)(nil)

// New returns the claude-code backend for cfg. It does not check that the
// binary exists: Available does, on each call.
func New(cfg Config) (*Backend, error) {
	if err := agentsession.CheckSettings(cfg.Env); err != nil {
		return nil, fmt.Errorf("claude-code backend: Config.Env: %w", err)
	}
	policy := agentsession.EnvPolicy{Allow: ModelEnv(), Extra: cfg.ExtraEnv, Secrets: cfg.Secrets}
	if err := policy.Validate(); err != nil {
		return nil, fmt.Errorf("claude-code backend: Config.ExtraEnv: %w", err)
	}
	log := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	set := slices.Clone(cfg.Env)
	if cfg.ConfigDir != "" {
		set = append(set, "CLAUDE_CONFIG_DIR="+cfg.ConfigDir)
	}
	env, withheld := policy.Env(os.Environ(), set...)
	if len(withheld) > 0 {
		log.Warn("claude-code: variables not passed to the CLI, their value holds one of the daemon's secrets",
			slog.Any("names", withheld))
	}
	configDir := cmp.Or(cfg.ConfigDir, lookupEnv(env, "CLAUDE_CONFIG_DIR"))
	if configDir == "" {
		home := lookupEnv(env, "HOME")
		if home == "" {
			var err error
			if home, err = os.UserHomeDir(); err != nil {
				return nil, fmt.Errorf("claude-code backend: find the CLI's configuration directory: %w", err)
			}
		}
		configDir = filepath.Join(home, ".claude")
	}
	if abs, err := filepath.Abs(configDir); err == nil {
		configDir = abs
	}
	return &Backend{
		bin:       cmp.Or(cfg.Bin, "claude"),
		env:       env,
		configDir: configDir,
		model:     cfg.Model,
		log:       log,
		secrets:   append(secretValues(env), nonEmpty(cfg.Secrets)...),
		now:       time.Now,
	}, nil
}

// ConfigDir returns the CLI configuration directory where the backend looks
// for session files.
func (b *Backend) ConfigDir() string { return b.configDir }

// Name returns chat.BackendClaudeCode.
func (b *Backend) Name() string { return chat.BackendClaudeCode }

// Available returns nil when the CLI binary is there and executable.
func (b *Backend) Available(context.Context) error {
	if _, err := exec.LookPath(b.bin); err != nil {
		return fmt.Errorf("claude-code: the Claude Code CLI %q is not installed here: %w", b.bin, err)
	}
	return nil
}

// HasSession returns nil when the session file of ref exists,
// <config dir>/projects/<project folder of ref.Dir>/<ref.ID>.jsonl, else an
// error wrapping chat.ErrSessionGone that says which file is missing. A
// ref without a run directory, or whose id is not a UUID, is gone too.
func (b *Backend) HasSession(_ context.Context, ref chat.SessionRef) error {
	switch {
	case ref.Dir == "":
		return fmt.Errorf("claude-code session %q: no run directory recorded: %w", ref.ID, chat.ErrSessionGone)
	case !validSessionID(ref.ID):
		return fmt.Errorf("claude-code session %q: not a session id (a UUID): %w", ref.ID, chat.ErrSessionGone)
	}
	files := sessionFiles(b.configDir, ref.Dir, ref.ID)
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
			return nil
		}
	}
	return fmt.Errorf("claude-code session %s: session file %s is missing: %w", ref.ID, files[0], chat.ErrSessionGone)
}

// Run runs one call of the CLI for req and reports its events through emit
// while it runs. See the package documentation for the command line.
//
// Failures: a missing binary is chat.ReasonBackendUnavailable; the
// --max-turns limit (req.MaxCalls) chat.ReasonBudgetExceeded; an API error
// or any other failure of the CLI chat.ReasonBackendError with a short
// message; a session to resume or fork that does not exist an error
// wrapping chat.ErrSessionGone. When ctx ends, the CLI's process group is
// killed and Run returns an error wrapping ctx.Err(). The result carries
// the session id and usage also when the call failed after it started.
func (b *Backend) Run(ctx context.Context, req chat.RunRequest, emit func(chat.Event)) (chat.RunResult, error) {
	if emit == nil {
		emit = func(chat.Event) {}
	}
	c, err := b.prepare(req)
	if err != nil {
		return chat.RunResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return chat.RunResult{}, fmt.Errorf("%s: %w", c, err)
	}
	if err := b.Available(ctx); err != nil {
		return chat.RunResult{}, chat.Fail(chat.ReasonBackendUnavailable, err)
	}
	if c.parent != "" {
		if findSession(b.configDir, c.parent) == "" {
			err := b.HasSession(ctx, chat.SessionRef{ID: c.parent, Dir: cmp.Or(req.Session.Dir, req.Dir)})
			if err == nil {
				err = fmt.Errorf("no file %s.jsonl under %s: %w", c.parent, filepath.Join(b.configDir, "projects"), chat.ErrSessionGone)
			}
			return chat.RunResult{}, fmt.Errorf("%s: %w", c, err)
		}
		// A resume appends to the session's file and holds it alone;
		// forks only read it and may run together.
		lock := b.locks.RLock
		if c.mode == chat.SessionResumed {
			lock = b.locks.Lock
		}
		unlock, err := lock(ctx, c.parent)
		if err != nil {
			return chat.RunResult{}, fmt.Errorf("%s: %w", c, err)
		}
		defer unlock()
	}
	return b.run(ctx, c, emit)
}

// call is one prepared run of the CLI.
type call struct {
	mode    chat.SessionMode
	parent  string // the session resumed or forked
	session string // the session the call runs in (asked for)
	dir     string
	args    []string
}

func (c *call) String() string {
	switch c.mode {
	case chat.SessionResumed:
		return "claude-code: resume session " + c.parent
	case chat.SessionForked:
		return "claude-code: fork session " + c.parent
	}
	return "claude-code: start a session"
}

// prepare checks req and builds the CLI's command line.
func (b *Backend) prepare(req chat.RunRequest) (*call, error) {
	c := &call{mode: req.Mode, dir: req.Dir}
	args := []string{
		"-p", "--output-format", "stream-json", "--verbose",
		"--tools", "Read,Grep,Glob", "--permission-mode", "dontAsk",
		"--setting-sources", "user", "--strict-mcp-config", "--disable-slash-commands",
		"--system-prompt-snapshot", "off",
	}
	switch req.Mode {
	case chat.SessionResumed, chat.SessionForked:
		c.parent = req.Session.ID
		if !validSessionID(c.parent) {
			return nil, fmt.Errorf("%s: not a session id (a UUID): %w", c, chat.ErrSessionGone)
		}
		args = append(args, "--resume", c.parent)
		if req.Mode == chat.SessionForked {
			c.session = uuid.NewString()
			args = append(args, "--fork-session", "--session-id", c.session)
		} else {
			c.session = c.parent
		}
	case chat.SessionSeeded, chat.SessionNone, "":
		c.mode = chat.SessionSeeded
		c.session = uuid.NewString()
		args = append(args, "--session-id", c.session)
	default:
		return nil, fmt.Errorf("claude-code: unknown session mode %q", req.Mode)
	}
	if req.Dir == "" {
		return nil, chat.Fail(chat.ReasonBackendError, fmt.Errorf("%s: no run directory", c))
	}
	if fi, err := os.Stat(req.Dir); err != nil || !fi.IsDir() {
		return nil, chat.Fail(chat.ReasonBackendError, fmt.Errorf("%s: run directory %s is not there", c, req.Dir))
	}
	if len(req.Schema) > 0 {
		var schema bytes.Buffer
		if err := json.Compact(&schema, req.Schema); err != nil {
			return nil, fmt.Errorf("%s: answer schema: %w", c, err)
		}
		args = append(args, "--json-schema", schema.String())
	}
	if req.MaxCalls <= 0 {
		return nil, chat.Fail(chat.ReasonBudgetExceeded, fmt.Errorf("%s: no model calls are left in the turn's budget", c))
	}
	args = append(args, "--max-turns", strconv.Itoa(req.MaxCalls))
	if m := cmp.Or(req.Model, b.model); m != "" {
		args = append(args, "--model", m)
	}
	if req.System != "" {
		args = append(args, "--append-system-prompt", req.System)
	}
	c.args = append(args, "--", req.Prompt)
	return c, nil
}

// maxLine bounds one line of the CLI's output; a longer one (a huge tool
// result) is skipped.
const maxLine = 64 << 20

// run starts the CLI and follows its output until it exits.
func (b *Backend) run(ctx context.Context, c *call, emit func(chat.Event)) (chat.RunResult, error) {
	start := b.now()
	cmd := agentsession.Command(ctx, b.bin, c.args...)
	cmd.Dir = c.dir
	cmd.Env = b.env
	stdout, stdoutW := io.Pipe()
	stderr := &tail{max: 4096}
	cmd.Stdout, cmd.Stderr = stdoutW, stderr
	if err := cmd.Start(); err != nil {
		stdoutW.Close()
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return chat.RunResult{}, chat.Fail(chat.ReasonBackendUnavailable, fmt.Errorf("%s: start %s: %w", c, b.bin, err))
		}
		return chat.RunResult{}, chat.Fail(chat.ReasonBackendError, fmt.Errorf("%s: start %s: %w", c, b.bin, err))
	}
	waited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		stdoutW.Close()
		waited <- err
	}()

	t := &translator{dir: c.dir, emit: emit, now: b.now, tools: map[string]string{}}
	readLines(stdout, maxLine, t.handle)
	waitErr := <-waited

	res := b.result(c, t)
	took := b.now().Sub(start)
	attrs := []any{
		slog.String("mode", string(c.mode)), slog.String("session", res.SessionID),
		slog.Duration("took", took), slog.Int("turns", res.Usage.Calls),
		slog.Int64("input_tokens", res.Usage.InputTokens), slog.Int64("output_tokens", res.Usage.OutputTokens),
	}
	if err := ctx.Err(); err != nil {
		b.log.InfoContext(ctx, "claude-code run stopped", append(attrs, slog.Any("err", err))...)
		return res, fmt.Errorf("%s: %w", c, err)
	}
	err := b.failure(c, t, waitErr, stderr.String())
	if err == nil && t.initSession != c.session {
		err = chat.Fail(chat.ReasonBackendError, fmt.Errorf("%s: asked for session %s, the CLI ran session %q", c, c.session, t.initSession))
	}
	if err != nil {
		b.log.WarnContext(ctx, "claude-code run failed", append(attrs, slog.Any("err", err))...)
		return res, err
	}
	b.log.InfoContext(ctx, "claude-code run", append(attrs, slog.Bool("structured", len(res.Structured) > 0))...)
	return res, nil
}

// result builds the call's result from its events, and reports the usage.
func (b *Backend) result(c *call, t *translator) chat.RunResult {
	res := chat.RunResult{SessionID: t.initSession, Model: t.model, Text: t.lastText}
	r := t.result
	if r == nil {
		return res
	}
	res.SessionID = cmp.Or(r.SessionID, res.SessionID)
	if res.SessionID != "" && c.mode == chat.SessionForked && res.SessionID == c.parent {
		res.SessionID = "" // never report the parent as the fork
	}
	if r.Result != "" || len(r.StructuredOutput) > 0 {
		res.Text = r.Result
	}
	if so := bytes.TrimSpace(r.StructuredOutput); len(so) > 0 && !bytes.Equal(so, []byte("null")) {
		res.Structured = json.RawMessage(so)
	}
	u := chat.Usage{Calls: r.NumTurns, CostUSD: r.TotalCostUSD}
	if r.Usage != nil {
		// Cache writes and reads are input the model processed too; their
		// lower price is in the cost.
		u.InputTokens = r.Usage.InputTokens + r.Usage.CacheCreationInputTokens + r.Usage.CacheReadInputTokens
		u.OutputTokens = r.Usage.OutputTokens
	}
	if u.CostUSD == nil {
		u.CostReason = "the Claude Code CLI reported no cost"
	}
	res.Usage = u
	t.send(chat.Event{Type: chat.EventUsage, InputTokens: &u.InputTokens, OutputTokens: &u.OutputTokens, CostUSD: u.CostUSD})
	return res
}

// failure classifies how the CLI ended; nil when it succeeded.
func (b *Backend) failure(c *call, t *translator, waitErr error, stderr string) error {
	r := t.result
	gone := strings.Contains(stderr, "No conversation found")
	if r != nil {
		for _, e := range r.Errors {
			gone = gone || strings.Contains(e, "No conversation found")
		}
	}
	switch {
	case c.parent != "" && gone:
		return fmt.Errorf("%s: the CLI found no such session: %w", c, chat.ErrSessionGone)
	case r == nil:
		return chat.Fail(chat.ReasonBackendError, fmt.Errorf("%s: the CLI ended (%v) without a result: %s", c, exitStatus(waitErr), b.redact(lastLines(stderr, 3))))
	case r.Subtype == "error_max_turns":
		return chat.Fail(chat.ReasonBudgetExceeded, fmt.Errorf("%s: the agent used its %s model calls (--max-turns)", c, flagValue(c.args, "--max-turns")))
	case r.Subtype == "error_max_budget_usd":
		return chat.Fail(chat.ReasonBudgetExceeded, fmt.Errorf("%s: the agent reached its cost limit", c))
	case r.IsError || strings.HasPrefix(r.Subtype, "error") || waitErr != nil:
		msg := r.Result
		if msg == "" {
			msg = strings.Join(r.Errors, "; ")
		}
		if msg == "" {
			msg = lastLines(stderr, 3)
		}
		what := "the CLI failed"
		if r.TerminalReason == "api_error" || r.APIErrorStatus != nil {
			what = "the model API failed"
		}
		return chat.Fail(chat.ReasonBackendError, fmt.Errorf("%s: %s (%s, %v): %s", c, what, cmp.Or(r.TerminalReason, r.Subtype), exitStatus(waitErr), b.redact(clipMessage(msg))))
	}
	return nil
}

// exitStatus describes how the process ended.
func exitStatus(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "exit status 0"
	case errors.As(err, &ee) && ee.ProcessState != nil:
		return ee.ProcessState.String()
	}
	return err.Error()
}

// flagValue returns the value following flag in args.
func flagValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// clipMessage shortens a message from the CLI to its first line of at
// most 300 bytes.
func clipMessage(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = strings.ToValidUTF8(s[:300], "") + "…"
	}
	return s
}

// lastLines returns the last n non-blank lines of s, joined by " | ", at
// most 500 bytes.
func lastLines(s string, n int) string {
	var lines []string
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	lines = lines[max(0, len(lines)-n):]
	out := strings.Join(lines, " | ")
	if len(out) > 500 {
		out = "…" + strings.ToValidUTF8(out[len(out)-500:], "")
	}
	if out == "" {
		return "(no output on stderr)"
	}
	return out
}

// redact replaces the values of secret-looking environment variables in s.
func (b *Backend) redact(s string) string {
	for _, v := range b.secrets {
		s = strings.ReplaceAll(s, v, "[redacted]")
	}
	return s
}
