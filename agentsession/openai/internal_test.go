package openai

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goopenai "github.com/sashabaranov/go-openai"

	"github.com/prchat/prchat/chat"
)

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{nil, 0, false},
		{map[string]string{"Retry-After": "7"}, 7 * time.Second, true},
		{map[string]string{"Retry-After": "0"}, 0, true},
		{map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond, true},
		{map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second, true},
		{map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}, 0, true},
		{map[string]string{"Retry-After": "soon"}, 0, false},
		{map[string]string{"Retry-After": "-3"}, 0, false},
		{map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond, true},
		{map[string]string{"Retry-After-Ms": "x", "Retry-After": "2"}, 2 * time.Second, true},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.header {
			h.Set(k, v)
		}
		got, ok := retryAfter(h, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("retryAfter(%v) = %v, %v; want %v, %v", tt.header, got, ok, tt.want, tt.ok)
		}
	}
}

// TestToolCallFragments checks that tool calls are put together from
// fragments by index, whatever order and shape they come in.
func TestToolCallFragments(t *testing.T) {
	t.Parallel()
	idx := func(i int) *int { return &i }
	frag := func(i *int, id, name, args string) goopenai.ToolCall {
		return goopenai.ToolCall{Index: i, ID: id, Function: goopenai.FunctionCall{Name: name, Arguments: args}}
	}
	var acc toolCalls
	// Interleaved fragments of two calls, a name repeated in every
	// fragment (some endpoints), a name split in two, and a call with no id.
	for _, f := range []goopenai.ToolCall{
		frag(idx(1), "call_b", "read_", ""),
		frag(idx(0), "call_a", "search_code", `{"qu`),
		frag(idx(1), "", "file", `{"path":`),
		frag(idx(0), "call_a", "search_code", `ery":"x"}`),
		frag(idx(1), "", "", `"a.go"}`),
		frag(idx(2), "", "list_files", `{}`),
	} {
		acc.add(0, f)
	}
	want := []ToolCall{
		{ID: "call_a", Name: "search_code", Arguments: `{"query":"x"}`},
		{ID: "call_b", Name: "read_file", Arguments: `{"path":"a.go"}`},
		{ID: "prchat_3_2", Name: "list_files", Arguments: `{}`},
	}
	if diff := cmp.Diff(want, acc.list(3)); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}

	// Without indexes (non-streamed replies, some servers), the place in
	// the list is the index.
	var plain toolCalls
	plain.add(0, goopenai.ToolCall{ID: "x", Function: goopenai.FunctionCall{Name: "a", Arguments: "{}"}})
	plain.add(1, goopenai.ToolCall{ID: "y", Function: goopenai.FunctionCall{Name: "b", Arguments: "{}"}})
	if got := plain.list(1); len(got) != 2 || got[0].ID != "x" || got[1].Name != "b" {
		t.Errorf("calls without indexes = %+v", got)
	}
}

func TestResponseFormat(t *testing.T) {
	t.Parallel()
	rf, err := responseFormat(json.RawMessage(chat.AnswerSchema))
	if err != nil {
		t.Fatal(err)
	}
	if rf.Type != goopenai.ChatCompletionResponseFormatTypeJSONSchema || rf.JSONSchema.Name != schemaName || !rf.JSONSchema.Strict {
		t.Errorf("response format = %+v, want a strict json_schema", rf)
	}
	raw, err := json.Marshal(rf.JSONSchema.Schema)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	if strings.Contains(s, "minLength") || strings.Contains(s, "maxLength") {
		t.Errorf("strict schema keeps minLength/maxLength: %s", s)
	}
	for _, keep := range []string{`"anyOf"`, `"maxItems":20`, `"minimum":1`, `"answer_markdown"`, `"additionalProperties":false`} {
		if !strings.Contains(s, keep) {
			t.Errorf("strict schema lost %s: %s", keep, s)
		}
	}
	// A property named like a dropped keyword stays.
	rf, _ = responseFormat(json.RawMessage(`{"type":"object","additionalProperties":false,"required":["format"],"properties":{"format":{"type":"string","format":"date"}}}`))
	raw, _ = json.Marshal(rf.JSONSchema.Schema)
	if string(raw) != `{"additionalProperties":false,"properties":{"format":{"type":"string"}},"required":["format"],"type":"object"}` || !rf.JSONSchema.Strict {
		t.Errorf("schema with a property named format = %s (strict %v)", raw, rf.JSONSchema.Strict)
	}
	for _, loose := range []string{
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`,
		`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"]}`,
	} {
		rf, err := responseFormat(json.RawMessage(loose))
		if err != nil || rf.JSONSchema.Strict {
			t.Errorf("responseFormat(%s) = strict %v, %v; want not strict", loose, rf.JSONSchema.Strict, err)
		}
	}
	if _, err := responseFormat(json.RawMessage(`{not json`)); err == nil {
		t.Error("responseFormat of bad JSON: no error")
	}
}

func TestRepairHistory(t *testing.T) {
	t.Parallel()
	in := []Message{
		{Role: RoleTool, ToolCallID: "orphan", Content: "x"},
		{Role: RoleUser, Content: "q"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "a", Name: "read_file"}, {ID: "b", Name: "list_files"}}},
		{Role: RoleTool, ToolCallID: "b", Content: "B"},
		{Role: RoleTool, ToolCallID: "zzz", Content: "stray"},
		{Role: RoleAssistant, Content: "answer"},
	}
	want := []Message{
		{Role: RoleUser, Content: "q"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "a", Name: "read_file"}, {ID: "b", Name: "list_files"}}},
		{Role: RoleTool, ToolCallID: "a", ToolName: "read_file", Content: "error: the result of this tool call was lost"},
		{Role: RoleTool, ToolCallID: "b", Content: "B"},
		{Role: RoleAssistant, Content: "answer"},
	}
	if diff := cmp.Diff(want, repairHistory(in)); diff != "" {
		t.Errorf("repaired history (-want +got):\n%s", diff)
	}
}

func TestPrices(t *testing.T) {
	t.Parallel()
	b, err := New(Config{Sessions: NewMemorySessions(), Prices: map[string]Price{"llama3.1:8b": {}, "gpt-4o": {Input: 1, Output: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		model string
		want  float64
		known bool
	}{
		{"gpt-4o-mini", 0.15*1 + 0.60*0.5, true},
		{"gpt-4o-mini-2024-07-18", 0.15*1 + 0.60*0.5, true},
		{"openai/gpt-4o-mini", 0.15*1 + 0.60*0.5, true},
		{"gpt-4o", 1*1 + 2*0.5, true}, // overridden
		{"gpt-4o-2024-08-06", 1*1 + 2*0.5, true},
		{"llama3.1:8b", 0, true},
		{"gpt-4o-audio-preview", 0, false},
		{"mistral", 0, false},
	}
	for _, tt := range tests {
		cost, reason := b.cost(tt.model, 1_000_000, 500_000)
		switch {
		case tt.known && (cost == nil || reason != "" || abs(*cost-tt.want) > 1e-9):
			t.Errorf("cost(%s) = %v, %q; want %v", tt.model, cost, reason, tt.want)
		case !tt.known && (cost != nil || reason != "no price known for model "+tt.model):
			t.Errorf("cost(%s) = %v, %q; want no price", tt.model, cost, reason)
		}
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]Config{
		"no sessions":     {},
		"bad url":         {Sessions: NewMemorySessions(), BaseURL: "localhost:11434"},
		"negative":        {Sessions: NewMemorySessions(), CallTimeout: -1},
		"backoff":         {Sessions: NewMemorySessions(), BackoffBase: time.Minute, BackoffMax: time.Second},
		"negative price":  {Sessions: NewMemorySessions(), Prices: map[string]Price{"m": {Input: -1}}},
		"negative tries":  {Sessions: NewMemorySessions(), MaxAttempts: -2},
		"negative wait":   {Sessions: NewMemorySessions(), MaxRetryAfter: -time.Second},
		"negative tools":  {Sessions: NewMemorySessions(), ToolTimeout: -time.Second},
		"negative backof": {Sessions: NewMemorySessions(), BackoffBase: -time.Second},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%s) = nil error", name)
		}
	}
	b, err := New(Config{Sessions: NewMemorySessions()})
	if err != nil {
		t.Fatal(err)
	}
	if b.cfg.BaseURL != DefaultBaseURL || b.cfg.CallTimeout != 2*time.Minute || b.cfg.MaxAttempts != 4 {
		t.Errorf("defaults = %+v", b.cfg)
	}
	if err := b.Available(t.Context()); err != nil {
		t.Errorf("Available = %v", err)
	}
	if _, _, err := b.endpoint(t.Context(), chat.RunRequest{}); err == nil || !strings.Contains(err.Error(), "no API key") {
		t.Errorf("endpoint with OpenAI's URL and no key = %v", err)
	}
	base, key, err := b.endpoint(t.Context(), chat.RunRequest{Endpoint: &chat.Endpoint{Provider: "ollama", BaseURL: "http://localhost:11434/v1/"}})
	if err != nil || base != "http://localhost:11434/v1" || key != "" {
		t.Errorf("endpoint of a keyless provider = %q, %q, %v", base, key, err)
	}
	if _, _, err := b.endpoint(t.Context(), chat.RunRequest{Endpoint: &chat.Endpoint{Provider: "x", BaseURL: "ftp://h"}}); err == nil {
		t.Error("endpoint with an ftp URL: no error")
	}
}
