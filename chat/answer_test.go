package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"
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

// answerCases are answer objects at and around every limit of
// AnswerSchema, for the tests of plainAnswer.
func answerCases() []string {
	cite := func(path, start, end string) string {
		return `{"path":` + path + `,"start_line":` + start + `,"end_line":` + end + `}`
	}
	answer := func(markdown, citations, fix string) string {
		return `{"answer_markdown":` + markdown + `,"citations":` + citations + `,"suggests_fix":` + fix + `}`
	}
	q := func(s string) string { return `"` + s + `"` }
	one := `[` + cite(`"a.go"`, "1", "2") + `]`
	many := func(n int) string {
		items := make([]string, n)
		for i := range items {
			items[i] = cite(`"a.go"`, "1", "1")
		}
		return `[` + strings.Join(items, ",") + `]`
	}
	return []string{
		answer(q("Because."), one, "null"),
		answer(q("Because."), "[]", `{"summary":"Check the error."}`),
		answer(q(strings.Repeat("x", 20000)), "[]", "null"),
		answer(q(strings.Repeat("x", 20001)), "[]", "null"),
		answer(q(strings.Repeat("é", 20000)), "[]", "null"), // 40,000 bytes, 20,000 characters
		answer(q(strings.Repeat("é", 20001)), "[]", "null"),
		answer(q(`\u00e9\n\"quoted\"`), "[]", "null"),
		answer(q(""), "[]", "null"),
		answer("null", "[]", "null"),
		answer("1", "[]", "null"),
		answer(q("x"), many(20), "null"),
		answer(q("x"), many(21), "null"),
		answer(q("x"), "null", "null"),
		answer(q("x"), "{}", "null"),
		answer(q("x"), `[null]`, "null"),
		answer(q("x"), `[[]]`, "null"),
		answer(q("x"), `[`+cite(q(strings.Repeat("p", 1024)), "1", "1")+`]`, "null"),
		answer(q("x"), `[`+cite(q(strings.Repeat("p", 1025)), "1", "1")+`]`, "null"),
		answer(q("x"), `[`+cite(q(""), "1", "1")+`]`, "null"),
		answer(q("x"), `[`+cite("null", "1", "1")+`]`, "null"),
		answer(q("x"), `[`+cite(q("a"), "0", "1")+`]`, "null"),
		answer(q("x"), `[`+cite(q("a"), "-1", "1")+`]`, "null"),
		answer(q("x"), `[`+cite(q("a"), "1.0", "1")+`]`, "null"),
		answer(q("x"), `[`+cite(q("a"), "1.5", "1")+`]`, "null"),
		answer(q("x"), `[`+cite(q("a"), "1e2", "1")+`]`, "null"),
		answer(q("x"), `[`+cite(q("a"), "99999999999999999999", "1")+`]`, "null"),
		answer(q("x"), `[`+cite(q("a"), q("1"), "1")+`]`, "null"),
		answer(q("x"), `[`+cite(q("a"), "null", "1")+`]`, "null"),
		answer(q("x"), `[`+cite(q("a"), "1", "9223372036854775807")+`]`, "null"),
		answer(q("x"), `[{"path":"a","start_line":1}]`, "null"),
		answer(q("x"), `[{"path":"a","start_line":1,"End_line":1}]`, "null"),
		answer(q("x"), `[{"path":"a","start_line":1,"end_line":1,"note":"n"}]`, "null"),
		answer(q("x"), `[{"path":"a","start_line":1,"end_line":1,"path":"b"}]`, "null"),
		answer(q("x"), "[]", `{}`),
		answer(q("x"), "[]", `{"summary":""}`),
		answer(q("x"), "[]", `{"summary":null}`),
		answer(q("x"), "[]", `{"Summary":"s"}`),
		answer(q("x"), "[]", `{"summary":"s","why":"w"}`),
		answer(q("x"), "[]", `{"summary":"`+strings.Repeat("s", 2000)+`"}`),
		answer(q("x"), "[]", `{"summary":"`+strings.Repeat("s", 2001)+`"}`),
		answer(q("x"), "[]", `"fix it"`),
		answer(q("x"), "[]", `[]`),
		answer(q("x"), "[]", `false`),
		`{"answer_markdown":"x","citations":[]}`,
		`{"answer_markdown":"x","citations":[],"Suggests_fix":null}`,
		`{"answer_markdown":"x","citations":[],"suggests_fix":null,"extra":1}`,
		`{"answer_markdown":"x","citations":[],"suggests_fix":{"summary":"s"},"suggests_fix":null}`,
		`{"answer_markdown":"x","answer_markdown":"y","citations":[],"suggests_fix":null}`,
		`{"Answer_Markdown":"x","citations":[],"suggests_fix":null}`,
		`[]`, `"answer"`, `null`, `{}`,
	}
}

// parseAnswerBySchema is ParseAnswer with the schema's validator alone,
// as it was before plainAnswer.
func parseAnswerBySchema(raw string) (Answer, error) {
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(raw))
	if err != nil {
		return Answer{}, err
	}
	return answerBySchema([]byte(raw), inst)
}

// checkPlainAnswer checks plainAnswer on raw against the schema's way: it
// takes only answers the schema takes, and reads them as it does.
func checkPlainAnswer(t *testing.T, raw string) (taken bool) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(raw))
	if err != nil {
		return false
	}
	got, taken := plainAnswer(inst)
	want, err := parseAnswerBySchema(raw)
	if taken && err != nil {
		t.Errorf("plainAnswer took %.200s, which the schema refuses: %v", raw, err)
	}
	if taken && err == nil {
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("plainAnswer read %.200s otherwise (-schema +plain):\n%s", raw, diff)
		}
	}
	// ParseAnswer says what it said before, whichever way it took (as
	// structured output: a text goes through jsonObject first, and an
	// empty or null structured output means there is none).
	if r := strings.TrimSpace(raw); r == "" || r == "null" {
		return taken
	}
	parsed, perr := ParseAnswer(json.RawMessage(raw), "")
	// (The validator lists the properties an object should not have in
	// no set order, so the words of two refusals can differ.)
	if (perr == nil) != (err == nil) {
		t.Errorf("ParseAnswer(%.200s) = %v, the schema's way %v", raw, perr, err)
	}
	if perr == nil && err == nil {
		if diff := cmp.Diff(want, parsed); diff != "" {
			t.Errorf("ParseAnswer read %.200s otherwise (-schema +ParseAnswer):\n%s", raw, diff)
		}
	}
	return taken
}

func TestPlainAnswerAgreesWithTheSchema(t *testing.T) {
	t.Parallel()
	taken := 0
	for _, raw := range answerCases() {
		if checkPlainAnswer(t, raw) {
			taken++
		}
	}
	// The valid answers go the quick way: the first two, those at the
	// limits (a markdown of 20,000 characters, in one byte or two each, 20
	// citations, a path of 1,024, a line of the largest int, a summary of
	// 2,000), one with escapes, and three with a key twice (the last
	// counts): 12 of the cases.
	if taken != 12 {
		t.Errorf("plainAnswer took %d of the cases, want 12", taken)
	}
}

func FuzzPlainAnswer(f *testing.F) {
	for _, raw := range answerCases() {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		checkPlainAnswer(t, raw)
	})
}

// TestAnswerSchemaIsWhatPlainAnswerChecks lists every keyword of
// AnswerSchema: plainAnswer checks exactly these by hand, so a change to
// the schema must change it too (a schema that takes more only costs the
// validator's time; one that takes less would let plainAnswer take what
// it refuses).
func TestAnswerSchemaIsWhatPlainAnswerChecks(t *testing.T) {
	t.Parallel()
	var doc any
	if err := json.Unmarshal(AnswerSchema, &doc); err != nil {
		t.Fatal(err)
	}
	var got []string
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, sub := range v {
				walk(at+"/"+k, sub)
			}
		case []any:
			for i, sub := range v {
				walk(fmt.Sprintf("%s/%d", at, i), sub)
			}
		default:
			b, _ := json.Marshal(v)
			got = append(got, at+" = "+string(b))
		}
	}
	walk("", doc)
	slices.Sort(got)
	want := []string{
		"/additionalProperties = false",
		"/properties/answer_markdown/maxLength = 20000",
		"/properties/answer_markdown/minLength = 1",
		"/properties/answer_markdown/type = \"string\"",
		"/properties/citations/items/additionalProperties = false",
		"/properties/citations/items/properties/end_line/minimum = 1",
		"/properties/citations/items/properties/end_line/type = \"integer\"",
		"/properties/citations/items/properties/path/maxLength = 1024",
		"/properties/citations/items/properties/path/minLength = 1",
		"/properties/citations/items/properties/path/type = \"string\"",
		"/properties/citations/items/properties/start_line/minimum = 1",
		"/properties/citations/items/properties/start_line/type = \"integer\"",
		"/properties/citations/items/required/0 = \"path\"",
		"/properties/citations/items/required/1 = \"start_line\"",
		"/properties/citations/items/required/2 = \"end_line\"",
		"/properties/citations/items/type = \"object\"",
		"/properties/citations/maxItems = 20",
		"/properties/citations/type = \"array\"",
		"/properties/suggests_fix/anyOf/0/additionalProperties = false",
		"/properties/suggests_fix/anyOf/0/properties/summary/maxLength = 2000",
		"/properties/suggests_fix/anyOf/0/properties/summary/minLength = 1",
		"/properties/suggests_fix/anyOf/0/properties/summary/type = \"string\"",
		"/properties/suggests_fix/anyOf/0/required/0 = \"summary\"",
		"/properties/suggests_fix/anyOf/0/type = \"object\"",
		"/properties/suggests_fix/anyOf/1/type = \"null\"",
		"/required/0 = \"answer_markdown\"",
		"/required/1 = \"citations\"",
		"/required/2 = \"suggests_fix\"",
		"/type = \"object\"",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("AnswerSchema changed; change plainAnswer (answer.go) to check what it asks, then this list (-was +now):\n%s", diff)
	}
}

func BenchmarkParseAnswer(b *testing.B) {
	raw := `{"answer_markdown":"The retry loop stops after three attempts because maxRetries is 3.","citations":[{"path":"worker/retry.go","start_line":12,"end_line":30},{"path":"worker/retry_test.go","start_line":5,"end_line":9}],"suggests_fix":{"summary":"Read maxRetries from the config."}}`
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseAnswer(json.RawMessage(raw), ""); err != nil {
			b.Fatal(err)
		}
	}
}
