package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/local"
	"github.com/prchat/prchat/chat"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	agentsessiontest.Run(t, agentsessiontest.Harness{
		New: func(*testing.T) chat.Backend { return local.New(local.Config{}) },
	})
}

// writeTree writes files (slash paths to contents) under a new temporary
// directory and returns it.
func writeTree(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// ask runs the local backend on question in dir and returns the answer and
// the events.
func ask(t testing.TB, dir, question string, focus *chat.Focus) (chat.Answer, []chat.Event, chat.RunResult) {
	t.Helper()
	var events []chat.Event
	res, err := local.New(local.Config{}).Run(context.Background(), chat.RunRequest{
		Mode: chat.SessionNone, Dir: dir, Question: question, Focus: focus,
	}, func(e chat.Event) { events = append(events, e) })
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	a, err := agentsessiontest.ParseAnswer([]byte(res.Text))
	if err != nil {
		t.Fatalf("answer: %v\n%s", err, res.Text)
	}
	return a, events, res
}

const configGo = `package config

// Config holds the settings.
type Config struct {
	MaxRetries int
}

// parseConfig reads the settings.
func parseConfig(lines []string) (*Config, error) {
	c := &Config{MaxRetries: 3}
	return c, nil
}
`

const mainGo = `package main

func main() {
	c, _ := parseConfig(nil)
	_ = c
}
`

func TestFindsIdentifier(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, map[string]string{
		"config/config.go": configGo,
		"main.go":          mainGo,
		"README.md":        "# app\n\nNothing here.\n",
	})
	a, events, res := ask(t, dir, "Where is parseConfig defined?", nil)
	if len(a.Citations) == 0 {
		t.Fatalf("no citations:\n%s", a.AnswerMarkdown)
	}
	// The structure answers: the definition with its doc comment, lines 8-12.
	if diff := cmp.Diff([]chat.Citation{{Path: "config/config.go", StartLine: 8, EndLine: 12}}, a.Citations); diff != "" {
		t.Errorf("citations (-want +got):\n%s", diff)
	}
	for _, want := range []string{"`parseConfig` is declared in `config/config.go` line 9", "this backend reads the code's structure; no model read it"} {
		if !strings.Contains(strings.ToLower(a.AnswerMarkdown), strings.ToLower(want)) {
			t.Errorf("answer lacks %q:\n%s", want, a.AnswerMarkdown)
		}
	}
	if res.SessionID != "" || res.Usage.Calls != 0 || res.Usage.InputTokens != 0 || res.Usage.CostUSD == nil || *res.Usage.CostUSD != 0 {
		t.Errorf("result = session %q, usage %+v; want no session and a cost of 0", res.SessionID, res.Usage)
	}

	var types []string
	for _, e := range events {
		types = append(types, e.Type)
	}
	if diff := cmp.Diff([]string{chat.EventToolStart, chat.EventToolResult, chat.EventTextDelta}, types); diff != "" {
		t.Fatalf("event types (-want +got):\n%s", diff)
	}
	if events[0].ToolName != "code_structure" || events[1].ToolID != events[0].ToolID {
		t.Errorf("tool events = %+v, %+v", events[0], events[1])
	}
	if want := "definition question about parseConfig: 1 citation (indexed 2 source files, 0.0 MB)"; events[1].Summary != want {
		t.Errorf("summary = %q, want %q", events[1].Summary, want)
	}
	if events[2].Text != a.AnswerMarkdown {
		t.Errorf("text_delta differs from the answer")
	}
}

func TestCitationsStayInFile(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, map[string]string{
		"a.txt":    "zebraQuux",           // one line, no newline
		"b.txt":    "x\nzebraQuux\n",      // match on the last line
		"c/d.go":   "zebraQuux\n\n\n\n\n", // match on the first line
		"empty.go": "",
	})
	a, _, _ := ask(t, dir, "what is zebraQuux", nil)
	want := []chat.Citation{
		{Path: "a.txt", StartLine: 1, EndLine: 1},
		{Path: "b.txt", StartLine: 1, EndLine: 2},
		{Path: "c/d.go", StartLine: 1, EndLine: 3},
	}
	if diff := cmp.Diff(want, a.Citations); diff != "" {
		t.Errorf("citations (-want +got):\n%s", diff)
	}
}

func TestAtMostFiveCitations(t *testing.T) {
	t.Parallel()
	files := map[string]string{}
	for i := range 12 {
		files[fmt.Sprintf("f%02d.go", i)] = strings.Repeat("// retryBudget\n\n\n\n\n\n\n\n", 4)
	}
	a, _, _ := ask(t, writeTree(t, files), "how is retryBudget used?", nil)
	if len(a.Citations) != 5 {
		t.Errorf("%d citations, want 5", len(a.Citations))
	}
	if !strings.Contains(a.AnswerMarkdown, "and 2 more files") {
		t.Errorf("answer does not mention the other files:\n%s", a.AnswerMarkdown)
	}
}

func TestSkipRules(t *testing.T) {
	t.Parallel()
	const needle = "needleIdent"
	big := strings.Repeat("filler line of text\n", 30_000) + needle + "\n" // over 512 KiB
	minified := "var a=1;" + strings.Repeat("b=2;", 2000) + needle + ";"
	dir := writeTree(t, map[string]string{
		"real.go":                      "package real\n\nvar needleIdent = 1\n",
		".git/config":                  needle,
		".prchat/review.md":            needle,
		"node_modules/lib/index.js":    needle,
		"vendor/x/y.go":                needle,
		"sub/node_modules/z.js":        needle,
		"gen.go":                       "// Code generated by protoc. DO NOT EDIT.\n\nvar needleIdent = 2\n",
		"api.pb.go":                    needle,
		"app.min.js":                   needle,
		"bundle.js":                    minified,
		"blob.dat":                     "abc\x00def " + needle,
		"big.txt":                      big,
		"package-lock.json":            needle,
		"image.png":                    needle,
		"docs/notes.md":                "mentions needleIdent too\n",
		"internal/.prchat/not-skipped": "", // an empty file matches nothing
		"internal/vendorized/ok.go":    "// needleIdent in a folder that merely starts with vendor\n",
	})
	if err := os.Symlink(filepath.Join(dir, "real.go"), filepath.Join(dir, "link.go")); err != nil {
		t.Fatal(err)
	}
	a, events, _ := ask(t, dir, "Which files mention needleIdent?", nil)
	var got []string
	for _, c := range a.Citations {
		got = append(got, c.Path)
	}
	want := []string{"real.go", "docs/notes.md", "internal/vendorized/ok.go"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cited files (-want +got):\n%s\n%s", diff, a.AnswerMarkdown)
	}
	if events[3].Summary != "3 matches in 3 files" {
		t.Errorf("summary = %q, want 3 matches in 3 files", events[3].Summary)
	}
}

func TestWordForms(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, map[string]string{
		"a.go": "package a\n\n// retry once\nconst x = 1\n",
		"b.md": "Retries are bounded.\n",
		"c.go": "package c\n\n// unrelated\n",
	})
	a, _, _ := ask(t, dir, "How many retries?", nil)
	var paths []string
	for _, c := range a.Citations {
		paths = append(paths, c.Path)
	}
	if diff := cmp.Diff([]string{"a.go", "b.md"}, paths); diff != "" {
		t.Errorf("cited files for retries (-want +got):\n%s", diff)
	}
	a, _, _ = ask(t, dir, "Where is retryPolicy applied to the retries?", nil)
	if !strings.Contains(a.AnswerMarkdown, "Nothing matches `retryPolicy` or `applied`.") {
		t.Errorf("the answer does not say which terms matched nothing:\n%s", a.AnswerMarkdown)
	}
}

func TestNoMatch(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, map[string]string{"main.go": mainGo})
	a, events, res := ask(t, dir, "Why does the frobnicator use `quuxHandler`?", nil)
	if len(a.Citations) != 0 {
		t.Errorf("citations = %+v, want none", a.Citations)
	}
	if !strings.Contains(res.Text, `"citations":[]`) {
		t.Errorf("citations are not an empty array: %s", res.Text)
	}
	if !strings.HasPrefix(a.AnswerMarkdown, "I cannot answer this from the code's structure") ||
		!strings.Contains(a.AnswerMarkdown, "I found no code in the checkout that matches `quuxHandler` or `frobnicator`.") {
		t.Errorf("answer:\n%s", a.AnswerMarkdown)
	}
	if len(events) != 5 || events[2].ToolName != "search_code" || events[3].Summary != "0 matches in 0 files" {
		t.Errorf("events = %+v", events)
	}

	a, _, _ = ask(t, dir, "Why?", nil)
	if len(a.Citations) != 0 || !strings.Contains(a.AnswerMarkdown, "names no identifiers") {
		t.Errorf("answer to a question without terms = %+v", a)
	}
}

func TestFileNameAndFocus(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, map[string]string{
		"util.go":     strings.Repeat("// helpers\n", 20),
		"a/limits.go": "package a\n\n// limit of the queue\nconst limit = 3\n",
		"b/limits.go": "package b\n\n// limit of the queue\nconst limit = 3\n",
	})
	a, _, _ := ask(t, dir, "What is util.go for?", nil)
	if want := []chat.Citation{{Path: "util.go", StartLine: 1, EndLine: 10}}; !cmp.Equal(want, a.Citations) {
		t.Errorf("citations = %+v, want the start of util.go\n%s", a.Citations, a.AnswerMarkdown)
	}

	// Without a focus a/ wins the tie by its path; the focus turns it.
	a, _, _ = ask(t, dir, "what is the queue limit?", nil)
	if len(a.Citations) == 0 || a.Citations[0].Path != "a/limits.go" {
		t.Fatalf("citations without focus = %+v", a.Citations)
	}
	focus := &chat.Focus{Kind: chat.FocusSection, Anchors: []chat.Anchor{{Path: "b/limits.go", StartLine: 4, EndLine: 4}}}
	a, _, _ = ask(t, dir, "what is the queue limit?", focus)
	if len(a.Citations) == 0 || a.Citations[0].Path != "b/limits.go" {
		t.Errorf("citations with focus on b/limits.go = %+v", a.Citations)
	}
}

func TestDeterministic(t *testing.T) {
	t.Parallel()
	files := map[string]string{}
	for i := range 200 {
		files[fmt.Sprintf("pkg%d/file%d.go", i%7, i)] = fmt.Sprintf("package p\n\nfunc handler%d() { retry(); parseConfig() }\n", i)
	}
	dir := writeTree(t, files)
	_, _, first := ask(t, dir, "how does parseConfig retry?", nil)
	for range 5 {
		if _, _, again := ask(t, dir, "how does parseConfig retry?", nil); again.Text != first.Text {
			t.Fatalf("answers differ:\n%s\n%s", first.Text, again.Text)
		}
	}
}

func TestNoSessions(t *testing.T) {
	t.Parallel()
	b := local.New(local.Config{})
	dir := writeTree(t, map[string]string{"main.go": mainGo})
	if err := b.HasSession(t.Context(), chat.SessionRef{ID: "x"}); !errors.Is(err, chat.ErrSessionGone) || !strings.Contains(err.Error(), "keeps no sessions") {
		t.Errorf("HasSession = %v", err)
	}
	for _, mode := range []chat.SessionMode{chat.SessionResumed, chat.SessionForked} {
		_, err := b.Run(t.Context(), chat.RunRequest{Mode: mode, Session: chat.SessionRef{ID: "x"}, Dir: dir, Question: "main"}, func(chat.Event) {})
		if !errors.Is(err, chat.ErrSessionGone) {
			t.Errorf("Run(%s) = %v, want ErrSessionGone", mode, err)
		}
	}
	if _, err := b.Run(t.Context(), chat.RunRequest{Dir: filepath.Join(dir, "nope"), Question: "main"}, func(chat.Event) {}); err == nil {
		t.Error("Run in a missing directory = nil error")
	}
}

// manyFiles writes a checkout of n source files of about 3 KB each.
func manyFiles(t testing.TB, n int) string {
	files := map[string]string{}
	var body strings.Builder
	for i := range 80 {
		fmt.Fprintf(&body, "\tvalue%d := compute(input, %d) // some ordinary code text\n", i, i)
	}
	for i := range n {
		content := fmt.Sprintf("package p%d\n\nfunc work%d(input int) int {\n%s\treturn 0\n}\n", i%50, i, body.String())
		if i == n/2 {
			content += "\nfunc parseConfig(lines []string) {}\n"
		}
		files[fmt.Sprintf("pkg%02d/sub%d/file%d.go", i%50, i%7, i)] = content
	}
	return writeTree(t, files)
}

// TestAnswersOnThousandsOfFiles: a question on a checkout of thousands of
// files finds its definition. How long it takes is measured by
// BenchmarkSearch3000Files, never asserted here.
func TestAnswersOnThousandsOfFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("slow setup")
	}
	dir := manyFiles(t, 3000)
	ask(t, dir, "warm the cache: parseConfig", nil)
	start := time.Now()
	a, _, _ := ask(t, dir, "Where is parseConfig defined and how does it handle max_retries?", nil)
	took := time.Since(start)
	t.Logf("3000 files: %v", took)
	if len(a.Citations) == 0 || !strings.HasSuffix(a.Citations[0].Path, "file1500.go") {
		t.Errorf("citations = %+v", a.Citations)
	}
}

func BenchmarkSearch3000Files(b *testing.B) {
	dir := manyFiles(b, 3000)
	for b.Loop() {
		ask(b, dir, "Where is parseConfig defined and how does it handle max_retries?", nil)
	}
}

// TestUnansweredSaysSo: a question the structure cannot answer gets the
// text search and says so; one about a name the code does not have says
// that, and claims nothing about it.
func TestUnansweredSaysSo(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, map[string]string{"config/config.go": configGo, "main.go": mainGo})
	for _, q := range []string{"How fast is the settings reader on a cold disk?", "Where is quuxHandler declared?"} {
		a, events, _ := ask(t, dir, q, nil)
		if !strings.HasPrefix(a.AnswerMarkdown, "I cannot answer this from the code's structure (") ||
			!strings.Contains(a.AnswerMarkdown, "this is the best text search I have") {
			t.Errorf("%q: the answer does not say the structure did not answer it:\n%s", q, a.AnswerMarkdown)
		}
		if len(events) != 5 || events[2].ToolName != "search_code" {
			t.Errorf("%q: events = %+v, want the structure and then the search", q, events)
		}
	}
	a, _, _ := ask(t, dir, "Why does parseConfig return errQuux?", nil)
	for _, want := range []string{"No return statement of `parseConfig` yields `errQuux`.", "Nothing in the head commit declares or uses `errQuux`.", "`return c, nil`"} {
		if !strings.Contains(a.AnswerMarkdown, want) {
			t.Errorf("the answer lacks %q:\n%s", want, a.AnswerMarkdown)
		}
	}
}

// TestBaseSideFocus: lines of the base (lines the PR removed) are not read
// at the head, where those numbers are other lines: the focus keeps only
// their file.
func TestBaseSideFocus(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, map[string]string{
		"a/limits.go": "package a\n\n// limit of the queue\nconst limit = 3\n\nfunc Limit() int {\n\treturn limit\n}\n",
	})
	head := &chat.Focus{Kind: chat.FocusSection, Anchors: []chat.Anchor{{Path: "a/limits.go", StartLine: 6, EndLine: 7}}}
	a, _, _ := ask(t, dir, "What do these lines do?", head)
	if !strings.Contains(a.AnswerMarkdown, "Lines 6-7 of") {
		t.Errorf("head lines: the answer does not read lines 6-7:\n%s", a.AnswerMarkdown)
	}
	base := &chat.Focus{Kind: chat.FocusSection, Anchors: []chat.Anchor{{Path: "a/limits.go", StartLine: 6, EndLine: 7, Side: chat.SideBase}}}
	a, _, _ = ask(t, dir, "What do these lines do?", base)
	if strings.Contains(a.AnswerMarkdown, "Lines 6-7 of") || len(a.Citations) == 0 || a.Citations[0].Path != "a/limits.go" {
		t.Errorf("base lines were read at the head, or their file was lost: %+v\n%s", a.Citations, a.AnswerMarkdown)
	}
}
