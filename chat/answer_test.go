package chat

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseAnswer(t *testing.T) {
	t.Parallel()
	valid := `{"answer_markdown":"Because.","citations":[{"path":"a.go","start_line":1,"end_line":2}],"suggests_fix":null}`
	want := Answer{AnswerMarkdown: "Because.", Citations: []Citation{{Path: "a.go", StartLine: 1, EndLine: 2}}}
	tests := []struct {
		name       string
		structured string
		text       string
		wantErr    string // substring; "" = valid
	}{
		{"bare", "", valid, ""},
		{"fenced", "", "Here it is:\n```json\n" + valid + "\n```\n", ""},
		{"prose around", "", "Sure. " + valid + " Done.", ""},
		{"structured wins", valid, "not json", ""},
		{"structured null falls back to text", "null", valid, ""},
		{"no json", "", "I think it is fine.", "no JSON object"},
		{"broken json", "", `{"answer_markdown": "x",`, "no JSON object"},
		{"missing field", "", `{"answer_markdown":"x","citations":[]}`, "suggests_fix"},
		{"extra field", "", `{"answer_markdown":"x","citations":[],"suggests_fix":null,"x":1}`, "schema"},
		{"empty markdown", "", `{"answer_markdown":"","citations":[],"suggests_fix":null}`, "schema"},
		{"zero line", "", `{"answer_markdown":"x","citations":[{"path":"a","start_line":0,"end_line":1}],"suggests_fix":null}`, "start_line"},
		{"string line", "", `{"answer_markdown":"x","citations":[{"path":"a","start_line":"1","end_line":1}],"suggests_fix":null}`, "start_line"},
		{"fix without summary", "", `{"answer_markdown":"x","citations":[],"suggests_fix":{}}`, "schema"},
		{"21 citations", "", `{"answer_markdown":"x","citations":[` + strings.Repeat(`{"path":"a","start_line":1,"end_line":1},`, 20) + `{"path":"a","start_line":1,"end_line":1}],"suggests_fix":null}`, "citations"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseAnswer([]byte(tt.structured), tt.text)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ParseAnswer: %v", err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("answer (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseAnswer error = %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestCheckCitations(t *testing.T) {
	t.Parallel()
	files := map[string]int{"a.go": 10, "dir/b.go": 3}
	lines := func(_ context.Context, p string) (int, error) {
		n, ok := files[p]
		if !ok {
			return 0, errors.New("no such file")
		}
		return n, nil
	}
	tests := []struct {
		name    string
		cites   []Citation
		wantErr string
	}{
		{"ok", []Citation{{"a.go", 1, 10}, {"dir/b.go", 3, 3}}, ""},
		{"none", nil, ""},
		{"past end", []Citation{{"a.go", 9, 11}}, "has 10 lines"},
		{"missing file", []Citation{{"c.go", 1, 1}}, "not a file"},
		{"reversed", []Citation{{"a.go", 5, 4}}, "not a range"},
		{"absolute", []Citation{{"/a.go", 1, 1}}, "absolute"},
		{"escape", []Citation{{"../a.go", 1, 1}}, "clean"},
		{"private", []Citation{{".prchat/review.md", 1, 1}}, "private"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := CheckCitations(context.Background(), Answer{AnswerMarkdown: "x", Citations: tt.cites}, lines)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckCitations: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("CheckCitations error = %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestUsageAdd(t *testing.T) {
	t.Parallel()
	one, two := 1.5, 2.0
	var u Usage
	u.Add(Usage{InputTokens: 10, OutputTokens: 5, Calls: 1, CostUSD: &one})
	u.Add(Usage{InputTokens: 1, Calls: 1, CostUSD: &two})
	if u.CostUSD == nil || *u.CostUSD != 3.5 || u.InputTokens != 11 || u.Calls != 2 {
		t.Fatalf("sum = %+v", u)
	}
	u.Add(Usage{Calls: 1, CostReason: "no price for model x"})
	if u.CostUSD != nil || u.CostReason != "no price for model x" {
		t.Fatalf("an unknown part must make the cost unknown: %+v", u)
	}
	u.Add(Usage{Calls: 1, CostUSD: &one})
	if u.CostUSD != nil || u.Calls != 4 {
		t.Fatalf("cost must stay unknown: %+v", u)
	}
}
