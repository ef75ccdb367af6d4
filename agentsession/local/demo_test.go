package local_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/local"
	"github.com/prchat/prchat/chat"
)

// The README's first conversation: a PR whose parseConfig now refuses an
// empty path with an error the PR never declares.
const (
	demoBase = "package main\n\nfunc parseConfig(path string) error {\n\treturn nil\n}\n"
	demoHead = "package main\n\n// parseConfig reads the config file.\nfunc parseConfig(path string) error {\n\tif path == \"\" {\n\t\treturn errEmpty\n\t}\n\treturn nil\n}\n"
)

func TestREADMEDemo(t *testing.T) {
	t.Parallel()
	repo := agentsessiontest.NewRepo(t, map[string]string{"main.go": demoBase}, map[string]string{"main.go": demoHead})
	b := local.New(local.Config{})
	review := chat.Review{HeadSHA: repo.Head(), BaseSHA: repo.Commits[0]}
	ask := func(q string) chat.Answer {
		t.Helper()
		res, err := b.Run(context.Background(), chat.RunRequest{Mode: chat.SessionNone, Dir: repo.Dir, Question: q, Review: review}, func(chat.Event) {})
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		a, err := agentsessiontest.ParseAnswer([]byte(res.Text))
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		return a
	}
	guard := []chat.Citation{{Path: "main.go", StartLine: 5, EndLine: 6}}
	for _, c := range []struct {
		q     string
		facts []string
		cites []chat.Citation
	}{
		{"Why does parseConfig return errEmpty?",
			[]string{"`parseConfig` returns `errEmpty` when `path == \"\"`", "the guard on `main.go` line 5", "line (6)", "declared nowhere in the head commit"}, guard},
		{"Where is errEmpty declared?",
			[]string{"`errEmpty` is declared nowhere in the head commit", "undefined where `parseConfig` uses it (`main.go` line 6)", "does not compile"},
			[]chat.Citation{{Path: "main.go", StartLine: 6, EndLine: 6}}},
		{"And where is errEmpty declared?", []string{"`errEmpty` is declared nowhere in the head commit"}, []chat.Citation{{Path: "main.go", StartLine: 6, EndLine: 6}}},
		{"What happens when path is empty?",
			[]string{"When `path == \"\"`, `parseConfig` returns `errEmpty`", "the guard on `main.go` line 5"}, guard},
		{"What changed in parseConfig?", []string{"`parseConfig` changed", "lines 3, 5-7 are new or changed"},
			[]chat.Citation{{Path: "main.go", StartLine: 3, EndLine: 3}, {Path: "main.go", StartLine: 5, EndLine: 7}}},
	} {
		a := ask(c.q)
		for _, f := range c.facts {
			if !strings.Contains(a.AnswerMarkdown, f) {
				t.Errorf("%q: the answer lacks %q:\n%s", c.q, f, a.AnswerMarkdown)
			}
		}
		if !strings.Contains(a.AnswerMarkdown, "This backend reads the code's structure; no model read it") {
			t.Errorf("%q: the answer does not say where it comes from:\n%s", c.q, a.AnswerMarkdown)
		}
		if diff := cmp.Diff(c.cites, a.Citations); diff != "" {
			t.Errorf("%q: citations (-want +got):\n%s\n%s", c.q, diff, a.AnswerMarkdown)
		}
	}
}
