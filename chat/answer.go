package chat

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// AnswerSchema is the JSON Schema every answer must satisfy (DESIGN §4).
//
//go:embed answer_schema.json
var AnswerSchema []byte

var answerSchema = sync.OnceValue(func() *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(AnswerSchema))
	if err != nil {
		panic(fmt.Sprintf("answer schema: %v", err))
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("answer.json", doc); err != nil {
		panic(fmt.Sprintf("answer schema: %v", err))
	}
	return c.MustCompile("answer.json")
})

// ParseAnswer extracts the answer from an agent's result: its structured
// output if there is one, else the JSON object in its final text (bare, or in
// a fenced code block). It validates the answer against AnswerSchema and
// returns what is wrong in words an agent can act on.
func ParseAnswer(structured json.RawMessage, text string) (Answer, error) {
	raw := []byte(structured)
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		obj, ok := jsonObject(text)
		if !ok {
			return Answer{}, errors.New("the reply holds no JSON object; reply with only the JSON answer object")
		}
		raw = []byte(obj)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return Answer{}, fmt.Errorf("the answer is not valid JSON: %v", err)
	}
	if a, ok := plainAnswer(inst); ok {
		return a, nil
	}
	return answerBySchema(raw, inst)
}

// answerBySchema is ParseAnswer's way for an answer plainAnswer did not
// take: the schema's validator, for its words on what is wrong, then the
// answer decoded from raw.
func answerBySchema(raw []byte, inst any) (Answer, error) {
	if err := answerSchema().Validate(inst); err != nil {
		return Answer{}, fmt.Errorf("the answer does not match the schema: %s", schemaProblems(err))
	}
	var a Answer
	if err := json.Unmarshal(raw, &a); err != nil {
		return Answer{}, fmt.Errorf("the answer does not decode: %v", err)
	}
	if a.Citations == nil {
		a.Citations = []Citation{}
	}
	return a, nil
}

// plainAnswer reads the answer from inst, the answer object as
// jsonschema.UnmarshalJSON decoded it, when inst is plainly valid: it
// checks what AnswerSchema asks by hand, and reports false for anything
// it does not take (a number such as 1.0 or 1e2 among them), which
// ParseAnswer then leaves to the schema's validator. So it never takes
// an answer the schema refuses, and it reads what json.Unmarshal would
// (TestPlainAnswerAgreesWithTheSchema; TestAnswerSchemaIsWhatPlainAnswerChecks
// fails when the schema changes). The validator and a second decoding
// were ~6% of a worker's CPU with the bench's agent; this is a walk of
// the decoded object.
func plainAnswer(inst any) (Answer, bool) {
	obj, ok := inst.(map[string]any)
	if !ok || len(obj) != 3 {
		return Answer{}, false
	}
	markdown, ok := plainString(obj["answer_markdown"], 20000)
	if !ok {
		return Answer{}, false
	}
	items, ok := obj["citations"].([]any)
	if !ok || len(items) > 20 {
		return Answer{}, false
	}
	a := Answer{AnswerMarkdown: markdown, Citations: make([]Citation, 0, len(items))}
	for _, item := range items {
		c, ok := item.(map[string]any)
		if !ok || len(c) != 3 {
			return Answer{}, false
		}
		path, ok1 := plainString(c["path"], 1024)
		start, ok2 := plainLine(c["start_line"])
		end, ok3 := plainLine(c["end_line"])
		if !ok1 || !ok2 || !ok3 {
			return Answer{}, false
		}
		a.Citations = append(a.Citations, Citation{Path: path, StartLine: start, EndLine: end})
	}
	fix, present := obj["suggests_fix"]
	switch f := fix.(type) {
	case nil:
		if !present {
			return Answer{}, false
		}
	case map[string]any:
		summary, ok := plainString(f["summary"], 2000)
		if !ok || len(f) != 1 {
			return Answer{}, false
		}
		a.SuggestsFix = &Fix{Summary: summary}
	default:
		return Answer{}, false
	}
	return a, true
}

// plainString reports v as a string of 1 to max characters (Unicode code
// points, as JSON Schema counts them).
func plainString(v any, max int) (string, bool) {
	s, ok := v.(string)
	if !ok || s == "" {
		return "", false
	}
	if len(s) > max && utf8.RuneCountInString(s) > max {
		return "", false
	}
	return s, true
}

// plainLine reports v as a line number: an integer literal, at least 1,
// that fits an int.
func plainLine(v any) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(string(n))
	return i, err == nil && i >= 1
}

// english prints the schema's problems in words (a kind's own %v is a
// Go value, such as &{[path]} for a missing property).
var english = message.NewPrinter(language.English)

// schemaProblems renders a validation error as one line per problem.
func schemaProblems(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			out = append(out, fmt.Sprintf("at %s: %s", loc, e.ErrorKind.LocalizedString(english)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(out) > 10 {
		out = append(out[:10], fmt.Sprintf("and %d more", len(out)-10))
	}
	return strings.Join(out, "; ")
}

// jsonObject finds the JSON object in an agent's text: the whole text, a
// fenced ```json block, or the span from the first '{' to the last '}'.
func jsonObject(text string) (string, bool) {
	t := strings.TrimSpace(text)
	if json.Valid([]byte(t)) && strings.HasPrefix(t, "{") {
		return t, true
	}
	if i := strings.Index(t, "```"); i >= 0 {
		rest := t[i+3:]
		if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
			rest = rest[nl+1:]
			if j := strings.Index(rest, "```"); j >= 0 {
				block := strings.TrimSpace(rest[:j])
				if json.Valid([]byte(block)) && strings.HasPrefix(block, "{") {
					return block, true
				}
			}
		}
	}
	i, j := strings.IndexByte(t, '{'), strings.LastIndexByte(t, '}')
	if i >= 0 && j > i && json.Valid([]byte(t[i:j+1])) {
		return t[i : j+1], true
	}
	return "", false
}

// LineCounter tells how many lines a file has at a commit.
type LineCounter func(ctx context.Context, path string) (int, error)

// CheckCitations checks every citation of a: a clean repo-relative path, not
// under the private folder, a file at the PR head, and
// 1 <= start_line <= end_line <= its line count. It returns all problems.
func CheckCitations(ctx context.Context, a Answer, lines LineCounter) error {
	var problems []string
	for i, c := range a.Citations {
		if err := CheckRepoPath(c.Path); err != nil {
			problems = append(problems, fmt.Sprintf("citation %d: %s", i+1, ErrorMessage(err)))
			continue
		}
		if c.Path == PrivateDir || strings.HasPrefix(c.Path, PrivateDir+"/") {
			problems = append(problems, fmt.Sprintf("citation %d: %s is prchat's private folder, not code of the pull request", i+1, c.Path))
			continue
		}
		if c.StartLine < 1 || c.EndLine < c.StartLine {
			problems = append(problems, fmt.Sprintf("citation %d: lines %d-%d are not a range 1 <= start_line <= end_line", i+1, c.StartLine, c.EndLine))
			continue
		}
		n, err := lines(ctx, c.Path)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			problems = append(problems, fmt.Sprintf("citation %d: %s is not a file at the pull request's head commit", i+1, c.Path))
			continue
		}
		if c.EndLine > n {
			problems = append(problems, fmt.Sprintf("citation %d: %s has %d lines, so lines %d-%d are past its end", i+1, c.Path, n, c.StartLine, c.EndLine))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}
