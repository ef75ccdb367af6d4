package chat

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// linkForge is a Forge whose line links are its own: the reply takes the
// forge's form of link (package forge/github and forge/gitlab test theirs).
type linkForge struct{ Forge }

func (linkForge) LineLink(repoURL, commit, path string, start, end int) string {
	return fmt.Sprintf("%s/at/%s/%s?lines=%d..%d", repoURL, commit, path, start, end)
}

func TestParseAsk(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body, question string
		ok             bool
	}{
		{"/ask Why?", "Why?", true},
		{"  \n/ask\tWhy\nthis?  ", "Why\nthis?", true},
		{"/ask", "", true},
		{"/asking why", "", false},
		{"/ask-me", "", false},
		{"Please /ask why", "", false},
		{"", "", false},
	} {
		q, ok := ParseAsk(c.body)
		if q != c.question || ok != c.ok {
			t.Errorf("ParseAsk(%q) = %q, %v; want %q, %v", c.body, q, ok, c.question, c.ok)
		}
	}
}

func TestReplyBody(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	end := start.Add(12300 * time.Millisecond)
	cost := 0.01234
	ok := Turn{
		ID: "t1", State: StateSucceeded, Backend: "claude-code", Session: SessionForked, StartedAt: &start, FinishedAt: &end,
		Usage: Usage{CostUSD: &cost},
		Answer: &Answer{
			AnswerMarkdown: "It is racy.\n/ask again\n  /close\n```sh\n/bin/true\n```\n/done",
			Citations:      []Citation{{Path: "dir/a b.go", StartLine: 3, EndLine: 9}, {Path: "c.go", StartLine: 2, EndLine: 2}},
			SuggestsFix:    &Fix{Summary: "/lock it"},
		},
		Note: "A note.\n/with a slash",
	}
	body := ReplyBody(ReplyInput{Turn: ok, HTMLURL: "https://forge.example/o/r", HeadSHA: "abc", Forge: linkForge{}})
	for _, want := range []string{
		"It is racy.",
		"[`dir/a b.go` lines 3–9](https://forge.example/o/r/at/abc/dir/a b.go?lines=3..9)",
		"[`c.go` line 2](https://forge.example/o/r/at/abc/c.go?lines=2..2)",
		"**Suggested fix**", `\/lock it`,
		"> A note.",
		"<sub>prchat · claude-code · forked the review's session · 12.3s · $0.0123</sub>",
		ReplyMarker("t1"),
		"\u200b/bin/true",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("reply lacks %q:\n%s", want, body)
		}
	}
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "/") {
			t.Errorf("line starts with /: %q", l)
		}
	}
	if strings.Contains(body, "incomplete") {
		t.Errorf("a complete answer is marked incomplete")
	}

	cut := ReplyBody(ReplyInput{Turn: ok, Truncated: true})
	if !strings.HasPrefix(cut, "> **This answer is incomplete**") {
		t.Errorf("a truncated answer does not say so first:\n%s", cut)
	}

	plain := ReplyBody(ReplyInput{Turn: ok, HTMLURL: "https://forge.example/o/r", HeadSHA: "abc"})
	if !strings.Contains(plain, "* `c.go` line 2\n") || strings.Contains(plain, "](") {
		t.Errorf("without a forge, citations are not links:\n%s", plain)
	}

	failed := ReplyBody(ReplyInput{Turn: Turn{ID: "t2", State: StateFailed, Reason: ReasonTimeout, Note: "the turn took longer than 10m0s"}})
	for _, want := range []string{"prchat could not answer this question: the agent took longer than the time limit of a question.", "> the turn took longer than 10m0s", ReplyMarker("t2")} {
		if !strings.Contains(failed, want) {
			t.Errorf("failed reply lacks %q:\n%s", want, failed)
		}
	}
	unreviewed := ReplyBody(ReplyInput{Turn: ok, Unreviewed: true})
	if !strings.Contains(unreviewed, "No review was recorded for this pull request, so claude-code answered") {
		t.Errorf("unreviewed reply:\n%s", unreviewed)
	}
}
