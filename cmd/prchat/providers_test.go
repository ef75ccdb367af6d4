package main

import (
	"net/http"
	"testing"

	"github.com/prchat/prchat/agentsession/fakeapi/chatcompletions"
)

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
}
