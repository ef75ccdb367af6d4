package codex

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/chat"
)

// maxLineage bounds how many forks deep HasSession follows a session's
// parents.
const maxLineage = 64

// rollout returns the session file of session id, after checking that the
// files of the sessions it was forked from are there too. A missing one is
// an error wrapping chat.ErrSessionGone.
func (b *Backend) rollout(id string) (string, error) {
	if !agentsession.IsUUID(id) {
		return "", fmt.Errorf("codex session %q: not a codex session id (a uuid): %w", id, chat.ErrSessionGone)
	}
	path, err := b.findRollout(id)
	if err != nil {
		return "", err
	}
	seen := map[string]bool{strings.ToLower(id): true}
	cur, curPath := id, path
	for range maxLineage {
		meta, err := readSessionMeta(curPath)
		if err != nil {
			// The CLI cannot resume from a file it cannot read either.
			return "", fmt.Errorf("codex session %s: %w: %w", id, err, chat.ErrSessionGone)
		}
		parent := meta.ForkedFromID
		if parent == "" {
			return path, nil
		}
		if !agentsession.IsUUID(parent) || seen[strings.ToLower(parent)] {
			return "", fmt.Errorf("codex session %s: session %s names %q as its parent: %w", id, cur, parent, chat.ErrSessionGone)
		}
		seen[strings.ToLower(parent)] = true
		pp, err := b.findRollout(parent)
		if err != nil {
			return "", fmt.Errorf("codex session %s was forked from %s, which is gone: %w", id, parent, err)
		}
		cur, curPath = parent, pp
	}
	return "", fmt.Errorf("codex session %s: forked more than %d times deep: %w", id, maxLineage, chat.ErrSessionGone)
}

// findRollout finds the session file of session id:
// $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl.
func (b *Backend) findRollout(id string) (string, error) {
	pattern := filepath.Join(b.sessionsDir(), "*", "*", "*", "rollout-*-"+strings.ToLower(id)+".jsonl")
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return "", fmt.Errorf("look for codex session %s: %w", id, err)
	}
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil && fi.Mode().IsRegular() {
			return m, nil
		}
	}
	return "", fmt.Errorf("codex session %s: no session file under %s: %w", id, b.sessionsDir(), chat.ErrSessionGone)
}

// sessionMeta is the payload of a session file's first line.
type sessionMeta struct {
	ID           string `json:"id"`
	ForkedFromID string `json:"forked_from_id"`
	Cwd          string `json:"cwd"`
}

// maxMetaLine bounds the first line of a session file (it carries the
// agent's base instructions).
const maxMetaLine = 4 << 20

// readSessionMeta reads the session_meta line that starts a session file.
func readSessionMeta(path string) (sessionMeta, error) {
	f, err := os.Open(path)
	if err != nil {
		return sessionMeta{}, fmt.Errorf("read session file: %w", err)
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(io.LimitReader(f, maxMetaLine), 64<<10).ReadBytes('\n')
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		return sessionMeta{}, fmt.Errorf("read the first line of %s: %w", path, err)
	}
	var rec struct {
		Type    string      `json:"type"`
		Payload sessionMeta `json:"payload"`
	}
	if err := json.Unmarshal(line, &rec); err != nil || rec.Type != "session_meta" {
		return sessionMeta{}, fmt.Errorf("%s does not start with a session_meta line", path)
	}
	return rec.Payload, nil
}

// tokenUsage is the CLI's token usage record.
type tokenUsage struct {
	InputTokens           int64 `json:"input_tokens"`
	CachedInputTokens     int64 `json:"cached_input_tokens"`
	OutputTokens          int64 `json:"output_tokens"`
	ReasoningOutputTokens int64 `json:"reasoning_output_tokens"`
}

func (u *tokenUsage) add(o tokenUsage) {
	u.InputTokens += o.InputTokens
	u.CachedInputTokens += o.CachedInputTokens
	u.OutputTokens += o.OutputTokens
	u.ReasoningOutputTokens += o.ReasoningOutputTokens
}

// turnRecord is what a session file records of its last turn.
type turnRecord struct {
	Usage    tokenUsage
	Requests int    // model requests (one token_usage_record each)
	Model    string // the turn's model, if the file names it
	// Calls are the tool calls the model made in the turn, in order.
	Calls []toolCall
}

// toolCall is a tool call of the model and its output, as a session file
// records them (response_item lines).
type toolCall struct {
	CallID string
	Name   string
	// Arguments of a function call (JSON) or input of a custom tool call.
	Arguments string
	Output    string
	HasOutput bool
}

// maxRolloutLine bounds the lines readLastTurn decodes; a longer one (a
// huge tool output) is skipped.
const maxRolloutLine = 1 << 20

// readLastTurn reads the last turn recorded in a session file: its
// token_usage_record lines and tool calls after the last task_started. It
// reports false when the file records no turn.
func readLastTurn(path string) (turnRecord, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return turnRecord{}, false, fmt.Errorf("read session file: %w", err)
	}
	defer f.Close()
	var (
		turn  string
		rec   turnRecord
		found bool
		calls = map[string]int{} // call id -> index in rec.Calls
	)
	r := bufio.NewReaderSize(f, maxRolloutLine)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			line = nil
		}
		if len(line) > 0 {
			var l struct {
				Type    string          `json:"type"`
				Payload json.RawMessage `json:"payload"`
			}
			switch {
			case bytes.Contains(line, []byte(`"task_started"`)),
				bytes.Contains(line, []byte(`"token_usage_record"`)),
				bytes.Contains(line, []byte(`"turn_context"`)),
				bytes.Contains(line, []byte(`"response_item"`)) && bytes.Contains(line, []byte(`"call_id"`)):
				if json.Unmarshal(line, &l) != nil {
					break
				}
				var pl struct {
					Type      string          `json:"type"`
					TurnID    string          `json:"turn_id"`
					Usage     tokenUsage      `json:"usage"`
					Model     string          `json:"model"`
					CallID    string          `json:"call_id"`
					Name      string          `json:"name"`
					Arguments string          `json:"arguments"`
					Input     string          `json:"input"`
					Output    json.RawMessage `json:"output"`
				}
				if json.Unmarshal(l.Payload, &pl) != nil {
					break
				}
				switch {
				case l.Type == "event_msg" && pl.Type == "task_started":
					turn, found = pl.TurnID, true
					rec = turnRecord{Model: rec.Model}
					clear(calls)
				case l.Type == "token_usage_record" && pl.TurnID == turn:
					rec.Usage.add(pl.Usage)
					rec.Requests++
				case l.Type == "turn_context" && pl.Model != "":
					rec.Model = pl.Model
				case l.Type == "response_item" && found && (pl.Type == "function_call" || pl.Type == "custom_tool_call"):
					calls[pl.CallID] = len(rec.Calls)
					rec.Calls = append(rec.Calls, toolCall{CallID: pl.CallID, Name: pl.Name, Arguments: cmp.Or(pl.Arguments, pl.Input)})
				case l.Type == "response_item" && found && strings.HasSuffix(pl.Type, "_call_output"):
					if i, ok := calls[pl.CallID]; ok {
						rec.Calls[i].Output, rec.Calls[i].HasOutput = outputText(pl.Output), true
					}
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return rec, found, nil
			}
			return turnRecord{}, false, fmt.Errorf("read %s: %w", path, err)
		}
	}
}

// outputText returns a tool output as text: a string, or the text parts of
// a content list.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		texts := make([]string, 0, len(parts))
		for _, p := range parts {
			texts = append(texts, p.Text)
		}
		return strings.Join(texts, "\n")
	}
	return string(raw)
}
