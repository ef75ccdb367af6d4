package chat

import (
	"cmp"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ProviderConfig describes a provider a question can name: an agent
// backend, or an OpenAI-compatible endpoint that the openai backend runs.
type ProviderConfig struct {
	ID      string
	Name    string
	Backend string
	// BaseURL is an OpenAI-compatible endpoint's API base ("" for CLIs).
	BaseURL string
	// KeyEnv names the environment variable whose value (EnvKey) wins over
	// a stored key. Keys is false for providers that take no stored key
	// (the CLIs use their own login).
	KeyEnv string
	EnvKey string `json:"-"`
	Keys   bool
	// DefaultModel is the model used when neither the question nor the
	// active setting names one.
	DefaultModel string
}

// Provider is a provider as GET /api/v1/providers shows it; never its key.
type Provider struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Backend      string `json:"backend"`
	BaseURL      string `json:"base_url,omitempty"`
	DefaultModel string `json:"default_model,omitempty"`
	TakesKey     bool   `json:"takes_key"`
	HasKey       bool   `json:"has_key"`
	// KeySource is "env" (the environment variable, which wins), "stored"
	// or "" (none).
	KeySource string `json:"key_source"`
	KeyEnv    string `json:"key_env,omitempty"`
	Active    bool   `json:"active"`
}

// ProviderSettings are the providers and which one the openai backend uses.
type ProviderSettings struct {
	Providers []Provider `json:"providers"`
	Active    string     `json:"active"`
	Model     string     `json:"model"`
}

// Endpoint is the OpenAI-compatible endpoint of a turn's provider, with
// its key. It lives only in memory.
type Endpoint struct {
	Provider string
	BaseURL  string
	APIKey   string
}

// SettingsStore keeps provider settings and encrypted keys. Implemented by
// package store.
type SettingsStore interface {
	// ActiveProvider returns the stored active provider and model ("" when
	// none was set).
	ActiveProvider(ctx context.Context) (provider, model string, err error)
	SetActiveProvider(ctx context.Context, provider, model string) error
	// ProviderKeys returns the stored (encrypted) keys by provider.
	ProviderKeys(ctx context.Context) (map[string][]byte, error)
	SetProviderKey(ctx context.Context, provider string, sealed []byte) error
	// DeleteProviderKey removes a stored key and reports whether there was one.
	DeleteProviderKey(ctx context.Context, provider string) (bool, error)
}

// Sealer encrypts provider keys at rest (AES-256-GCM).
type Sealer struct{ aead cipher.AEAD }

// NewSealer returns a Sealer whose key is derived from secret (at least 16
// bytes; PRCHAT_SECRET_KEY or a generated file).
func NewSealer(secret []byte) (*Sealer, error) {
	if len(secret) < 16 {
		return nil, errors.New("the secret key must have at least 16 bytes")
	}
	k := sha256.Sum256(secret)
	block, err := aes.NewCipher(k[:])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// Seal encrypts plain, bound to the provider id.
func (s *Sealer) Seal(provider, plain string) []byte {
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return s.aead.Seal(nonce, nonce, []byte(plain), []byte(provider))
}

// Open decrypts what Seal made for provider.
func (s *Sealer) Open(provider string, sealed []byte) (string, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return "", errors.New("sealed key is too short")
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(provider))
	if err != nil {
		return "", fmt.Errorf("open the stored key of %s (was PRCHAT_SECRET_KEY changed?): %w", provider, err)
	}
	return string(plain), nil
}

// ProvidersConfig holds the settings of Providers.
type ProvidersConfig struct {
	// Providers are the providers questions may name and the provider
	// settings list; Default is the active one until one is set.
	Providers []ProviderConfig
	Default   string
	// Backends are the names of backends a question may name besides the
	// contract's (BackendNames of the deployment's backends).
	Backends []string
}

// Providers keeps the provider settings: which providers a question may
// name, which one the openai backend uses, and their stored keys.
type Providers struct {
	cfg      ProvidersConfig
	settings SettingsStore
	sealer   *Sealer
	masker   *Masker
}

// NewProviders returns the Providers of cfg. settings and sealer keep the
// active provider and the encrypted keys (optional: without them the
// settings answer unavailable, and turns use the environment's keys);
// masker, if set, masks a key stored here from then on.
func NewProviders(cfg ProvidersConfig, settings SettingsStore, sealer *Sealer, masker *Masker) *Providers {
	return &Providers{cfg: cfg, settings: settings, sealer: sealer, masker: orMasker(masker)}
}

func (s *Providers) provider(id string) (ProviderConfig, bool) {
	for _, p := range s.cfg.Providers {
		if p.ID == id {
			return p, true
		}
	}
	return ProviderConfig{}, false
}

func (s *Providers) checkSettings() error {
	if s.settings == nil || s.sealer == nil {
		return Errorf(CodeUnavailable, "provider settings are not available on this server")
	}
	return nil
}

// Settings returns the providers, whether each has a key, and the active
// provider and model.
func (s *Providers) Settings(ctx context.Context) (ProviderSettings, error) {
	if err := s.checkSettings(); err != nil {
		return ProviderSettings{}, err
	}
	active, model, err := s.active(ctx)
	if err != nil {
		return ProviderSettings{}, err
	}
	stored, err := s.settings.ProviderKeys(ctx)
	if err != nil {
		return ProviderSettings{}, err
	}
	out := ProviderSettings{Active: active, Model: model, Providers: []Provider{}}
	for _, p := range s.cfg.Providers {
		v := Provider{ID: p.ID, Name: p.Name, Backend: p.Backend, BaseURL: p.BaseURL, DefaultModel: p.DefaultModel,
			TakesKey: p.Keys, KeyEnv: p.KeyEnv, Active: p.ID == active}
		switch {
		case p.EnvKey != "":
			v.HasKey, v.KeySource = true, "env"
		case stored[p.ID] != nil:
			v.HasKey, v.KeySource = true, "stored"
		}
		out.Providers = append(out.Providers, v)
	}
	return out, nil
}

// active returns the active provider and model: the stored setting, else
// the configured default.
func (s *Providers) active(ctx context.Context) (string, string, error) {
	provider, model, err := s.settings.ActiveProvider(ctx)
	if err != nil {
		return "", "", err
	}
	provider = cmp.Or(provider, s.cfg.Default)
	p, _ := s.provider(provider)
	return provider, cmp.Or(model, p.DefaultModel), nil
}

// SetActive makes provider (and model, if given) the one the openai
// backend uses.
func (s *Providers) SetActive(ctx context.Context, provider, model string) (ProviderSettings, error) {
	if err := s.checkSettings(); err != nil {
		return ProviderSettings{}, err
	}
	p, ok := s.provider(provider)
	if !ok {
		return ProviderSettings{}, Errorf(CodeNotFound, "no provider %q", provider)
	}
	if p.Backend != BackendOpenAI {
		return ProviderSettings{}, Errorf(CodeUnsupportedBackend, "provider %s is the %s backend, not an OpenAI-compatible endpoint", provider, p.Backend)
	}
	if len(model) > maxModelBytes || !utf8.ValidString(model) {
		return ProviderSettings{}, Errorf(CodeInvalid, "model name is too long or not valid UTF-8")
	}
	if err := s.settings.SetActiveProvider(ctx, provider, model); err != nil {
		return ProviderSettings{}, err
	}
	return s.Settings(ctx)
}

// SetKey stores a provider's key, encrypted. It is never returned.
func (s *Providers) SetKey(ctx context.Context, provider, key string) error {
	if err := s.checkSettings(); err != nil {
		return err
	}
	p, ok := s.provider(provider)
	if !ok {
		return Errorf(CodeNotFound, "no provider %q", provider)
	}
	if !p.Keys {
		return Errorf(CodeUnsupportedBackend, "provider %s takes no stored key: its CLI uses its own login", provider)
	}
	if key == "" || len(key) > 4096 || !utf8.ValidString(key) || strings.IndexFunc(key, unicode.IsSpace) >= 0 {
		return Errorf(CodeInvalid, "a key is 1..4096 bytes of text without spaces")
	}
	if err := s.settings.SetProviderKey(ctx, provider, s.sealer.Seal(provider, key)); err != nil {
		return err
	}
	s.masker.refresh(ctx, true)
	return nil
}

// DeleteKey removes a provider's stored key.
func (s *Providers) DeleteKey(ctx context.Context, provider string) error {
	if err := s.checkSettings(); err != nil {
		return err
	}
	if _, ok := s.provider(provider); !ok {
		return Errorf(CodeNotFound, "no provider %q", provider)
	}
	found, err := s.settings.DeleteProviderKey(ctx, provider)
	if err != nil {
		return err
	}
	if !found {
		return Errorf(CodeNotFound, "provider %s has no stored key", provider)
	}
	return nil
}

// endpoint resolves the endpoint of an openai-backend turn: the question's
// provider if it named an endpoint, else the active one; its key from the
// environment, else the stored one.
func (s *Providers) endpoint(ctx context.Context, turnProvider string) (*Endpoint, string, error) {
	id, model := turnProvider, ""
	if p, ok := s.provider(id); !ok || p.Backend != BackendOpenAI {
		if s.settings == nil {
			return nil, "", nil
		}
		var err error
		if id, model, err = s.active(ctx); err != nil {
			return nil, "", err
		}
	}
	p, ok := s.provider(id)
	if !ok {
		return nil, "", nil
	}
	e := &Endpoint{Provider: p.ID, BaseURL: p.BaseURL, APIKey: p.EnvKey}
	if e.APIKey == "" && s.settings != nil && s.sealer != nil {
		keys, err := s.settings.ProviderKeys(ctx)
		if err != nil {
			return nil, "", err
		}
		if sealed := keys[p.ID]; sealed != nil {
			if e.APIKey, err = s.sealer.Open(p.ID, sealed); err != nil {
				return nil, "", err
			}
		}
	}
	return e, cmp.Or(model, p.DefaultModel), nil
}

// names lists the provider ids a question may name: the backends' and the
// configured providers'.
func (s *Providers) names() []string {
	names := allBackends(s.cfg.Backends)
	for _, p := range s.cfg.Providers {
		if !slices.Contains(names, p.ID) {
			names = append(names, p.ID)
		}
	}
	slices.Sort(names)
	return names
}

// backendOf returns the backend that runs a provider ("" for none).
func (s *Providers) backendOf(provider string) string {
	if provider == "" {
		return ""
	}
	if p, ok := s.provider(provider); ok {
		return p.Backend
	}
	return provider // a backend's name
}

// check checks the provider a question names ("" names none).
func (s *Providers) check(provider string) error {
	if provider != "" && !slices.Contains(s.names(), provider) {
		return Errorf(CodeUnsupportedBackend, "provider %q is not supported; use one of %v", provider, s.names())
	}
	return nil
}
