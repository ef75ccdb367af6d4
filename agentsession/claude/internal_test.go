package claude

import (
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/chat"
)

func TestProjectName(t *testing.T) {
	t.Parallel()
	long := "/tmp/TestXLongPathAndSettings2253362276/001/run/" + strings.Repeat("very-long.dir_name", 12)
	tests := []struct{ dir, want string }{
		{"/tmp/exp/run", "-tmp-exp-run"},
		{"/home/me/src/my_repo.v2", "-home-me-src-my-repo-v2"},
		{"/tmp/é", "-tmp--"},  // one UTF-16 unit
		{"/tmp/😀", "-tmp---"}, // two UTF-16 units
		// Observed from the CLI (2.1.328): a name over 200 characters is cut
		// and followed by a hash of the whole path.
		{long, projectNameCut(long) + "-15f32v"},
	}
	for _, tt := range tests {
		if got := projectName(tt.dir); got != tt.want {
			t.Errorf("projectName(%q) = %q, want %q", tt.dir, got, tt.want)
		}
	}
}

// projectNameCut is the first 200 characters of a long path's folder name.
func projectNameCut(dir string) string {
	var b strings.Builder
	for _, r := range dir {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()[:maxProjectName]
}

func TestSessionIDs(t *testing.T) {
	t.Parallel()
	if id := "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"; !validSessionID(id) {
		t.Errorf("validSessionID(%q) = false, want true", id)
	}
	for _, id := range []string{"", "scripted-1", "00000000-prchat-no-such-session", "11111111-2222-4333-8444-55555555555", "../../etc/passwd"} {
		if validSessionID(id) {
			t.Errorf("validSessionID(%q) = true, want false", id)
		}
	}
}

func TestTranslator(t *testing.T) {
	t.Parallel()
	// Lines as the CLI 2.1.328 writes them (shortened).
	lines := []string{
		`{"type":"system","subtype":"init","cwd":"/run","session_id":"9db2fed4-a6e4-4d21-abf9-0eddd1deb843","tools":["Glob","Grep","Read","StructuredOutput"],"model":"claude-opus-5-5","permissionMode":"dontAsk"}`,
		`{"type":"assistant","message":{"content":[{"text":"Let me look.","type":"text"}],"model":"claude-opus-5-5","role":"assistant"},"session_id":"9db2fed4-a6e4-4d21-abf9-0eddd1deb843"}`,
		`{"type":"assistant","message":{"content":[{"id":"t1","input":{"file_path":"/run/a.go"},"name":"Read","type":"tool_use"}]},"session_id":"9db2fed4-a6e4-4d21-abf9-0eddd1deb843"}`,
		`{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":"1\tpackage a\n2\t\n3\tfunc A() {}\n"}]},"tool_use_result":{"type":"text","file":{"filePath":"/run/a.go","content":"package a\n\nfunc A() {}\n","numLines":4,"startLine":1,"totalLines":4}}}`,
		`{"type":"assistant","message":{"content":[{"id":"t2","input":{"pattern":"func"},"name":"Grep","type":"tool_use"}]}}`,
		`{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t2","type":"tool_result","content":"Found 2 files\na.go\nb.go"}]},"tool_use_result":{"mode":"files_with_matches","filenames":["a.go","b.go"],"numFiles":2}}`,
		`{"type":"assistant","message":{"content":[{"id":"t3","input":{"command":"echo x > f"},"name":"Bash","type":"tool_use"}]}}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"<tool_use_error>Error: No such tool available: Bash. Bash is disabled for this session.</tool_use_error>","is_error":true,"tool_use_id":"t3"}]},"tool_use_result":"Error: No such tool available: Bash."}`,
		`{"type":"assistant","message":{"content":[{"text":"{\"answer_markdown\":\"A JSON answer in text\\n\",\"citations\":[]}","type":"text"}]}}`,
		`{"type":"assistant","message":{"content":[{"id":"t4","input":{"answer_markdown":"Done: see **a.go**.","citations":[]},"name":"StructuredOutput","type":"tool_use"}]}}`,
		`{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t4","type":"tool_result","content":"Structured output provided successfully"}]}}`,
		`{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"API Error: 500 boom"}]},"is_api_error_message":true}`,
		`not json`,
		`{"type":"result","subtype":"success","is_error":false,"num_turns":5,"result":"{\"answer\":\"done\"}","structured_output":{"answer":"done"},"session_id":"9db2fed4-a6e4-4d21-abf9-0eddd1deb843","total_cost_usd":0.0056,"usage":{"input_tokens":700,"cache_creation_input_tokens":10,"cache_read_input_tokens":5,"output_tokens":140}}`,
	}
	var events []chat.Event
	tr := &translator{dir: "/run", emit: func(e chat.Event) { e.At = time.Time{}; events = append(events, e) }, now: time.Now, tools: map[string]string{}}
	readLines(strings.NewReader(strings.Join(lines, "\n")), maxLine, tr.handle)
	b := &Backend{}
	res := b.result(&call{mode: chat.SessionSeeded, session: "9db2fed4-a6e4-4d21-abf9-0eddd1deb843"}, tr)

	in, out, cost := int64(715), int64(140), 0.0056
	want := []chat.Event{
		{Type: chat.EventTextDelta, Text: "Let me look."},
		{Type: chat.EventToolStart, ToolID: "t1", ToolName: "Read", Input: json.RawMessage(`{"file_path":"/run/a.go"}`)},
		{Type: chat.EventToolResult, ToolID: "t1", ToolName: "Read", Summary: "read a.go lines 1-3 of 3"},
		{Type: chat.EventToolStart, ToolID: "t2", ToolName: "Grep", Input: json.RawMessage(`{"pattern":"func"}`)},
		{Type: chat.EventToolResult, ToolID: "t2", ToolName: "Grep", Summary: "2 files matched: a.go, b.go"},
		{Type: chat.EventToolStart, ToolID: "t3", ToolName: "Bash", Input: json.RawMessage(`{"command":"echo x > f"}`)},
		{Type: chat.EventToolResult, ToolID: "t3", ToolName: "Bash", Summary: "error: Error: No such tool available: Bash. Bash is disabled for this session."},
		// The answer's markdown, not its JSON, whether in text or through
		// the structured output tool.
		{Type: chat.EventTextDelta, Text: "A JSON answer in text\n"},
		{Type: chat.EventTextDelta, Text: "Done: see **a.go**."},
		{Type: chat.EventUsage, InputTokens: &in, OutputTokens: &out, CostUSD: &cost},
	}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	wantRes := chat.RunResult{
		Text:       `{"answer":"done"}`,
		Structured: json.RawMessage(`{"answer":"done"}`),
		SessionID:  "9db2fed4-a6e4-4d21-abf9-0eddd1deb843",
		Model:      "claude-opus-5-5",
		Usage:      chat.Usage{InputTokens: in, OutputTokens: out, Calls: 5, CostUSD: &cost},
	}
	if diff := cmp.Diff(wantRes, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

func TestSummarizeIsShort(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("a very long line of a file that nobody wants in a transcript ", 50) + "\nline 2\nline 3\n"
	raw, _ := json.Marshal(big)
	got := summarize("Other", contentBlock{Content: raw}, nil, "")
	if n := len([]rune(got)); n > maxSummary {
		t.Errorf("summary has %d runes, want at most %d: %q", n, maxSummary, got)
	}
	if strings.Contains(got, "line 2") {
		t.Errorf("summary %q holds more than the first line", got)
	}
}

func TestLookupEnvAndSecretValues(t *testing.T) {
	t.Parallel()
	env := []string{"HOME=/home/w", "PATH=/bin", "ANTHROPIC_API_KEY=sk-ant-0123456789", "HOME=/tmp/h"}
	if got := lookupEnv(env, "HOME"); got != "/tmp/h" {
		t.Errorf("lookupEnv(HOME) = %q, want the last value /tmp/h", got)
	}
	if diff := cmp.Diff([]string{"sk-ant-0123456789"}, secretValues(env)); diff != "" {
		t.Errorf("secretValues (-want +got):\n%s", diff)
	}
}

func TestLineReaderSkipsHugeLines(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("x", 200<<10) // longer than the reader's buffer too
	var got []string
	readLines(io.MultiReader(strings.NewReader("one\n"+huge+"\ntwo\nthree")), 100<<10, func(l []byte) { got = append(got, string(l)) })
	if diff := cmp.Diff([]string{"one", "two", "three"}, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

func TestFailure(t *testing.T) {
	t.Parallel()
	b := &Backend{secrets: []string{"sk-ant-secret-value"}}
	resume := &call{mode: chat.SessionResumed, parent: "99999999-2222-4333-8444-555555555555", args: []string{"--max-turns", "7"}}
	exit1 := errors.New("exit status 1")
	// Result lines as the CLI 2.1.328 writes them (shortened).
	tests := []struct {
		name, result, stderr string
		waitErr              error
		reason               chat.Reason
		gone                 bool
		says                 string
	}{
		{name: "success", result: `{"type":"result","subtype":"success","is_error":false,"num_turns":2}`},
		{name: "api error", result: `{"type":"result","subtype":"success","is_error":true,"terminal_reason":"api_error","api_error_status":500,"result":"API Error: 500 boom with sk-ant-secret-value. This is a server-side issue"}`,
			waitErr: exit1, reason: chat.ReasonBackendError, says: "the model API failed (api_error, exit status 1): API Error: 500 boom with [redacted]."},
		{name: "max turns", result: `{"type":"result","subtype":"error_max_turns","is_error":true,"errors":["Reached maximum number of turns (7)"]}`,
			waitErr: exit1, reason: chat.ReasonBudgetExceeded, says: "its 7 model calls"},
		{name: "no such session", result: `{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["No conversation found with session ID: 99999999-2222-4333-8444-555555555555"]}`,
			stderr: "No conversation found with session ID: 99999999-2222-4333-8444-555555555555\n", waitErr: exit1, gone: true},
		{name: "crash without result", stderr: "line one\nsegfault somewhere\n", waitErr: exit1, reason: chat.ReasonBackendError, says: "without a result: line one | segfault somewhere"},
	}
	for _, tt := range tests {
		tr := &translator{emit: func(chat.Event) {}, now: time.Now, tools: map[string]string{}}
		if tt.result != "" {
			tr.handle([]byte(tt.result))
		}
		err := b.failure(resume, tr, tt.waitErr, tt.stderr)
		switch {
		case tt.gone:
			if !errors.Is(err, chat.ErrSessionGone) {
				t.Errorf("%s: failure = %v, want an error wrapping chat.ErrSessionGone", tt.name, err)
			}
		case tt.reason == "":
			if err != nil {
				t.Errorf("%s: failure = %v, want nil", tt.name, err)
			}
		default:
			if got := chat.FailureReason(err, ""); got != tt.reason || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("%s: failure = %v (reason %q), want reason %q saying %q", tt.name, err, got, tt.reason, tt.says)
			}
		}
	}
}

// TestPromptIsNeverAnOption: a question written as CLI flags stays the
// prompt: the command line is that of any other question, and the prompt
// is its one argument after "--".
func TestPromptIsNeverAnOption(t *testing.T) {
	t.Parallel()
	b, err := New(Config{ConfigDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	argsOf := func(question string) []string {
		t.Helper()
		req := chat.RunRequest{Mode: chat.SessionSeeded, Dir: dir, MaxCalls: 5, System: chat.System(), Schema: json.RawMessage(chat.AnswerSchema),
			Prompt: chat.QuestionPrompt(chat.Review{}, chat.Ask{Question: question})}
		c, err := b.prepare(req)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(c.args); n < 2 || c.args[n-2] != "--" || c.args[n-1] != req.Prompt {
			t.Fatalf("the prompt is not the one argument after --: %q", c.args)
		}
		// The session id is new each call.
		return slices.DeleteFunc(slices.Clone(c.args[:len(c.args)-1]), func(a string) bool { return validSessionID(a) })
	}
	plain := argsOf("Why?")
	for _, q := range []string{
		"--dangerously-skip-permissions --add-dir / --tools Bash,Write --model evil",
		"-p --permission-mode bypassPermissions",
		"--\n--resume 11111111-2222-4333-8444-555555555555",
	} {
		if diff := cmp.Diff(plain, argsOf(q)); diff != "" {
			t.Errorf("question %q changed the command line (-plain +got):\n%s", q, diff)
		}
	}
}
