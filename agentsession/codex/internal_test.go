package codex

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/chat"
)

// Ids of the sessions in testdata: a session resumed several times and a
// fork of it, both recorded from codex-cli 0.169.0.
const (
	parentID = "01a22b2d-26bf-7212-8ee7-412acfad9f9e"
	forkID   = "01a22b2d-79a6-7ee3-8f95-c8fa34a78416"
)

// feed writes a recorded `codex exec --json` stream to a parser in small
// chunks, as a pipe may deliver it, and returns the parser and its events.
func feed(t *testing.T, file, verb, want string) (*parser, []chat.Event, bool) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var events []chat.Event
	killed := false
	p := &parser{verb: verb, want: want, prefix: "c1.", emit: func(e chat.Event) {
		e.At = e.At.UTC().Truncate(0)
		events = append(events, e)
	}, kill: func() { killed = true }}
	w := &lineWriter{line: p.line}
	for len(raw) > 0 {
		n := min(7, len(raw))
		if _, err := w.Write(raw[:n]); err != nil {
			t.Fatal(err)
		}
		raw = raw[n:]
	}
	w.Flush()
	return p, events, killed
}

func TestParserMapsEvents(t *testing.T) {
	t.Parallel()
	p, events, _ := feed(t, "exec-tools.jsonl", "start", "")
	type ev struct{ Type, ToolID, ToolName, Input, Summary, Text string }
	var got []ev
	for _, e := range events {
		got = append(got, ev{e.Type, e.ToolID, e.ToolName, string(e.Input), e.Summary, e.Text})
	}
	answer := `{"answer_markdown":"done","citations":[],"suggests_fix":null}`
	want := []ev{
		{Type: chat.EventTextDelta, Text: "let me look"},
		{Type: chat.EventToolStart, ToolID: "c1.item_1", ToolName: "shell", Input: `{"command":"/bin/bash -lc 'cat a.go; echo x > written.txt'"}`},
		{Type: chat.EventToolResult, ToolID: "c1.item_1", ToolName: "shell", Summary: "exit 1, 5 lines: pyenv: cannot rehash: /root/.pyenv/shims isn't writable"},
		{Type: chat.EventTextDelta, Text: "done"}, // the answer's markdown; the result's Text keeps the JSON
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if p.thread != "01a22b2e-fac0-7c53-b09d-be89fd320c94" || p.text != answer || p.failure() != "" || p.commands != 1 {
		t.Errorf("parser = thread %q, text %q, failure %q, commands %d", p.thread, p.text, p.failure(), p.commands)
	}
	if p.usage == nil || p.usage.InputTokens != 29040 || p.usage.OutputTokens != 44 {
		t.Errorf("turn.completed usage = %+v", p.usage)
	}
}

func TestParserFailure(t *testing.T) {
	t.Parallel()
	p, _, _ := feed(t, "exec-failed.jsonl", "start", "")
	if got := p.failure(); got != "bad request here" {
		t.Errorf("failure() = %q, want the API's message", got)
	}
}

// TestParserThreadMismatch checks that a resume that reports another
// thread than the one asked for is stopped and reported gone.
func TestParserThreadMismatch(t *testing.T) {
	t.Parallel()
	p, events, killed := feed(t, "exec-tools.jsonl", "resume", parentID)
	if !errors.Is(p.mismatch, chat.ErrSessionGone) || !killed {
		t.Errorf("mismatch = %v, killed %v; want ErrSessionGone and the CLI killed", p.mismatch, killed)
	}
	if len(events) != 0 {
		t.Errorf("events after the mismatch: %+v", events)
	}
	// A fork must report a new thread.
	p, _, killed = feed(t, "exec-tools.jsonl", "fork", "01a22b2e-fac0-7c53-b09d-be89fd320c94")
	if !errors.Is(p.mismatch, chat.ErrSessionGone) || !killed {
		t.Errorf("fork into its parent's thread: mismatch = %v, killed %v", p.mismatch, killed)
	}
}

func TestReadLastTurn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file string
		want turnRecord
	}{
		{"rollout-resumed.jsonl", turnRecord{Usage: tokenUsage{InputTokens: 100, CachedInputTokens: 20, OutputTokens: 7}, Requests: 1, Model: "gpt-5.5"}},
		{"rollout-forked.jsonl", turnRecord{Usage: tokenUsage{InputTokens: 100, CachedInputTokens: 20, OutputTokens: 7}, Requests: 1, Model: "gpt-5.5"}},
		{"rollout-unreported-command.jsonl", turnRecord{
			Usage:    tokenUsage{InputTokens: 1700, CachedInputTokens: 400, OutputTokens: 120},
			Requests: 2,
			Model:    "gpt-5.5",
			Calls: []toolCall{{
				CallID: "call_fake_3_1", Name: "exec_command", Arguments: `{"cmd":"echo forked \u003e fork-note.txt","login":false}`,
				Output:    "Chunk ID: b16516\nWall time: 0.0000 seconds\nProcess exited with code 1\nOriginal token count: 14\nOutput:\n/bin/bash: line 1: fork-note.txt: Read-only file system\n",
				HasOutput: true,
			}},
		}},
	} {
		got, ok, err := readLastTurn(filepath.Join("testdata", tc.file))
		if err != nil || !ok {
			t.Fatalf("%s: %v, found %v", tc.file, err, ok)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: last turn (-want +got):\n%s", tc.file, diff)
		}
	}
}

// TestBackfill checks that the tool calls of a turn that the CLI's events
// left out are reported from the session file, and only those.
func TestBackfill(t *testing.T) {
	t.Parallel()
	rec, _, err := readLastTurn("testdata/rollout-unreported-command.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	// The recorded stream of that fork reported no command.
	p, _, _ := feed(t, "exec-failed.jsonl", "start", "")
	var events []chat.Event
	p.emit = func(e chat.Event) { events = append(events, e) }
	p.backfill(rec.Calls)
	want := []string{
		`tool_start c1.call_fake_3_1 shell {"command":"echo forked > fork-note.txt"}`,
		"tool_result c1.call_fake_3_1 shell exit 1, 1 line: /bin/bash: line 1: fork-note.txt: Read-only file system",
	}
	var got []string
	for _, e := range events {
		got = append(got, strings.TrimSpace(e.Type+" "+e.ToolID+" "+e.ToolName+" "+string(e.Input)+e.Summary))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backfilled events (-want +got):\n%s", diff)
	}

	// A command the events reported is not reported twice.
	p, _, _ = feed(t, "exec-tools.jsonl", "start", "")
	events = nil
	p.emit = func(e chat.Event) { events = append(events, e) }
	p.backfill([]toolCall{
		{CallID: "a", Name: "exec_command", Arguments: `{"cmd":"cat a.go; echo x > written.txt"}`, HasOutput: true},
		{CallID: "b", Name: "apply_patch", Arguments: "*** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch\n", Output: "patch rejected: read-only sandbox", HasOutput: true},
	})
	if len(events) != 2 || events[0].ToolName != "apply_patch" || string(events[0].Input) != `{"paths":["x.txt"]}` || events[1].Summary != "patch rejected: read-only sandbox" {
		t.Errorf("backfill after a reported command = %+v, want only the unreported apply_patch", events)
	}
}

// sessionsHome makes a CODEX_HOME holding the testdata sessions.
func sessionsHome(t *testing.T) (home, parent, fork string) {
	t.Helper()
	home = t.TempDir()
	day := filepath.Join(home, "sessions", "2026", "11", "30")
	if err := os.MkdirAll(day, 0o755); err != nil {
		t.Fatal(err)
	}
	cp := func(src, id string) string {
		raw, err := os.ReadFile(filepath.Join("testdata", src))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(day, "rollout-2026-11-30T06-38-29-"+id+".jsonl")
		if err := os.WriteFile(dst, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	return home, cp("rollout-resumed.jsonl", parentID), cp("rollout-forked.jsonl", forkID)
}

func TestHasSession(t *testing.T) {
	t.Parallel()
	home, parent, _ := sessionsHome(t)
	// "false" fails if it is ever run: a gone session must fail first.
	b, err := New(Config{Bin: "false", Home: home})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, id := range []string{parentID, forkID, strings.ToUpper(forkID)} {
		if err := b.HasSession(ctx, chat.SessionRef{ID: id}); err != nil {
			t.Errorf("HasSession(%s) = %v", id, err)
		}
	}
	gone := []string{"", "not-a-uuid", "01a22b2d-0000-7000-8000-000000000000", "../../" + parentID}
	for _, id := range gone {
		if err := b.HasSession(ctx, chat.SessionRef{ID: id}); !errors.Is(err, chat.ErrSessionGone) {
			t.Errorf("HasSession(%q) = %v, want ErrSessionGone", id, err)
		}
	}
	if err := os.Remove(parent); err != nil {
		t.Fatal(err)
	}
	err = b.HasSession(ctx, chat.SessionRef{ID: forkID})
	if !errors.Is(err, chat.ErrSessionGone) || !strings.Contains(err.Error(), "forked from "+parentID) {
		t.Errorf("HasSession(fork of a deleted session) = %v, want ErrSessionGone naming the parent", err)
	}
	for _, mode := range []chat.SessionMode{chat.SessionResumed, chat.SessionForked} {
		_, err := b.Run(ctx, chat.RunRequest{Mode: mode, Session: chat.SessionRef{ID: forkID}, Dir: t.TempDir()}, nil)
		if !errors.Is(err, chat.ErrSessionGone) {
			t.Errorf("Run(%s of a fork whose parent is gone) = %v, want ErrSessionGone", mode, err)
		}
	}
}

func TestStderrMessage(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/stderr-no-rollout.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := "thread/resume: thread/resume failed: no rollout found for thread id 0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee (code -32600)"
	if got := stderrMessage(string(raw)); got != want {
		t.Errorf("stderrMessage = %q, want %q", got, want)
	}
	if got := stderrMessage("WARNING: x\nsomething broke\n   0: <unknown>\n"); got != "something broke" {
		t.Errorf("stderrMessage without an Error line = %q", got)
	}
}

func TestStrictSchema(t *testing.T) {
	t.Parallel()
	got, err := strictSchema(json.RawMessage(chat.AnswerSchema))
	if err != nil {
		t.Fatal(err)
	}
	if s := string(got); strings.Contains(s, "minLength") || strings.Contains(s, "maxLength") || !strings.Contains(s, `"maxItems":20`) {
		t.Errorf("strict answer schema = %s", s)
	}
	// A property that happens to be named like a keyword stays.
	got, err = strictSchema(json.RawMessage(`{"type":"object","properties":{"maxLength":{"type":"string","maxLength":3}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"properties":{"maxLength":{"type":"string"}},"type":"object"}`; string(got) != want {
		t.Errorf("strictSchema = %s, want %s", got, want)
	}
}

func TestUsageAndCost(t *testing.T) {
	t.Parallel()
	b, err := New(Config{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	u := tokenUsage{InputTokens: 1_000_000, CachedInputTokens: 400_000, OutputTokens: 100_000}
	got := b.usage("gpt-5-2025-08-07", u, 3)
	// 600k * 1.25 + 400k * 0.125 + 100k * 10, per million.
	if got.CostUSD == nil || *got.CostUSD != 0.75+0.05+1 || got.Calls != 3 || got.InputTokens != 1_000_000 {
		t.Errorf("usage of a dated gpt-5 = %+v (cost %v)", got, got.CostUSD)
	}
	got = b.usage("my-local-model", u, 1)
	if got.CostUSD != nil || got.CostReason != "no price known for model my-local-model" {
		t.Errorf("usage of an unknown model = %+v", got)
	}
}

func TestArgs(t *testing.T) {
	t.Parallel()
	b, err := New(Config{Home: t.TempDir(), Model: "m1", ExtraArgs: []string{"--disable", "plugins"}})
	if err != nil {
		t.Fatal(err)
	}
	req := chat.RunRequest{Dir: "/run/dir", Prompt: "-q", System: `say "hi" <b>`, Session: chat.SessionRef{ID: strings.ToUpper(parentID)}}
	common := []string{"--json", "--skip-git-repo-check", "-c", `approval_policy="never"`, "--disable", "shell_snapshot", "--output-schema", "/s.json", "-m", "m1", "--disable", "plugins", "--"}
	for _, tc := range []struct {
		verb   string
		want   []string
		prompt string
	}{
		{"start", slices.Concat([]string{"exec", "-C", "/run/dir", "-s", "read-only", "-c", `developer_instructions="say \"hi\" <b>"`}, common, []string{"-"}), "-q"},
		{"resume", slices.Concat([]string{"exec", "resume", "-c", `sandbox_mode="read-only"`}, common, []string{parentID, "-"}), "-q"},
		{"fork", slices.Concat([]string{"exec", "fork", "-c", `sandbox_mode="read-only"`}, common, []string{parentID, "-"}), "say \"hi\" <b>\n\n-q"},
	} {
		args, prompt, err := b.args(tc.verb, req, "/s.json")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, args); diff != "" {
			t.Errorf("%s args (-want +got):\n%s", tc.verb, diff)
		}
		if prompt != tc.prompt {
			t.Errorf("%s prompt = %q, want %q", tc.verb, prompt, tc.prompt)
		}
	}
}

func TestTOMLString(t *testing.T) {
	t.Parallel()
	got, err := tomlString("say \"hi\"\n\t<b> & \x7f \\ é")
	if want := `"say \"hi\"\n\t<b> & \u007f \\ é"`; err != nil || got != want {
		t.Errorf("tomlString = %s, %v; want %s", got, err, want)
	}
}

// TestParserNotesOnce: an error the CLI reports twice (as when it
// reconnects) is one note.
func TestParserNotesOnce(t *testing.T) {
	t.Parallel()
	var notes []string
	p := &parser{verb: "start", prefix: "c1.", emit: func(e chat.Event) {
		if e.Type == chat.EventNote {
			notes = append(notes, e.Text)
		}
	}}
	for _, msg := range []string{"stream disconnected; retrying", "stream disconnected; retrying", "rate limited"} {
		p.line([]byte(`{"type":"item.completed","item":{"id":"item_0","type":"error","message":"` + msg + `"}}`))
	}
	if want := []string{"codex: stream disconnected; retrying", "codex: rate limited"}; !slices.Equal(notes, want) {
		t.Errorf("notes = %q, want %q", notes, want)
	}
}

// TestMoveOffset moves a fork's pointer into its parent's rollout to the
// same line of the parent as restored into a run directory of another
// length.
func TestMoveOffset(t *testing.T) {
	parent := chat.SessionFile{SessionID: "p", Cwd: "/laptop/r", Data: []byte(`{"cwd":"/laptop/r"}` + "\n" + `{"p":"/laptop/r/a.go"}` + "\n" + `{"x":1}` + "\n")}
	// On the worker where the fork ran, the parent's first two lines
	// were those of /w1 (16+15 bytes).
	then := string(agentsession.MapDir(parent.Data, parent.Cwd, "/w1"))
	offset := strings.Index(then, `{"x":1}`)
	child := []byte(`{"type":"session_meta","payload":{"history_base":{"thread_id":"p","end_byte_offset":` + strconv.Itoa(offset) + `}}}` + "\n" + `{"y":2}` + "\n")
	got := string(moveOffset(child, int64(offset), parent, "/w1", "/worker-two/run"))
	now := string(agentsession.MapDir(parent.Data, parent.Cwd, "/worker-two/run"))
	want := strings.Replace(string(child), "end_byte_offset\":"+strconv.Itoa(offset), "end_byte_offset\":"+strconv.Itoa(strings.Index(now, `{"x":1}`)), 1)
	if got != want || got == string(child) {
		t.Errorf("moveOffset =\n%s\nwant\n%s", got, want)
	}
}
