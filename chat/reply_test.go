package chat

import (
	"strings"
	"testing"
	"time"
)

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
	body := ReplyBody(ReplyInput{Turn: ok, HTMLURL: "https://github.com/o/r", HeadSHA: "abc", Forge: ForgeGitHub})
	for _, want := range []string{
		"It is racy.",
		"[`dir/a b.go` lines 3–9](https://github.com/o/r/blob/abc/dir/a%20b.go#L3-L9)",
		"[`c.go` line 2](https://github.com/o/r/blob/abc/c.go#L2-L2)",
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

	gl := ReplyBody(ReplyInput{Turn: ok, HTMLURL: "https://gitlab.com/g/p", HeadSHA: "abc", Forge: ForgeGitLab})
	if !strings.Contains(gl, "(https://gitlab.com/g/p/-/blob/abc/c.go#L2-2)") {
		t.Errorf("GitLab link:\n%s", gl)
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
