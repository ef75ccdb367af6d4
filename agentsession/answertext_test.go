package agentsession_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prchat/prchat/agentsession"
)

// feed writes text to a new AnswerText in pieces of size bytes and returns
// what the reader sees and the pieces it came in.
func feed(text string, size int) (string, []string) {
	var a agentsession.AnswerText
	var out []string
	for len(text) > 0 {
		n := min(size, len(text))
		if s := a.Write(text[:n]); s != "" {
			out = append(out, s)
		}
		text = text[n:]
	}
	if s := a.Flush(); s != "" {
		out = append(out, s)
	}
	return strings.Join(out, ""), out
}

func TestAnswerText(t *testing.T) {
	t.Parallel()
	markdown := "`parseConfig` is in **config/config.go**:\n\n* it reads \"max_retries\" \\ with strconv.Atoi — ünïcödé 🙂, tab\there\u2028end"
	answer, err := json.Marshal(map[string]any{
		"citations":       []map[string]any{{"path": "config/config.go", "start_line": 14, "end_line": 30, "answer_markdown": "not this"}},
		"answer_markdown": markdown,
		"suggests_fix":    map[string]any{"answer_markdown": "nor this", "diff": "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	escaped := strings.NewReplacer("🙂", `\ud83d\ude42`, "ü", `\u00fc`, "/", `\/`).Replace(string(answer)) // escapes a client may write
	for name, tc := range map[string]struct{ in, want string }{
		"envelope":         {string(answer), markdown},
		"escaped":          {escaped, markdown},
		"fenced":           {"```json\n" + string(answer) + "\n```\n", markdown},
		"bare fence":       {"  ```\n" + string(answer) + "\n```", markdown},
		"prose":            {"I will read config/config.go first.", "I will read config/config.go first."},
		"prose with {":     {"Reading {config}.", "Reading {config}."},
		"other fence":      {"```go\nfunc x() {}\n```", "```go\nfunc x() {}\n```"},
		"short":            {"``", "``"},
		"no answer field":  {`{"citations":[],"answer":"x"}`, ""},
		"not a string":     {`{"answer_markdown":42,"x":"answer_markdown"}`, ""},
		"key in a value":   {`{"a":"answer_markdown","answer_markdown":"yes"}`, "yes"},
		"lone surrogate":   {`{"answer_markdown":"a\ud83db"}`, "a\uFFFDb"},
		"trailing garbage": {`{"answer_markdown":"done"} and more`, "done"},
	} {
		for _, size := range []int{1, 2, 3, 7, 48, len(tc.in)} {
			got, _ := feed(tc.in, size)
			if got != tc.want {
				t.Errorf("%s in pieces of %d: reader sees %q, want %q", name, size, got, tc.want)
			}
		}
	}

	// The answer streams: most pieces of the envelope add to it at once, and
	// no piece holds a broken rune.
	got, pieces := feed(string(answer), 5)
	if got != markdown || len(pieces) < len(markdown)/10 {
		t.Errorf("the answer came in %d pieces, want it streamed in about %d", len(pieces), len(markdown)/5)
	}
	for _, p := range pieces {
		if !utf8.ValidString(p) {
			t.Errorf("piece %q holds a broken rune", p)
		}
	}
}
