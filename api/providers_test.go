package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

type providersJSON struct {
	Providers []struct {
		ID        string `json:"id"`
		HasKey    bool   `json:"has_key"`
		KeySource string `json:"key_source"`
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
// model can be changed; the errors of each route (testdata/providers/).
func TestProviderSettingsAPI(t *testing.T) {
	t.Parallel()
	const secret = "sk-stored-Vb7Tz2Lw9Kx1Rm4Np6Yq"
	f := setup(t, func(o *options) { o.envKeys = map[string]string{"litellm": "env-litellm-key-1234567890"} })

	r := f.c.send(t, "GET", "/api/v1/providers", nil)
	f.golden(t, "providers/initial", r)
	var p providersJSON
	f.do("GET", "/api/v1/providers", nil, http.StatusOK, &p)
	if p.Active != "openai" || p.Model == "" {
		t.Fatalf("default active = %q %q", p.Active, p.Model)
	}
	if has, src := p.find("litellm"); !has || src != "env" {
		t.Fatalf("litellm key = %v %q, want the environment's", has, src)
	}
	if strings.Contains(string(r.body), "env-litellm-key") {
		t.Fatal("GET /providers shows the environment's key")
	}

	raw := f.do("POST", "/api/v1/providers/ollama/key", map[string]any{"key": secret}, http.StatusNoContent, nil)
	if len(raw) != 0 {
		t.Fatalf("storing a key answered %q", raw)
	}
	f.do("POST", "/api/v1/providers/litellm/key", map[string]any{"key": secret}, http.StatusNoContent, nil)
	raw = f.do("GET", "/api/v1/providers", nil, http.StatusOK, &p)
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
	keys, err := f.store.ProviderKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sealed := keys["ollama"]
	if len(sealed) == 0 || strings.Contains(string(sealed), secret) || strings.Contains(string(sealed), secret[10:]) {
		t.Fatalf("the stored key is not encrypted: %q", sealed)
	}

	f.golden(t, "providers/set_active", f.c.send(t, "PATCH", "/api/v1/providers/active", map[string]any{"provider": "ollama", "model": "llama3.1:8b"}))
	f.golden(t, "providers/active", f.c.send(t, "GET", "/api/v1/providers/active", nil))
	var cur struct{ Provider, Model string }
	f.do("GET", "/api/v1/providers/active", nil, http.StatusOK, &cur)
	if cur.Provider != "ollama" || cur.Model != "llama3.1:8b" {
		t.Fatalf("GET active = %+v", cur)
	}
	f.do("DELETE", "/api/v1/providers/ollama/key", nil, http.StatusNoContent, nil)

	for _, tt := range []struct {
		name         string
		method, path string
		body         any
		status       int
	}{
		{"delete_missing_key", "DELETE", "/api/v1/providers/ollama/key", nil, http.StatusNotFound},
		{"key_of_unknown_provider", "POST", "/api/v1/providers/nope/key", map[string]any{"key": "abcdef"}, http.StatusNotFound},
		{"key_of_a_cli", "POST", "/api/v1/providers/codex/key", map[string]any{"key": "abcdef"}, http.StatusUnprocessableEntity},
		{"bad_key", "POST", "/api/v1/providers/openai/key", map[string]any{"key": "has space"}, http.StatusBadRequest},
		{"active_without_provider", "PATCH", "/api/v1/providers/active", map[string]any{"model": "m"}, http.StatusBadRequest},
		{"active_local", "PATCH", "/api/v1/providers/active", map[string]any{"provider": "local"}, http.StatusUnprocessableEntity},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := f.c.send(t, tt.method, tt.path, tt.body)
			if r.status != tt.status {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, r.status, r.body, tt.status)
			}
			f.golden(t, "providers/"+tt.name, r)
		})
	}
}
