package claude_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prchat/prchat/agentsession/fakeapi/anthropic"
	"github.com/prchat/prchat/chat"
)

// The benchmarks measure one turn through the real CLI against the fake
// API, through the backend and bare, to show what the backend adds:
//
//	go test ./agentsession/claude -run '^$' -bench . -benchtime 10x

// BenchmarkBackendRun is one seeded call through Backend.Run: the model
// answers at once through the structured output tool.
func BenchmarkBackendRun(b *testing.B) {
	f := setup(b)
	f.api.Handle(func(anthropic.Request) anthropic.Reply { return anthropic.Structured(theAnswer()) })
	dir := b.TempDir()
	req := request(dir, chat.SessionSeeded, chat.SessionRef{}, "Where is parseConfig?")
	for b.Loop() {
		res, err := f.b.Run(context.Background(), req, func(chat.Event) {})
		if err != nil || len(res.Structured) == 0 {
			b.Fatalf("Run = %v, structured %s", err, res.Structured)
		}
	}
}

// BenchmarkBareSameFlags runs the CLI directly with the command line the
// backend uses.
func BenchmarkBareSameFlags(b *testing.B) {
	f := setup(b)
	f.api.Handle(func(anthropic.Request) anthropic.Reply { return anthropic.Structured(theAnswer()) })
	dir := b.TempDir()
	args := []string{"-p", "--output-format", "stream-json", "--verbose",
		"--tools", "Read,Grep,Glob", "--permission-mode", "dontAsk",
		"--setting-sources", "user", "--strict-mcp-config", "--disable-slash-commands",
		"--system-prompt-snapshot", "off", "--json-schema", string(compactJSON(b, chat.AnswerSchema)),
		"--max-turns", "10", "--append-system-prompt", chat.System(), "--", "Where is parseConfig?"}
	bareLoop(b, f, dir, args)
}

// BenchmarkBareMinimal runs the plainest print-mode call: claude -p
// PROMPT, answered with text.
func BenchmarkBareMinimal(b *testing.B) {
	f := setup(b)
	f.api.Handle(func(anthropic.Request) anthropic.Reply { return anthropic.Text("parseConfig is in config/config.go") })
	bareLoop(b, f, b.TempDir(), []string{"-p", "Where is parseConfig?"})
}

func bareLoop(b *testing.B, f *fixture, dir string, args []string) {
	b.Helper()
	for b.Loop() {
		cmd := exec.Command(f.cfg.Bin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), f.env()...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("claude: %v\n%s", err, out)
		}
	}
}

// TestTiming compares one turn through Backend.Run with bare runs of the
// CLI, interleaved so that the load of a shared machine hits all alike. It
// runs only when PRCHAT_CLAUDE_TIMING is set (to the number of rounds).
func TestTiming(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("PRCHAT_CLAUDE_TIMING"))
	if rounds <= 0 {
		t.Skip("set PRCHAT_CLAUDE_TIMING=<rounds> to measure")
	}
	f := setup(t)
	f.api.Handle(func(r anthropic.Request) anthropic.Reply {
		if _, ok := r.Tool(anthropic.StructuredOutputTool); ok {
			return anthropic.Structured(theAnswer())
		}
		return anthropic.Text("parseConfig is in config/config.go")
	})
	dir := t.TempDir()
	req := request(dir, chat.SessionSeeded, chat.SessionRef{}, "Where is parseConfig?")
	same := []string{"-p", "--output-format", "stream-json", "--verbose",
		"--tools", "Read,Grep,Glob", "--permission-mode", "dontAsk",
		"--setting-sources", "user", "--strict-mcp-config", "--disable-slash-commands",
		"--system-prompt-snapshot", "off", "--json-schema", string(compactJSON(t, chat.AnswerSchema)),
		"--max-turns", "10", "--append-system-prompt", chat.System(), "--", "Where is parseConfig?"}
	bare := func(args []string) func() {
		return func() {
			cmd := exec.Command(f.cfg.Bin, args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), f.env()...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("claude: %v\n%s", err, out)
			}
		}
	}
	variants := []struct {
		name string
		do   func()
	}{
		{"Backend.Run (seeded, structured answer)", func() {
			if _, err := f.b.Run(t.Context(), req, func(chat.Event) {}); err != nil {
				t.Fatal(err)
			}
		}},
		{"bare claude, the backend's flags", bare(same)},
		{"bare claude -p PROMPT (text answer)", bare([]string{"-p", "Where is parseConfig?"})},
		{"bare claude -p PROMPT --output-format stream-json --verbose", bare([]string{"-p", "--output-format", "stream-json", "--verbose", "Where is parseConfig?"})},
	}
	took := make([][]time.Duration, len(variants))
	for range rounds {
		for i, v := range variants {
			start := time.Now()
			v.do()
			took[i] = append(took[i], time.Since(start))
		}
	}
	for i, v := range variants {
		d := took[i]
		slices.Sort(d)
		t.Logf("%-62s min %6.3fs  median %6.3fs  max %6.3fs  (n=%d)", v.name, d[0].Seconds(), d[len(d)/2].Seconds(), d[len(d)-1].Seconds(), len(d))
	}
}

func compactJSON(t testing.TB, raw []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
