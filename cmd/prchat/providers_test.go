package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/prchat/prchat/agentsession/fakeapi/chatcompletions"
)

type providersJSON struct {
	Providers []struct {
		ID        string `json:"id"`
		Backend   string `json:"backend"`
		HasKey    bool   `json:"has_key"`
		KeySource string `json:"key_source"`
		Active    bool   `json:"active"`
	} `json:"providers"`
	Active string `json:"active"`
	Model  string `json:"model"`
}

func (p providersJSON) find(id string) (hasKey bool, source string) {
	for _, v := range p.Providers {
		if v.ID == id {
			return v.HasKey, v.KeySource
		}
	}
	return false, "missing"
}

// TestProviderSettingsAPI: keys are stored encrypted and never returned; an
// environment variable wins over a stored key; the active provider and
// model can be changed.
func TestProviderSettingsAPI(t *testing.T) {
	t.Parallel()
	const secret = "sk-stored-Vb7Tz2Lw9Kx1Rm4Np6Yq"
	e := setup(t, mode{name: "embedded"}, func(c *Config) { c.LiteLLMAPIKey = "env-litellm-key-1234567890" })

	var p providersJSON
	e.do("GET", "/api/v1/providers", nil, http.StatusOK, &p)
	if p.Active != "openai" || p.Model == "" {
		t.Fatalf("default active = %q %q", p.Active, p.Model)
	}
	if has, src := p.find("litellm"); !has || src != "env" {
		t.Fatalf("litellm key = %v %q, want the environment's", has, src)
	}
	if has, _ := p.find("ollama"); has {
		t.Fatal("ollama has a key before one was stored")
	}

	raw := e.do("POST", "/api/v1/providers/ollama/key", map[string]any{"key": secret}, http.StatusNoContent, nil)
	if strings.Contains(string(raw), secret) {
		t.Fatal("the key came back")
	}
	e.do("POST", "/api/v1/providers/litellm/key", map[string]any{"key": secret}, http.StatusNoContent, nil)
	raw = e.do("GET", "/api/v1/providers", nil, http.StatusOK, &p)
	if strings.Contains(string(raw), secret) {
		t.Fatal("GET /providers shows a key")
	}
	if has, src := p.find("ollama"); !has || src != "stored" {
		t.Fatalf("ollama key = %v %q, want stored", has, src)
	}
	if _, src := p.find("litellm"); src != "env" {
		t.Fatalf("litellm key source = %q: the environment must win over a stored key", src)
	}

	// Encrypted at rest: the database holds no plain key.
	keys, err := e.d.store.ProviderKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sealed := keys["ollama"]
	if len(sealed) == 0 || strings.Contains(string(sealed), secret) || strings.Contains(string(sealed), secret[10:]) {
		t.Fatalf("the stored key is not encrypted: %q", sealed)
	}

	var active providersJSON
	e.do("PATCH", "/api/v1/providers/active", map[string]any{"provider": "ollama", "model": "llama3.1:8b"}, http.StatusOK, &active)
	if active.Active != "ollama" || active.Model != "llama3.1:8b" {
		t.Fatalf("active = %q %q", active.Active, active.Model)
	}
	var cur struct{ Provider, Model string }
	e.do("GET", "/api/v1/providers/active", nil, http.StatusOK, &cur)
	if cur.Provider != "ollama" || cur.Model != "llama3.1:8b" {
		t.Fatalf("GET active = %+v", cur)
	}

	e.do("DELETE", "/api/v1/providers/ollama/key", nil, http.StatusNoContent, nil)
	e.do("DELETE", "/api/v1/providers/ollama/key", nil, http.StatusNotFound, nil)
	e.do("POST", "/api/v1/providers/nope/key", map[string]any{"key": "abcdef"}, http.StatusNotFound, nil)
	e.do("POST", "/api/v1/providers/codex/key", map[string]any{"key": "abcdef"}, http.StatusUnprocessableEntity, nil)
	e.do("POST", "/api/v1/providers/openai/key", map[string]any{"key": "has space"}, http.StatusBadRequest, nil)
	e.do("PATCH", "/api/v1/providers/active", map[string]any{"provider": "local"}, http.StatusUnprocessableEntity, nil)
}

// TestOpenAIBackendUsesTheProviderKey: a turn of the openai backend sends
// the key stored through the API; an environment variable overrides it; a
// question may name another provider and model for its turn.
func TestOpenAIBackendUsesTheProviderKey(t *testing.T) {
	t.Parallel()
	fake := chatcompletions.NewServer()
	defer fake.Close()
	fake.Handle(func(r chatcompletions.Request) chatcompletions.Reply {
		return chatcompletions.Reply{JSON: goodAnswer("from the model")}
	})
	e := setup(t, mode{name: "embedded"}, func(c *Config) {
		c.OpenAIBaseURL = fake.URL
		c.OllamaBaseURL = fake.URL
		c.OpenAIModel = "gpt-test"
	})
	const stored = "sk-stored-key-Vb7Tz2Lw9Kx1Rm4Np6Yq"
	e.do("POST", "/api/v1/providers/openai/key", map[string]any{"key": stored}, http.StatusNoContent, nil)
	v := e.review("openai", nil)
	conv, _ := e.ask(v, "Why does Load refuse?")
	got := e.wait(conv, 1)
	if got.State != "succeeded" {
		t.Fatalf("turn = %+v", got)
	}
	e.checkAnswer(got.Answer)
	reqs := fake.Requests()
	if len(reqs) == 0 || reqs[0].Header.Get("Authorization") != "Bearer "+stored || reqs[0].Model != "gpt-test" {
		t.Fatalf("the model call did not carry the stored key and model: %q %q", reqs[0].Header.Get("Authorization"), reqs[0].Model)
	}

	// A question names another provider and model for its turn.
	e.do("POST", "/api/v1/providers/ollama/key", map[string]any{"key": "ollama-key-1234567"}, http.StatusNoContent, nil)
	e.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "And?", "provider": "ollama", "model": "qwen-test"}, http.StatusAccepted, nil)
	if got := e.wait(conv, 2); got.State != "succeeded" {
		t.Fatalf("turn 2 = %+v", got)
	}
	reqs = fake.Requests()
	last := reqs[len(reqs)-1]
	if last.Header.Get("Authorization") != "Bearer ollama-key-1234567" || last.Model != "qwen-test" {
		t.Fatalf("turn 2 used key %q model %q", last.Header.Get("Authorization"), last.Model)
	}
	// The resume sent turn 1's question as history.
	if !last.Contains("Why does Load refuse?") {
		t.Error("the resumed session did not carry turn 1")
	}

	// With the environment variable set, it wins over the stored key.
	e2 := setup(t, mode{name: "embedded"}, func(c *Config) {
		c.OpenAIBaseURL = fake.URL
		c.OpenAIAPIKey = "sk-from-env-Lw9Kx1Rm4Np6YqZ8"
	})
	e2.do("POST", "/api/v1/providers/openai/key", map[string]any{"key": stored}, http.StatusNoContent, nil)
	v2 := e2.review("openai", nil)
	conv2, _ := e2.ask(v2, "Why?")
	if got := e2.wait(conv2, 1); got.State != "succeeded" {
		t.Fatalf("turn = %+v", got)
	}
	reqs = fake.Requests()
	if auth := reqs[len(reqs)-1].Header.Get("Authorization"); auth != "Bearer sk-from-env-Lw9Kx1Rm4Np6YqZ8" {
		t.Fatalf("authorization = %q, want the environment's key", auth)
	}
}

// TestForkARecordedOpenAIReview: a review recorded with its session history
// is forked by the first question: the model sees the review's messages.
func TestForkARecordedOpenAIReview(t *testing.T) {
	t.Parallel()
	fake := chatcompletions.NewServer()
	defer fake.Close()
	fake.Handle(func(r chatcompletions.Request) chatcompletions.Reply {
		return chatcompletions.Reply{JSON: goodAnswer("forked answer")}
	})
	e := setup(t, mode{name: "embedded"}, func(c *Config) { c.OpenAIBaseURL = fake.URL; c.OpenAIAPIKey = "sk-env-key-1234567890ab" })
	history := []map[string]any{
		{"role": "user", "content": "Review pull request 7 of acme/widget."},
		{"role": "assistant", "content": "REVIEW-MARKER: Load now refuses an empty path."},
	}
	v := e.review("openai", map[string]any{"session_history": history})
	conv, _ := e.ask(v, "Why does Load refuse?")
	got := e.wait(conv, 1)
	if got.State != "succeeded" || got.Session != "forked" {
		t.Fatalf("turn = %+v, want succeeded and forked", got)
	}
	reqs := fake.Requests()
	if !reqs[0].Contains("REVIEW-MARKER") {
		t.Fatal("the model did not see the review's history")
	}
	// Invalid histories are refused.
	e.do("POST", "/api/v1/repos/"+e.repo+"/pulls/7/reviews", map[string]any{"head_sha": e.head, "backend": "openai", "session_history": map[string]any{"x": 1}}, http.StatusBadRequest, nil)
	e.do("POST", "/api/v1/repos/"+e.repo+"/pulls/7/reviews", map[string]any{"head_sha": e.head, "backend": "local", "session_history": history}, http.StatusBadRequest, nil)
}
