//go:build chaos

package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"time"
)

// model is a fake OpenAI chat-completions endpoint, slow on purpose. Each
// question of the suite carries a token (tokenPattern); a request whose
// messages name a token is one model call of that token's turn, and is
// answered, streamed as the real API streams, with a valid answer after the
// token's delay. The API key of the request tells which process called.
//
// It speaks just enough of the protocol for prchat's openai backend (go-openai):
// a role chunk, the answer's JSON in a few content chunks spread over the
// delay, a chunk with finish_reason "stop", a usage chunk, [DONE].
type model struct {
	URL string // base URL, what PRCHAT_OPENAI_BASE_URL takes

	srv *httptest.Server

	mu     sync.Mutex
	delays map[string]time.Duration // by token
	calls  map[string][]modelCall   // by token
	def    time.Duration
}

// modelCall is one request of a turn's run.
type modelCall struct {
	At  time.Time // when it arrived
	Key string    // the caller's API key: which worker
}

// tokenPattern finds a question's token in a request.
var tokenPattern = regexp.MustCompile(`chaos-[0-9a-f]{16}`)

// answerCitation is a citation valid at the head of the suite's repository.
var answerCitation = map[string]any{"path": "settings/settings.go", "start_line": 1, "end_line": 3}

func newModel(def time.Duration) *model {
	m := &model{delays: map[string]time.Duration{}, calls: map[string][]modelCall{}, def: def}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", m.serve)
	m.srv = httptest.NewServer(mux)
	m.URL = m.srv.URL + "/v1"
	return m
}

func (m *model) Close() {
	m.srv.CloseClientConnections()
	m.srv.Close()
}

// setDelay makes the turn of token take d per model call.
func (m *model) setDelay(token string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.delays[token] = d
}

// Calls returns the model calls of token's turn so far.
func (m *model) Calls(token string) []modelCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]modelCall(nil), m.calls[token]...)
}

// waitCalls waits until token's turn has made n model calls, at most for d.
func (m *model) waitCalls(token string, n int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if len(m.Calls(token)) >= n {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// answerText is the answer the model gives token's turn.
func answerText(token string) string {
	return "The answer to " + token + ": Load refuses an empty path."
}

func (m *model) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	token := ""
	for _, msg := range req.Messages {
		if msg.Role == "user" {
			if t := tokenPattern.Find(msg.Content); t != nil {
				token = string(t)
			}
		}
	}
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	m.mu.Lock()
	delay, ok := m.delays[token]
	if !ok {
		delay = m.def
	}
	m.calls[token] = append(m.calls[token], modelCall{At: time.Now(), Key: key})
	m.mu.Unlock()

	answer, _ := json.Marshal(map[string]any{
		"answer_markdown": answerText(token),
		"citations":       []any{answerCitation},
		"suggests_fix":    nil,
	})
	usage := map[string]any{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
	if !req.Stream {
		if !sleep(r, delay) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-chaos", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": string(answer)}}},
			"usage": usage,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	chunk := func(delta map[string]any, finish any, u any) bool {
		c := map[string]any{"id": "chatcmpl-chaos", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": req.Model}
		if delta != nil {
			c["choices"] = []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}
		} else {
			c["choices"] = []any{}
		}
		if u != nil {
			c["usage"] = u
		}
		j, _ := json.Marshal(c)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", j); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	if !chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil) {
		return
	}
	const pieces = 4
	text := string(answer)
	step := (len(text) + pieces - 1) / pieces
	for i := 0; i < len(text); i += step {
		if !sleep(r, delay/pieces) {
			return
		}
		if !chunk(map[string]any{"content": text[i:min(i+step, len(text))]}, nil, nil) {
			return
		}
	}
	if !chunk(map[string]any{}, "stop", nil) || !chunk(nil, nil, usage) {
		return
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// sleep waits d unless the client goes away; it reports whether it waited.
func sleep(r *http.Request, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-r.Context().Done():
		return false
	}
}
