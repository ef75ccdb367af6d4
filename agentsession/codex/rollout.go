package codex

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

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

// lineageRoot returns the session that id was forked from, through every
// fork, as far as the rollouts on this host tell (id itself when it is no
// fork): the runs and restores of one lineage share its rollout.
func (b *Backend) lineageRoot(id string) string {
	root := strings.ToLower(id)
	seen := map[string]bool{root: true}
	for range maxLineage {
		path, err := b.findRollout(root)
		if err != nil {
			return root
		}
		meta, err := readSessionMeta(path)
		parent := strings.ToLower(meta.ForkedFromID)
		if err != nil || parent == "" || seen[parent] {
			return root
		}
		seen[parent] = true
		root = parent
	}
	return root
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

var _ chat.SessionFileBackend = (*Backend)(nil)

// rolloutMeta is what a restore reads of a session file's first line.
type rolloutMeta struct {
	ID           string `json:"id"`
	ForkedFromID string `json:"forked_from_id"`
	Cwd          string `json:"cwd"`
	Timestamp    string `json:"timestamp"`
	HistoryBase  *struct {
		ThreadID      string `json:"thread_id"`
		EndByteOffset *int64 `json:"end_byte_offset"`
	} `json:"history_base"`
}

// parseMeta reads the session_meta line that starts data.
func parseMeta(data []byte) (rolloutMeta, error) {
	line := data
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		line = data[:i]
	}
	var rec struct {
		Type    string      `json:"type"`
		Payload rolloutMeta `json:"payload"`
	}
	if err := json.Unmarshal(line, &rec); err != nil || rec.Type != "session_meta" {
		return rolloutMeta{}, chat.Errorf(chat.CodeInvalid, "the file is not a Codex session (rollout): its first line is not a session_meta record")
	}
	return rec.Payload, nil
}

// CheckSessionFile is the package's CheckSessionFile.
func (b *Backend) CheckSessionFile(data []byte, id string) (chat.SessionFileInfo, error) {
	return CheckSessionFile(data, id)
}

// CheckSessionFile checks that data is a Codex session file (rollout) of
// session id: JSON lines whose first is the session_meta record of id. It
// returns the working directory the file records and, for a fork, the
// session it was forked from (whose file a restore needs too). It is a
// chat.SessionChecker.
func CheckSessionFile(data []byte, id string) (chat.SessionFileInfo, error) {
	const what = "Codex session file"
	if !agentsession.IsUUID(id) {
		return chat.SessionFileInfo{}, chat.Errorf(chat.CodeInvalid, "%q is not a Codex session id (a uuid)", id)
	}
	if err := agentsession.JSONLines(data, what, func(int, []byte) error { return nil }); err != nil {
		return chat.SessionFileInfo{}, err
	}
	meta, err := parseMeta(data)
	if err != nil {
		return chat.SessionFileInfo{}, err
	}
	if !strings.EqualFold(meta.ID, id) {
		return chat.SessionFileInfo{}, chat.Errorf(chat.CodeInvalid, "the %s holds session %q, not %s", what, meta.ID, id)
	}
	return chat.SessionFileInfo{Cwd: meta.Cwd, Parent: meta.ForkedFromID}, nil
}

// ReadSessionFile returns the session file of ref.ID as the CLI left it.
func (b *Backend) ReadSessionFile(_ context.Context, ref chat.SessionRef) ([]byte, error) {
	if !agentsession.IsUUID(ref.ID) {
		return nil, fmt.Errorf("codex session %q: not a codex session id (a uuid): %w", ref.ID, chat.ErrSessionGone)
	}
	path, err := b.findRollout(ref.ID)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

// RestoreSession writes each file as a session file of the CLI,
// $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl (replacing a
// copy already there), with the paths under its Cwd mapped to dir. A fork
// points into its parent's file at a byte offset; when the parent is among
// files, that offset is moved to where the same line is in the parent as
// restored.
func (b *Backend) RestoreSession(ctx context.Context, dir string, files []chat.SessionFile) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("codex: restore sessions into %s: %w", dir, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real // the CLI records its working directory as the kernel names it
	}
	byID := map[string]chat.SessionFile{}
	parents := map[string]string{}
	for _, f := range files {
		byID[strings.ToLower(f.SessionID)] = f
		if meta, err := parseMeta(f.Data); err == nil {
			parents[strings.ToLower(f.SessionID)] = strings.ToLower(meta.ForkedFromID)
		}
	}
	// A run of the lineage (Run) reads these files: the restore waits
	// until none runs here.
	roots := map[string]bool{}
	for id := range byID {
		root := id
		for range maxLineage {
			p := parents[root]
			if p == "" {
				break
			}
			root = p
			if _, ok := byID[p]; !ok {
				break
			}
		}
		roots[root] = true
	}
	for _, root := range slices.Sorted(maps.Keys(roots)) {
		unlock, err := b.locks.Lock(ctx, root)
		if err != nil {
			return fmt.Errorf("codex: restore session %s: %w", root, err)
		}
		defer unlock()
	}
	for _, f := range files {
		if !agentsession.IsUUID(f.SessionID) {
			return fmt.Errorf("codex: restore session %q: not a codex session id (a uuid)", f.SessionID)
		}
		meta, err := parseMeta(f.Data)
		if err != nil {
			return fmt.Errorf("codex: restore session %s: %w", f.SessionID, err)
		}
		data := agentsession.MapDir(f.Data, f.Cwd, abs)
		if hb := meta.HistoryBase; hb != nil && hb.EndByteOffset != nil {
			if parent, ok := byID[strings.ToLower(hb.ThreadID)]; ok {
				data = moveOffset(data, *hb.EndByteOffset, parent, f.Cwd, abs)
			}
		}
		path, err := b.findRollout(f.SessionID)
		if err != nil {
			path = filepath.Join(b.sessionsDir(), rolloutName(meta, f.SessionID))
		}
		if err := agentsession.WriteFileAtomic(path, data); err != nil {
			return fmt.Errorf("codex: restore session %s: %w", f.SessionID, err)
		}
	}
	return nil
}

// rolloutName is where the CLI keeps a session file started at the time
// meta names: YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<id>.jsonl.
func rolloutName(meta rolloutMeta, id string) string {
	t, err := time.Parse(time.RFC3339Nano, meta.Timestamp)
	if err != nil {
		t = time.Unix(0, 0).UTC()
	}
	return filepath.Join(t.Format("2006"), t.Format("01"), t.Format("02"),
		"rollout-"+t.Format("2006-01-02T15-04-05")+"-"+strings.ToLower(id)+".jsonl")
}

// moveOffset rewrites the end_byte_offset of child's session_meta line (a
// fork's pointer into its parent's file, as that file was when the child
// ran in childCwd) to the offset of the same line in parent restored into
// dir.
func moveOffset(child []byte, offset int64, parent chat.SessionFile, childCwd, dir string) []byte {
	then := agentsession.MapDir(parent.Data, parent.Cwd, childCwd)
	if offset < 0 || offset > int64(len(then)) {
		return child
	}
	lines := bytes.Count(then[:offset], []byte("\n"))
	now := agentsession.MapDir(parent.Data, parent.Cwd, dir)
	moved := 0
	for range lines {
		i := bytes.IndexByte(now[moved:], '\n')
		if i < 0 {
			return child
		}
		moved += i + 1
	}
	if int64(moved) == offset {
		return child
	}
	end := bytes.IndexByte(child, '\n')
	if end < 0 {
		end = len(child)
	}
	old := []byte(`"end_byte_offset":` + strconv.FormatInt(offset, 10))
	first := bytes.Replace(child[:end], old, []byte(`"end_byte_offset":`+strconv.Itoa(moved)), 1)
	return append(first, child[end:]...)
}
