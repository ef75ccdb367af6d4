package codex

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/chat"
)

// runMarker is the environment variable that marks a call's processes, so
// that a cancel finds them even after they were orphaned.
const runMarker = "AGENT_RUN_MARK"

// Run runs one agent call: a new session for chat.SessionSeeded and
// chat.SessionNone, `codex exec resume` of req.Session for
// chat.SessionResumed, `codex exec fork` of it for chat.SessionForked, in
// req.Dir under the read-only sandbox. It emits the CLI's commands as
// tool_start and tool_result, its messages as text_delta and the call's
// usage, and returns the last message as the result's Text.
//
// Errors: a missing CLI is a *chat.Failure with
// chat.ReasonBackendUnavailable; a session that is gone (no session file,
// not a uuid, or the CLI reporting another thread than asked for) wraps
// chat.ErrSessionGone; the model API's errors and other failures of the
// CLI are a *chat.Failure with chat.ReasonBackendError, and the result
// still carries the session id (if the CLI kept one) and the usage; when
// ctx ends, the CLI and every process it started are killed and the error
// wraps ctx.Err().
func (b *Backend) Run(ctx context.Context, req chat.RunRequest, emit func(chat.Event)) (chat.RunResult, error) {
	if emit == nil {
		emit = func(chat.Event) {}
	}
	verb, err := verbOf(req.Mode)
	if err != nil {
		return chat.RunResult{}, chat.Fail(chat.ReasonBackendError, err)
	}
	if err := ctx.Err(); err != nil {
		return chat.RunResult{}, fmt.Errorf("codex %s: %w", verb, err)
	}
	if err := b.Available(ctx); err != nil {
		return chat.RunResult{}, chat.Fail(chat.ReasonBackendUnavailable, err)
	}
	if req.Dir == "" {
		return chat.RunResult{}, chat.Fail(chat.ReasonBackendError, fmt.Errorf("codex %s: no run directory", verb))
	}
	if verb != "start" {
		if _, err := b.rollout(req.Session.ID); err != nil {
			return chat.RunResult{}, fmt.Errorf("codex %s: %w", verb, err)
		}
	}
	if verb != "start" {
		// One run at a time per lineage on this host: the CLI refuses a
		// second writer of a session, a fork or resume whose parent's
		// rollout is rewritten under it (a restore for another
		// conversation), and a fork while another process projects the
		// same parent ("thread history projection ... is behind durable
		// rollout").
		unlock, err := b.locks.Lock(ctx, b.lineageRoot(req.Session.ID))
		if err != nil {
			return chat.RunResult{}, fmt.Errorf("codex %s: %w", verb, err)
		}
		defer unlock()
	}

	schema, err := writeSchema(req.Schema)
	if err != nil {
		return chat.RunResult{}, chat.Fail(chat.ReasonBackendError, fmt.Errorf("codex %s: %w", verb, err))
	}
	if schema != "" {
		defer os.Remove(schema)
	}
	args, prompt, err := b.args(verb, req, schema)
	if err != nil {
		return chat.RunResult{}, chat.Fail(chat.ReasonBackendError, fmt.Errorf("codex %s: %w", verb, err))
	}

	pctx, kill := context.WithCancel(ctx)
	defer kill()
	n := b.runs.Add(1)
	p := &parser{
		verb:   verb,
		want:   strings.ToLower(req.Session.ID),
		prefix: fmt.Sprintf("codex%d.", n),
		emit:   emit,
		kill:   kill,
	}
	cmd := agentsession.Command(pctx, b.bin, args...)
	mark := uuid.NewString()
	killTree(cmd, mark)
	cmd.Dir = req.Dir
	cmd.Env = append(slices.Clip(b.env), runMarker+"="+mark)
	cmd.Stdin = strings.NewReader(prompt)
	stdout := &lineWriter{line: p.line}
	cmd.Stdout = stdout
	stderr := &tailBuffer{max: 32 << 10}
	cmd.Stderr = stderr

	start := time.Now()
	runErr := cmd.Run()
	stdout.Flush()
	took := time.Since(start)
	b.log.InfoContext(ctx, "codex call",
		slog.String("mode", string(req.Mode)),
		slog.String("session", req.Session.ID),
		slog.String("thread", p.thread),
		slog.Int("prompt_bytes", len(prompt)),
		slog.Int("commands", p.commands),
		slog.Duration("took", took),
		slog.String("exit", errString(runErr)))

	if err := ctx.Err(); err != nil {
		return chat.RunResult{}, fmt.Errorf("codex %s: %w", verb, err)
	}
	if p.mismatch != nil {
		return chat.RunResult{}, p.mismatch
	}
	if errors.Is(runErr, exec.ErrNotFound) || errors.Is(runErr, os.ErrNotExist) {
		return chat.RunResult{}, chat.Fail(chat.ReasonBackendUnavailable, fmt.Errorf("codex %s: %w", verb, runErr))
	}

	res := chat.RunResult{Text: p.text, Model: cmp.Or(req.Model, b.model)}
	if p.thread != "" {
		b.finishFromRollout(ctx, &res, p)
	}
	if res.Usage.InputTokens > 0 || res.Usage.OutputTokens > 0 {
		u := res.Usage
		emit(chat.Event{Type: chat.EventUsage, InputTokens: &u.InputTokens, OutputTokens: &u.OutputTokens, CostUSD: u.CostUSD, At: time.Now()})
	}

	if failure := p.failure(); failure != "" || runErr != nil || p.thread == "" {
		msg := cmp.Or(failure, stderrMessage(stderr.String()), errString(runErr), "the CLI started no session")
		err := fmt.Errorf("codex %s: %s", verb, msg)
		switch {
		case strings.Contains(msg, "no rollout found"), strings.Contains(msg, "missing source rollout"):
			return res, fmt.Errorf("%w: %w", err, chat.ErrSessionGone)
		case strings.Contains(msg, "active writer"):
			err = fmt.Errorf("codex %s: session %s is in use by another codex process: %s", verb, req.Session.ID, msg)
		}
		return res, chat.Fail(chat.ReasonBackendError, err)
	}
	return res, nil
}

// verbOf names the CLI's way to run a call of mode.
func verbOf(mode chat.SessionMode) (string, error) {
	switch mode {
	case chat.SessionSeeded, chat.SessionNone, "":
		return "start", nil
	case chat.SessionResumed:
		return "resume", nil
	case chat.SessionForked:
		return "fork", nil
	}
	return "", fmt.Errorf("codex: unknown session mode %q", mode)
}

// args returns the CLI's arguments for a call and the prompt to send on
// its stdin ("-" as the prompt argument).
func (b *Backend) args(verb string, req chat.RunRequest, schema string) ([]string, string, error) {
	args := []string{"exec"}
	prompt := req.Prompt
	if verb == "start" {
		args = append(args, "-C", req.Dir, "-s", "read-only")
		if req.System != "" {
			v, err := tomlString(req.System)
			if err != nil {
				return nil, "", err
			}
			args = append(args, "-c", "developer_instructions="+v)
		}
	} else {
		// resume and fork take neither -C (the working directory is the
		// run directory) nor -s.
		args = append(args, verb, "-c", `sandbox_mode="read-only"`)
		if verb == "fork" && req.System != "" {
			// A fork keeps its parent's developer instructions.
			prompt = req.System + "\n\n" + req.Prompt
		}
	}
	// No shell snapshot: the CLI would run the worker's shell profile in
	// a background shell outside the sandbox, which may outlive the call.
	args = append(args, "--json", "--skip-git-repo-check", "-c", `approval_policy="never"`, "--disable", "shell_snapshot")
	if schema != "" {
		args = append(args, "--output-schema", schema)
	}
	if m := cmp.Or(req.Model, b.model); m != "" {
		args = append(args, "-m", m)
	}
	args = append(args, b.extraArgs...)
	args = append(args, "--")
	if verb != "start" {
		args = append(args, strings.ToLower(req.Session.ID))
	}
	return append(args, "-"), prompt, nil
}

// tomlString quotes s as a TOML basic string: a JSON string is one, but
// for DEL, which TOML wants escaped and JSON does not.
func tomlString(s string) (string, error) {
	raw, err := marshal(s)
	if err != nil {
		return "", fmt.Errorf("quote the instructions: %w", err)
	}
	return strings.ReplaceAll(string(raw), "\x7f", `\u007f`), nil
}

// finishFromRollout reads the session file's record of the call's turn.
// It sets the result's session id if the CLI kept the session, its usage
// and model (from the CLI's turn.completed event if the file does not
// tell), and reports the tool calls that the CLI's events left out.
func (b *Backend) finishFromRollout(ctx context.Context, res *chat.RunResult, p *parser) {
	var rec turnRecord
	found := false
	path, err := b.findRollout(p.thread)
	if err == nil {
		res.SessionID = p.thread
		rec, found, err = readLastTurn(path)
	}
	if found {
		p.backfill(rec.Calls)
	}
	if err != nil || !found || (rec.Requests == 0 && p.usage != nil) {
		if p.usage == nil {
			return
		}
		b.log.WarnContext(ctx, "codex usage from turn.completed (a running total on resume and fork)",
			slog.String("thread", p.thread), slog.String("why", cmp.Or(errString(err), "the session file records no usage of the turn")))
		rec = turnRecord{Usage: *p.usage, Requests: 1, Model: rec.Model}
	}
	res.Model = cmp.Or(rec.Model, res.Model)
	res.Usage = b.usage(res.Model, rec.Usage, rec.Requests)
}

// stderrMessage picks the CLI's error from its stderr: the last "Error:"
// line, else the last line that is not a warning or a backtrace.
func stderrMessage(s string) string {
	lines := strings.Split(s, "\n")
	last := ""
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if msg, ok := strings.CutPrefix(l, "Error: "); ok {
			return shorten(msg)
		}
		if last == "" && l != "" && !strings.HasPrefix(l, "WARNING") && !strings.HasPrefix(l, "Stack backtrace") && !isBacktraceLine(l) {
			last = l
		}
	}
	return shorten(last)
}

func isBacktraceLine(l string) bool {
	num, rest, ok := strings.Cut(l, ":")
	return ok && strings.Trim(num, "0123456789") == "" && (strings.TrimSpace(rest) == "<unknown>" || strings.HasPrefix(strings.TrimSpace(rest), "at "))
}

// maxMessage bounds the error messages taken from the CLI.
const maxMessage = 300

// shorten returns the API error's message if s is a JSON error body, cut to
// maxMessage bytes.
func shorten(s string) string {
	s = strings.TrimSpace(s)
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
		Message string `json:"message"`
	}
	if strings.HasPrefix(s, "{") && json.Unmarshal([]byte(s), &body) == nil {
		s = cmp.Or(body.Error.Message, cmp.Or(body.Message, s))
	}
	return truncate(s, maxMessage)
}

// truncate cuts s to at most n bytes at a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// writeSchema writes the answer schema, as the model API's strict mode
// takes it, to a temporary file outside the run directory and returns its
// path ("" for no schema).
func writeSchema(schema json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return "", nil
	}
	strict, err := strictSchema(schema)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "prchat-codex-schema-*.json")
	if err != nil {
		return "", fmt.Errorf("write the output schema: %w", err)
	}
	_, err = f.Write(strict)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write the output schema: %w", err)
	}
	return f.Name(), nil
}

// unsupportedKeywords are JSON Schema keywords that OpenAI's strict
// structured outputs do not take. They are dropped from the schema the CLI
// sends; prchat checks answers against the full schema itself.
func unsupportedKeywords() []string { return []string{"minLength", "maxLength"} }

// strictSchema returns schema without the keywords strict structured
// outputs reject.
func strictSchema(schema json.RawMessage) (json.RawMessage, error) {
	var v any
	if err := json.Unmarshal(schema, &v); err != nil {
		return nil, fmt.Errorf("the answer schema is not JSON: %w", err)
	}
	drop := unsupportedKeywords()
	var walk func(s any)
	walk = func(s any) {
		m, ok := s.(map[string]any)
		if !ok {
			return
		}
		for _, k := range drop {
			delete(m, k)
		}
		for _, k := range []string{"properties", "$defs", "definitions", "patternProperties"} {
			if props, ok := m[k].(map[string]any); ok {
				for _, p := range props {
					walk(p)
				}
			}
		}
		for _, k := range []string{"items", "additionalProperties", "not", "contains"} {
			walk(m[k])
		}
		for _, k := range []string{"anyOf", "oneOf", "allOf", "prefixItems"} {
			if list, ok := m[k].([]any); ok {
				for _, p := range list {
					walk(p)
				}
			}
		}
	}
	walk(v)
	return json.Marshal(v)
}
