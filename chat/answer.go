package chat

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
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
			out = append(out, fmt.Sprintf("at %s: %s", loc, e.ErrorKind))
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
