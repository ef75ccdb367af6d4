package codex

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/chat"
)

// event is one line of `codex exec --json`.
type event struct {
	Type     string      `json:"type"`
	ThreadID string      `json:"thread_id"`
	Message  string      `json:"message"`
	Error    *eventError `json:"error"`
	Usage    *tokenUsage `json:"usage"`
	Item     *item       `json:"item"`
}

type eventError struct {
	Message string `json:"message"`
}

// item is a thread item of an item.started / item.completed event.
type item struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Text             string          `json:"text"`
	Command          string          `json:"command"`
	AggregatedOutput string          `json:"aggregated_output"`
	ExitCode         *int            `json:"exit_code"`
	Status           string          `json:"status"`
	Changes          []fileChange    `json:"changes"`
	Server           string          `json:"server"`
	Tool             string          `json:"tool"`
	Arguments        json.RawMessage `json:"arguments"`
	Query            string          `json:"query"`
	Message          string          `json:"message"`
}

type fileChange struct {
	Path string `json:"path"`
	Kind any    `json:"kind"`
}

// Bounds of what events carry from the CLI.
const (
	maxToolInput = 2000 // bytes of a command in a tool_start's input
	maxSummary   = 200  // bytes of a tool_result's summary
)

// parser turns the CLI's JSON lines into prchat's events and remembers
// what the result needs.
type parser struct {
	verb   string // start, resume or fork
	want   string // the session resumed or forked
	prefix string // of tool ids, unique to the call
	emit   func(chat.Event)
	kill   context.CancelFunc

	thread    string      // the thread the CLI started
	text      string      // the last agent message
	usage     *tokenUsage // turn.completed's (a running total)
	completed bool        // a turn.completed arrived
	errMsg    string      // the last error event
	failed    string      // turn.failed's error
	mismatch  error       // the CLI ran another thread than asked for
	commands  int
	started   map[string]bool
	notes     []string // the notes emitted
	// What the events reported, to tell which tool calls they left out.
	seenCommands []string
	fileChanges  int
}

// line handles one line of the CLI's output.
func (p *parser) line(b []byte) {
	b = bytes.TrimSpace(b)
	if p.mismatch != nil || len(b) == 0 || b[0] != '{' {
		return
	}
	var e event
	if json.Unmarshal(b, &e) != nil {
		return
	}
	switch e.Type {
	case "thread.started":
		p.thread = strings.ToLower(e.ThreadID)
		switch {
		case p.verb == "resume" && p.thread != p.want:
			p.mismatch = fmt.Errorf("codex resume of session %s ran thread %s instead: %w", p.want, p.thread, chat.ErrSessionGone)
		case p.verb == "fork" && p.thread == p.want:
			p.mismatch = fmt.Errorf("codex fork of session %s made no new session: %w", p.want, chat.ErrSessionGone)
		}
		if p.mismatch != nil {
			p.kill()
		}
	case "item.started":
		p.item(e.Item, false)
	case "item.completed":
		p.item(e.Item, true)
	case "turn.completed":
		p.completed = true
		p.usage = e.Usage
	case "turn.failed":
		if e.Error != nil {
			p.failed = cmp.Or(e.Error.Message, "the turn failed")
		} else {
			p.failed = "the turn failed"
		}
	case "error":
		p.errMsg = cmp.Or(e.Message, "error")
	}
}

// failure returns why the call failed, or "" if it did not. An error event
// followed by a completed turn was recovered from.
func (p *parser) failure() string {
	switch {
	case p.failed != "":
		return shorten(p.failed)
	case p.errMsg != "" && !p.completed:
		return shorten(p.errMsg)
	}
	return ""
}

func (p *parser) item(it *item, done bool) {
	if it == nil {
		return
	}
	now := time.Now()
	switch it.Type {
	case "agent_message":
		if done && it.Text != "" {
			p.text = it.Text
			// The reader sees the answer's markdown, not its JSON.
			var shown agentsession.AnswerText
			if text := shown.Write(it.Text) + shown.Flush(); text != "" {
				p.emit(chat.Event{Type: chat.EventTextDelta, Text: text, At: now})
			}
		}
	case "reasoning", "user_message":
	case "error":
		if note := "codex: " + truncate(it.Message, maxMessage); done && it.Message != "" && !slices.Contains(p.notes, note) {
			p.notes = append(p.notes, note) // each once
			p.emit(chat.Event{Type: chat.EventNote, Text: note, At: now})
		}
	default:
		if p.started == nil {
			p.started = map[string]bool{}
		}
		id := p.prefix + it.ID
		name, input := toolOf(it)
		if !p.started[id] {
			p.started[id] = true
			switch it.Type {
			case "command_execution":
				p.commands++
				p.seenCommands = append(p.seenCommands, it.Command)
			case "file_change":
				p.fileChanges++
			}
			p.emit(chat.Event{Type: chat.EventToolStart, ToolID: id, ToolName: name, Input: input, At: now})
		}
		if done {
			p.emit(chat.Event{Type: chat.EventToolResult, ToolID: id, ToolName: name, Summary: summary(it), At: now})
		}
	}
}

// toolOf names an item's tool and its input, as JSON.
func toolOf(it *item) (string, json.RawMessage) {
	var name string
	var input any
	switch it.Type {
	case "command_execution":
		name, input = "shell", map[string]string{"command": truncate(it.Command, maxToolInput)}
	case "file_change":
		paths := make([]string, 0, len(it.Changes))
		for _, c := range it.Changes {
			paths = append(paths, c.Path)
		}
		name, input = "apply_patch", map[string][]string{"paths": paths}
	case "mcp_tool_call":
		name = strings.Trim(it.Server+"."+it.Tool, ".")
		if len(it.Arguments) > 0 && len(it.Arguments) <= maxToolInput && json.Valid(it.Arguments) {
			return name, it.Arguments
		}
	case "web_search":
		name, input = "web_search", map[string]string{"query": truncate(it.Query, maxToolInput)}
	default:
		name = it.Type
	}
	name = cmp.Or(name, "tool")
	if input == nil {
		return name, nil
	}
	raw, err := marshal(input)
	if err != nil {
		return name, nil
	}
	return name, raw
}

// marshal encodes v as JSON without escaping <, > and & (commands and
// instructions read better as they are).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// summary describes a finished item in a line: a command's exit code, how
// many lines it printed and the first of them; never the whole output.
func summary(it *item) string {
	var s string
	switch it.Type {
	case "command_execution":
		switch {
		case it.ExitCode != nil:
			s = fmt.Sprintf("exit %d", *it.ExitCode)
		default:
			s = cmp.Or(it.Status, "finished")
		}
		out := strings.TrimRight(it.AggregatedOutput, "\n")
		if out == "" {
			s += ", no output"
			break
		}
		lines := strings.Split(out, "\n")
		first := ""
		for _, l := range lines {
			if l = strings.TrimSpace(l); l != "" {
				first = l
				break
			}
		}
		s += fmt.Sprintf(", %d line", len(lines))
		if len(lines) != 1 {
			s += "s"
		}
		s += ": " + first
	case "file_change":
		s = cmp.Or(it.Status, "finished")
		for i, c := range it.Changes {
			if i == 0 {
				s += ":"
			}
			s += fmt.Sprintf(" %v %s", c.Kind, c.Path)
		}
	default:
		s = cmp.Or(it.Status, "finished")
	}
	return truncate(s, maxSummary)
}

// maxLine bounds a line of the CLI's output; a longer one is dropped.
const maxLine = 64 << 20

// lineWriter calls line for each line written to it.
type lineWriter struct {
	line     func([]byte)
	buf      []byte
	overflow bool // dropping the rest of a line that was too long
}

func (w *lineWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if !w.overflow {
				w.buf = append(w.buf, b...)
				if len(w.buf) > maxLine {
					w.buf, w.overflow = w.buf[:0], true
				}
			}
			break
		}
		if !w.overflow {
			w.buf = append(w.buf, b[:i]...)
			w.line(w.buf)
		}
		w.buf, w.overflow = w.buf[:0], false
		b = b[i+1:]
	}
	return n, nil
}

// Flush handles a last line that had no newline.
func (w *lineWriter) Flush() {
	if len(w.buf) > 0 && !w.overflow {
		w.line(w.buf)
	}
	w.buf, w.overflow = w.buf[:0], false
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tailBuffer) String() string { return string(t.buf) }

// backfill reports the shell commands and patches of the turn's tool calls
// (as the session file records them) that the CLI's events left out: the
// CLI sometimes does not report a command that ends at once.
func (p *parser) backfill(calls []toolCall) {
	for _, c := range calls {
		var name, summ string
		var input any
		switch c.Name {
		case "exec_command", "shell", "shell_command", "local_shell":
			cmd := shellCommand(c.Arguments)
			if p.consumeCommand(cmd) {
				continue
			}
			name, input = "shell", map[string]string{"command": truncate(cmd, maxToolInput)}
			summ = execSummary(c)
			p.commands++
		case "apply_patch":
			if p.fileChanges > 0 {
				p.fileChanges--
				continue
			}
			name, input = "apply_patch", map[string][]string{"paths": patchPaths(c.Arguments)}
			summ = "no output"
			if first, _, _ := strings.Cut(strings.TrimSpace(c.Output), "\n"); first != "" {
				summ = truncate(first, maxSummary)
			}
		default:
			continue
		}
		id := p.prefix + c.CallID
		raw, err := marshal(input)
		if err != nil {
			raw = nil
		}
		now := time.Now()
		p.emit(chat.Event{Type: chat.EventToolStart, ToolID: id, ToolName: name, Input: raw, At: now})
		p.emit(chat.Event{Type: chat.EventToolResult, ToolID: id, ToolName: name, Summary: summ, At: now})
	}
}

// consumeCommand reports whether the events reported a command running
// cmd (the CLI reports it wrapped in the shell: /bin/bash -c '<cmd>'), and
// if so forgets it, so that each report matches one call.
func (p *parser) consumeCommand(cmd string) bool {
	for i, seen := range p.seenCommands {
		if cmd != "" && strings.Contains(seen, cmd) || cmd == "" && seen == "" {
			p.seenCommands = append(p.seenCommands[:i], p.seenCommands[i+1:]...)
			return true
		}
	}
	return false
}

// shellCommand returns the command of a shell tool call's arguments:
// {"cmd": "..."} (exec_command) or {"command": "..." | ["argv", ...]}.
func shellCommand(args string) string {
	var a struct {
		Cmd     string          `json:"cmd"`
		Command json.RawMessage `json:"command"`
	}
	if json.Unmarshal([]byte(args), &a) != nil {
		return ""
	}
	if a.Cmd != "" {
		return a.Cmd
	}
	var s string
	if json.Unmarshal(a.Command, &s) == nil {
		return s
	}
	var argv []string
	if json.Unmarshal(a.Command, &argv) == nil {
		return strings.Join(argv, " ")
	}
	return ""
}

// execSummary summarises a shell call's output as the session file records
// it ("...Process exited with code N...Output:\n<output>").
func execSummary(c toolCall) string {
	if !c.HasOutput {
		return "no output recorded"
	}
	it := &item{Type: "command_execution", AggregatedOutput: c.Output}
	head, out, ok := strings.Cut(c.Output, "\nOutput:\n")
	if ok {
		it.AggregatedOutput = out
	}
	for l := range strings.SplitSeq(head, "\n") {
		if v, ok := strings.CutPrefix(l, "Process exited with code "); ok {
			if code, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				it.ExitCode = &code
			}
		}
	}
	if it.ExitCode == nil {
		it.Status = "finished"
	}
	return summary(it)
}

// patchPaths returns the files an apply_patch input names.
func patchPaths(patch string) []string {
	paths := []string{}
	for l := range strings.SplitSeq(patch, "\n") {
		for _, prefix := range []string{"*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "} {
			if p, ok := strings.CutPrefix(l, prefix); ok {
				paths = append(paths, strings.TrimSpace(p))
			}
		}
	}
	return paths
}
