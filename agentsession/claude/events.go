package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/chat"
)

// streamEvent is one line of the CLI's stream-json output. Only the fields
// prchat uses are decoded; unknown event types are ignored.
type streamEvent struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`

	// system/init
	Model string `json:"model"`

	// assistant and user
	Message *struct {
		Model   string          `json:"model"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
	IsAPIErrorMessage bool            `json:"is_api_error_message"`
	ToolUseResult     json.RawMessage `json:"tool_use_result"`

	// result
	IsError          bool            `json:"is_error"`
	Result           string          `json:"result"`
	NumTurns         int             `json:"num_turns"`
	TotalCostUSD     *float64        `json:"total_cost_usd"`
	Usage            *resultUsage    `json:"usage"`
	StructuredOutput json.RawMessage `json:"structured_output"`
	Errors           []string        `json:"errors"`
	TerminalReason   string          `json:"terminal_reason"`
	APIErrorStatus   *int            `json:"api_error_status"`
}

// resultUsage is the token usage of a result event, summed over the run.
type resultUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// contentBlock is a block of an assistant or user message.
type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// blocks decodes a message's content, a string or an array of blocks.
func blocks(raw json.RawMessage) []contentBlock {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return []contentBlock{{Type: "text", Text: s}}
		}
		return nil
	}
	var out []contentBlock
	_ = json.Unmarshal(raw, &out)
	return out
}

// structuredOutputTool is the tool --json-schema adds; its call is the
// answer, delivered in the result, so it is not reported as a tool.
const structuredOutputTool = "StructuredOutput"

// translator turns the CLI's events into prchat's and remembers what the
// result needs.
type translator struct {
	dir   string // the run directory, to shorten paths in summaries
	emit  func(chat.Event)
	now   func() time.Time
	tools map[string]string // tool_use id -> tool name

	initSession string // session_id of system/init
	model       string
	result      *streamEvent
	lastText    string
}

// handle processes one line of output.
func (t *translator) handle(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return
	}
	var ev streamEvent
	if err := json.Unmarshal(line, &ev); err != nil {
		return
	}
	switch ev.Type {
	case "system":
		if ev.Subtype == "init" {
			t.initSession, t.model = ev.SessionID, ev.Model
		}
	case "assistant":
		if ev.Message == nil || ev.IsAPIErrorMessage {
			return // an API error, reported by the result
		}
		for _, b := range blocks(ev.Message.Content) {
			switch b.Type {
			case "text":
				if strings.TrimSpace(b.Text) == "" {
					continue
				}
				t.lastText = b.Text
				t.show(b.Text)
			case "tool_use":
				t.tools[b.ID] = b.Name
				if b.Name == structuredOutputTool {
					t.show(string(b.Input)) // the answer: its markdown
					continue
				}
				input := b.Input
				if len(input) == 0 || !json.Valid(input) {
					input = json.RawMessage(`{}`)
				}
				t.send(chat.Event{Type: chat.EventToolStart, ToolID: b.ID, ToolName: b.Name, Input: input})
			}
		}
	case "user":
		if ev.Message == nil {
			return
		}
		for _, b := range blocks(ev.Message.Content) {
			if b.Type != "tool_result" {
				continue
			}
			name, started := t.tools[b.ToolUseID]
			if !started || name == structuredOutputTool {
				continue
			}
			t.send(chat.Event{Type: chat.EventToolResult, ToolID: b.ToolUseID, ToolName: name,
				Summary: summarize(name, b, ev.ToolUseResult, t.dir)})
		}
	case "result":
		t.result = &ev
	}
}

// show emits what the reader sees of a text block or of the answer the
// model gave through the structured output tool: the answer's markdown
// rather than its JSON, prose as it is.
func (t *translator) show(text string) {
	var a agentsession.AnswerText
	if text = a.Write(text) + a.Flush(); strings.TrimSpace(text) != "" {
		t.send(chat.Event{Type: chat.EventTextDelta, Text: text})
	}
}

func (t *translator) send(e chat.Event) {
	e.At = t.now()
	t.emit(e)
}

// Summary limits.
const (
	maxSummary = 160 // runes
)

// summarize describes a tool's result in a few words: what a Read, Grep or
// Glob found, else the first line of the result; never its whole content.
func summarize(tool string, b contentBlock, structured json.RawMessage, dir string) string {
	text := resultText(b.Content)
	if b.IsError {
		return clip("error: " + firstLine(stripTags(text)))
	}
	if s := summarizeStructured(tool, structured, dir); s != "" {
		return clip(s)
	}
	first := firstLine(text)
	if n := strings.Count(strings.TrimRight(text, "\n"), "\n"); n > 0 {
		return clip(fmt.Sprintf("%s (+%d more lines)", first, n))
	}
	return clip(first)
}

// summarizeStructured reads the tool_use_result the CLI attaches to the
// results of its own tools.
func summarizeStructured(tool string, raw json.RawMessage, dir string) string {
	if len(raw) == 0 || raw[0] != '{' {
		return ""
	}
	var r struct {
		File *struct {
			FilePath   string `json:"filePath"`
			Content    string `json:"content"`
			NumLines   int    `json:"numLines"`
			StartLine  int    `json:"startLine"`
			TotalLines int    `json:"totalLines"`
		} `json:"file"`
		Mode       string   `json:"mode"`
		Filenames  []string `json:"filenames"`
		NumFiles   *int     `json:"numFiles"`
		NumLines   *int     `json:"numLines"`
		NumMatches *int     `json:"numMatches"`
		Truncated  bool     `json:"truncated"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return ""
	}
	switch {
	case tool == "Read" && r.File != nil:
		f := r.File
		path := relative(f.FilePath, dir)
		if strings.HasSuffix(f.Content, "\n") && f.StartLine+f.NumLines-1 == f.TotalLines {
			// The CLI counts the empty string after a final newline as a
			// line.
			f.NumLines--
			f.TotalLines--
		}
		if f.NumLines <= 0 {
			return "read " + path + " (empty)"
		}
		end := f.StartLine + f.NumLines - 1
		if f.TotalLines > 0 {
			end = min(end, f.TotalLines)
		}
		return fmt.Sprintf("read %s lines %d-%d of %d", path, f.StartLine, end, f.TotalLines)
	case tool == "Grep" && r.Mode == "content" && r.NumLines != nil:
		return plural(*r.NumLines, "matching line")
	case tool == "Grep" && r.Mode == "count" && r.NumMatches != nil:
		return plural(*r.NumMatches, "match") + " in " + plural(deref(r.NumFiles), "file")
	case tool == "Grep" && r.NumFiles != nil:
		return plural(*r.NumFiles, "file") + " matched" + listFiles(r.Filenames, dir)
	case tool == "Glob" && r.NumFiles != nil:
		s := plural(*r.NumFiles, "file") + " found" + listFiles(r.Filenames, dir)
		if r.Truncated {
			s += " (truncated)"
		}
		return s
	}
	return ""
}

// listFiles names the first few files, relative to dir.
func listFiles(files []string, dir string) string {
	if len(files) == 0 {
		return ""
	}
	const shown = 3
	var names []string
	for _, f := range files[:min(len(files), shown)] {
		names = append(names, relative(f, dir))
	}
	s := ": " + strings.Join(names, ", ")
	if len(files) > shown {
		s += ", ..."
	}
	return s
}

func relative(path, dir string) string {
	if dir != "" && filepath.IsAbs(path) {
		if rel, err := filepath.Rel(dir, path); err == nil && filepath.IsLocal(rel) {
			return filepath.ToSlash(rel)
		}
	}
	return path
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "ch") {
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// resultText returns the text of a tool_result's content, a string or an
// array of text blocks.
func resultText(raw json.RawMessage) string {
	var parts []string
	for _, b := range blocks(raw) {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// firstLine returns the first non-blank line of s, trimmed.
func firstLine(s string) string {
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

// stripTags removes the <tool_use_error> wrapper the CLI puts around tool
// errors.
func stripTags(s string) string {
	s = strings.ReplaceAll(s, "<tool_use_error>", "")
	return strings.ReplaceAll(s, "</tool_use_error>", "")
}

// clip shortens s to maxSummary runes.
func clip(s string) string {
	if utf8.RuneCountInString(s) <= maxSummary {
		return s
	}
	r := []rune(s)
	return string(r[:maxSummary-1]) + "…"
}
