package mask_test

import (
	"os"
	"strings"
	"testing"

	"github.com/prchat/prchat/chat/mask"
	"github.com/prchat/prchat/chat/mask/internal/fakesecret"
)

// corpusCase is one case of testdata/cases.txt.
type corpusCase struct {
	rule, title string
	line        int
	in, want    string
}

const (
	mOpen  = "⟦"
	mClose = "⟧"
)

// loadCorpus parses testdata/cases.txt. Lines before the first header are
// comments. Each case starts with "=== <rule>: <title>" and runs to the next
// header; its final newline belongs to the separator. Secrets are marked
// ⟦value⟧ (masked with the case's rule) or ⟦rule|value⟧; "none" cases have
// no markers and must come out unchanged.
func loadCorpus(t testing.TB) []corpusCase {
	t.Helper()
	data, err := os.ReadFile("testdata/cases.txt")
	if err != nil {
		t.Fatal(err)
	}
	var cases []corpusCase
	var cur *corpusCase
	var body []string
	flush := func() {
		if cur == nil {
			return
		}
		text := strings.Join(body, "\n")
		cur.in, cur.want = expand(t, cur.rule, text, cur.line)
		cases = append(cases, *cur)
	}
	for i, ln := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if strings.HasPrefix(ln, "=== ") {
			flush()
			rule, title, _ := strings.Cut(strings.TrimPrefix(ln, "=== "), ":")
			cur = &corpusCase{rule: strings.TrimSpace(rule), title: strings.TrimSpace(title), line: i + 1}
			body = nil
			continue
		}
		if cur != nil {
			body = append(body, ln)
		}
	}
	flush()
	return cases
}

// expand turns marked text into the input and the expected output.
func expand(t testing.TB, rule, text string, line int) (in, want string) {
	var bi, bw strings.Builder
	for {
		i := strings.Index(text, mOpen)
		if i < 0 {
			break
		}
		j := strings.Index(text[i:], mClose)
		if j < 0 {
			t.Fatalf("cases.txt:%d: unclosed marker", line)
		}
		inner := text[i+len(mOpen) : i+j]
		r := rule
		if k := strings.Index(inner, "|"); k >= 0 && !strings.ContainsAny(inner[:k], " :/") {
			r, inner = inner[:k], inner[k+1:]
		}
		if r == "none" {
			t.Fatalf("cases.txt:%d: marker in a none case", line)
		}
		bi.WriteString(text[:i] + inner)
		bw.WriteString(text[:i] + "[masked:" + r + "]")
		text = text[i+j+len(mClose):]
	}
	bi.WriteString(text)
	bw.WriteString(text)
	return bi.String(), bw.String()
}

func corpusTexts(t testing.TB) []string {
	var out []string
	for _, c := range loadCorpus(t) {
		out = append(out, c.in)
	}
	return out
}

// TestCorpus checks every case of testdata/cases.txt for its exact output,
// and that every rule has a case there or in the beyond corpus.
func TestCorpus(t *testing.T) {
	t.Parallel()
	m := mask.New()
	cases := loadCorpus(t)
	if len(cases) < 100 {
		t.Fatalf("only %d corpus cases", len(cases))
	}
	seen := map[string]bool{}
	for _, c := range cases {
		seen[c.rule] = true
		if got := m.String(c.in); got != c.want {
			t.Errorf("cases.txt:%d %s: %s\n in   %q\n got  %q\n want %q", c.line, c.rule, c.title, c.in, got, c.want)
		}
	}
	for _, rec := range fakesecret.Beyond(1) {
		seen[rec.Rule] = true
	}
	for _, r := range m.Rules() {
		if !seen[r] {
			t.Errorf("corpus has no case for rule %s", r)
		}
	}
}
