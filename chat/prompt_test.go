package chat

import (
	"strings"
	"testing"
)

// TestQuestionPromptNamesTheCommits: the prompt says which commit a
// focus's lines are in: the base commit for base-side anchors, the head
// commit (the checkout) for the others.
func TestQuestionPromptNamesTheCommits(t *testing.T) {
	t.Parallel()
	r := Review{HeadSHA: "1111111111111111111111111111111111111111", BaseSHA: "2222222222222222222222222222222222222222"}
	head := `anchors without "side": "base" are files and lines of the pull request's head commit ` + r.HeadSHA
	base := `anchors with "side": "base" are files and lines of the pull request's base commit ` + r.BaseSHA
	tests := []struct {
		name    string
		anchors []Anchor
		has     []string
		hasNot  []string
	}{
		{"head", []Anchor{{Path: "a.go", StartLine: 3, EndLine: 5}}, []string{head}, []string{base}},
		{"explicit head", []Anchor{{Path: "a.go", StartLine: 3, Side: SideHead}}, []string{head, `"side":"head"`}, []string{base}},
		{"base", []Anchor{{Path: "a.go", StartLine: 3, EndLine: 5, Side: SideBase}}, []string{base, `"side":"base"`}, []string{head}},
		{"both", []Anchor{{Path: "a.go", StartLine: 3, Side: SideBase}, {Path: "a.go", StartLine: 9}}, []string{head, base}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := QuestionPrompt(r, Ask{Question: "Why?", Focus: &Focus{Kind: FocusSection, Anchors: tt.anchors}})
			for _, want := range tt.has {
				if !strings.Contains(p, want) {
					t.Errorf("prompt lacks %q:\n%s", want, p)
				}
			}
			for _, not := range tt.hasNot {
				if strings.Contains(p, not) {
					t.Errorf("prompt has %q:\n%s", not, p)
				}
			}
			// The sentence is outside the untrusted focus.
			if i, j := strings.Index(p, "</focus>"), strings.Index(p, "The focus's anchors"); i < 0 || j < i {
				t.Errorf("the commits are not named after the focus:\n%s", p)
			}
		})
	}
	if p := QuestionPrompt(r, Ask{Question: "Why?"}); strings.Contains(p, "anchors") {
		t.Errorf("a question without a focus names anchors:\n%s", p)
	}
	// A seeded session's review sections mark their base-side lines.
	r.Sections = []Section{{ID: "s1", Anchors: []Anchor{{Path: "a.go", StartLine: 3, EndLine: 4, Side: SideBase}}}}
	if p := SeedPrompt(r, nil, Ask{Question: "Why?"}); !strings.Contains(p, "- a.go:3-4 (base commit)") {
		t.Errorf("seed prompt does not mark the base-side section lines:\n%s", p)
	}
}
