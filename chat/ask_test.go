package chat

import (
	"strings"
	"testing"
)

func TestAskValidate(t *testing.T) {
	t.Parallel()
	anchors := func(n int) []Anchor {
		out := make([]Anchor, n)
		for i := range out {
			out[i] = Anchor{Path: "a.go", StartLine: 1, EndLine: 2}
		}
		return out
	}
	tests := []struct {
		name string
		ask  Ask
		want Code // "" = valid
	}{
		{"plain", Ask{Question: "Why?"}, ""},
		{"4000 runes", Ask{Question: strings.Repeat("é", 4000)}, ""},
		{"4001 runes", Ask{Question: strings.Repeat("é", 4001)}, CodeInvalid},
		{"empty", Ask{Question: ""}, CodeInvalid},
		{"blank", Ask{Question: " \n\t"}, CodeInvalid},
		{"invalid utf8", Ask{Question: "why \xff?"}, CodeInvalid},
		{"focus section", Ask{Question: "q", Focus: &Focus{Kind: "section", ID: "s1"}}, ""},
		{"focus stop", Ask{Question: "q", Focus: &Focus{Kind: "stop", Anchors: anchors(20)}}, ""},
		{"focus overview", Ask{Question: "q", Focus: &Focus{Kind: "overview"}}, ""},
		{"focus kind", Ask{Question: "q", Focus: &Focus{Kind: "file"}}, CodeInvalid},
		{"21 anchors", Ask{Question: "q", Focus: &Focus{Kind: "stop", Anchors: anchors(21)}}, CodeInvalid},
		{"absolute path", Ask{Question: "q", Focus: &Focus{Kind: "stop", Anchors: []Anchor{{Path: "/etc/passwd"}}}}, CodeInvalid},
		{"dotdot path", Ask{Question: "q", Focus: &Focus{Kind: "stop", Anchors: []Anchor{{Path: "../x.go"}}}}, CodeInvalid},
		{"inner dotdot", Ask{Question: "q", Focus: &Focus{Kind: "stop", Anchors: []Anchor{{Path: "a/../../x.go"}}}}, CodeInvalid},
		{"unclean path", Ask{Question: "q", Focus: &Focus{Kind: "stop", Anchors: []Anchor{{Path: "./a.go"}}}}, CodeInvalid},
		{"backslash", Ask{Question: "q", Focus: &Focus{Kind: "stop", Anchors: []Anchor{{Path: `a\b.go`}}}}, CodeInvalid},
		{"reversed lines", Ask{Question: "q", Focus: &Focus{Kind: "stop", Anchors: []Anchor{{Path: "a.go", StartLine: 5, EndLine: 2}}}}, CodeInvalid},
		{"nested path", Ask{Question: "q", Focus: &Focus{Kind: "stop", Anchors: []Anchor{{Path: "cmd/x/main.go", StartLine: 5, EndLine: 9}}}}, ""},
		{"head side", Ask{Question: "q", Focus: &Focus{Kind: "stop", Anchors: []Anchor{{Path: "a.go", StartLine: 5, Side: SideHead}}}}, ""},
		{"base side", Ask{Question: "q", Focus: &Focus{Kind: "stop", Anchors: []Anchor{{Path: "a.go", StartLine: 5, EndLine: 6, Side: SideBase}}}}, ""},
		{"left side", Ask{Question: "q", Focus: &Focus{Kind: "stop", Anchors: []Anchor{{Path: "a.go", StartLine: 5, Side: "LEFT"}}}}, CodeInvalid},
		{"Base side", Ask{Question: "q", Focus: &Focus{Kind: "stop", Anchors: []Anchor{{Path: "a.go", Side: "Base"}}}}, CodeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.ask.Validate()
			if got := ErrorCode(err); got != tt.want {
				t.Fatalf("Validate() code = %q (%v), want %q", got, err, tt.want)
			}
		})
	}
}

func TestReviewValidate(t *testing.T) {
	t.Parallel()
	known := KnownBackends()
	good := Review{PR: 1, HeadSHA: "0123456789abcdef0123456789abcdef01234567"}
	tests := []struct {
		name   string
		modify func(r *Review)
		want   Code
	}{
		{"good", func(r *Review) {}, ""},
		{"pr zero", func(r *Review) { r.PR = 0 }, CodeInvalid},
		{"no head", func(r *Review) { r.HeadSHA = "" }, CodeInvalid},
		{"bad head", func(r *Review) { r.HeadSHA = "main" }, CodeInvalid},
		{"bad base", func(r *Review) { r.BaseSHA = "HEAD~1" }, CodeInvalid},
		{"known backend", func(r *Review) { r.Backend = "codex" }, ""},
		{"unknown backend", func(r *Review) { r.Backend = "gemini" }, CodeUnsupportedBackend},
		{"section without id", func(r *Review) { r.Sections = []Section{{Title: "x"}} }, CodeInvalid},
		{"section bad anchor", func(r *Review) { r.Sections = []Section{{ID: "a", Anchors: []Anchor{{Path: "/x"}}}} }, CodeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := good
			tt.modify(&r)
			if got := ErrorCode(r.Validate(known)); got != tt.want {
				t.Fatalf("Validate() code = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTitle(t *testing.T) {
	t.Parallel()
	if got := Title("  Why   is\nthis here? "); got != "Why is this here?" {
		t.Errorf("Title = %q", got)
	}
	long := strings.Repeat("word ", 40)
	got := Title(long)
	if !strings.HasSuffix(got, "…") || len([]rune(got)) > 81 {
		t.Errorf("Title of a long question = %q", got)
	}
}
