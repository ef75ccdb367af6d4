package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/prchat/prchat/agentsession/fakeapi/chatcompletions"
	"github.com/prchat/prchat/chat"
)

// TestDashboardConversationScreenshot shows the README's conversation: two
// questions about a review, answered by the openai backend (a fake of the
// OpenAI API, the real client and tools) after it searched and read the
// code, rendered with their citations, suggested fix and footer. It is no
// test page: nothing in it probes the sanitiser (TestDashboardInABrowser
// does). With
// -readme-screenshot it writes docs/dashboard-conversation.png.
func TestDashboardConversationScreenshot(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	fake := chatcompletions.NewServer()
	defer fake.Close()
	e := setup(t, mode{name: "embedded"}, func(c *Config) {
		c.OpenAIBaseURL = fake.URL
		c.OpenAIAPIKey = "sk-screenshot-Vb7Tz2Lw9Kx1Rm4Np6Yq"
		c.OpenAIModel = "gpt-4.1"
	})
	fake.Push(
		chatcompletions.Reply{ToolCalls: []chatcompletions.ToolCall{{Name: "search_code", Arguments: `{"query":"errEmptyPath"}`}}},
		chatcompletions.Reply{ToolCalls: []chatcompletions.ToolCall{{Name: "read_file", Arguments: `{"path":"settings/settings.go"}`}}},
		chatcompletions.Reply{JSON: &chat.Answer{
			AnswerMarkdown: "Because an empty path is almost always a caller's mistake, not a request for defaults.\n\n" +
				"`Load` now checks `path` before it opens anything and returns `errEmptyPath` at once. " +
				"Falling back to a default file would hide the mistake: the program would start with settings " +
				"nobody asked for, and the first sign would be a wrong value much later.\n\n" +
				"- `main` passes `app.toml` explicitly, so the check never fires on the normal start-up path.\n" +
				"- `errEmptyPath` is a package variable, so callers can test for it with `errors.Is`.",
			Citations:   []chat.Citation{{Path: "settings/settings.go", StartLine: 8, EndLine: 12}, {Path: "main.go", StartLine: 3, EndLine: 5}},
			SuggestsFix: &chat.Fix{Summary: "Name the setting in the error (\"settings path is empty\") so the log says which input was missing."},
		}},
		chatcompletions.Reply{ToolCalls: []chatcompletions.ToolCall{{Name: "read_file", Arguments: `{"path":"main.go"}`}}},
		chatcompletions.Reply{JSON: &chat.Answer{
			AnswerMarkdown: "Yes. A path of only spaces passes the check today and fails later, when the file is opened, " +
				"with a less helpful error. Trimming first keeps the two cases together:\n\n" +
				"```go\nif strings.TrimSpace(path) == \"\" {\n\treturn errEmptyPath\n}\n```",
			Citations: []chat.Citation{{Path: "settings/settings.go", StartLine: 9, EndLine: 11}},
		}},
	)
	v := e.review("openai", map[string]any{"model": "gpt-4.1", "markdown": "## Review\n\n`Load` now refuses an empty path with `errEmptyPath` instead of reading the current directory."})
	conv, _ := e.ask(v, "Why does Load return errEmptyPath instead of falling back to a default settings file?")
	if got := e.wait(conv, 1); got.State != "succeeded" {
		t.Fatalf("turn 1: %+v", got)
	}
	e.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "Should it also refuse a path of only spaces?"}, 202, nil)
	if got := e.wait(conv, 2); got.State != "succeeded" {
		t.Fatalf("turn 2: %+v", got)
	}

	b.run("open conversation", chromedp.Navigate(e.url+"/ui/conversations/"+conv),
		chromedp.WaitVisible(chromedp.CSS("#turn-2 .answer")))
	for sel, want := range map[string]string{
		"#turn-1 .answer": "almost always a caller's mistake",
		"#turn-1 .fix":    "Name the setting in the error",
		"#turn-1 .meta":   "openai",
		"#turn-2 .answer": "strings.TrimSpace(path)",
	} {
		if got := b.text(sel); !strings.Contains(got, want) {
			t.Errorf("%s = %q, want %q in it", sel, got, want)
		}
	}
	if n := eval[int](b, `document.querySelectorAll("#turn-1 a.cite").length`); n != 2 {
		t.Errorf("turn 1 shows %d citations, want 2", n)
	}
	shot := b.shot("readme-conversation")
	b.noProblems("conversation")
	if *readmeScreenshot {
		copyFile(t, shot, filepath.Join("..", "..", "docs", "dashboard-conversation.png"))
	}
}
