// Package openai is prchat's agent backend for OpenAI-compatible chat
// completions endpoints (chat.BackendOpenAI): OpenAI itself, Ollama, vLLM,
// LiteLLM and other gateways, through github.com/sashabaranov/go-openai.
//
// A call runs an agent loop: it streams a chat completion that offers the
// model four read-only tools over the run directory's checkout
// (search_code, read_file, list_files, git_diff), runs the tools the model
// calls and feeds their results back, until the model answers or the turn's
// budget of model calls or tokens is spent (chat.ReasonBudgetExceeded). The
// answer is asked for as JSON: with response_format json_schema where the
// endpoint accepts it, else by instructions alone; chat checks and repairs
// it.
//
// Each model call has its own timeout and is retried with exponential
// backoff and jitter on HTTP 429, 5xx, timeouts and broken connections,
// honouring Retry-After. Each retry is reported as a note event. A call
// that keeps failing ends the turn with chat.ReasonBackendError (or
// chat.ReasonTimeout when every attempt timed out); when the turn's own
// context ends, Run returns its error and chat settles the turn.
//
// Sessions are message histories kept in a Sessions store (the database in
// production), so a turn can fork or resume a session on any worker: a new
// session gets a new id, a fork copies its parent's history under a new id,
// a resume appends to the same one. The history is saved when a call
// answers; a call that fails leaves the session as it was.
package openai

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/chat"
)

// DefaultBaseURL is OpenAI's API.
const DefaultBaseURL = "https://api.openai.com/v1"

// Config configures the openai backend. BaseURL, APIKey and Key are the
// backend's own endpoint; a turn that brings its provider's endpoint
// (chat.RunRequest.Endpoint) uses that one, with its key, instead.
type Config struct {
	// BaseURL is the endpoint's API base, to which /chat/completions is
	// appended; default DefaultBaseURL. Ollama serves
	// http://localhost:11434/v1, vLLM http://host:8000/v1, LiteLLM
	// http://host:4000 (or /v1).
	BaseURL string
	// APIKey is sent as a bearer token. Empty sends none, which local
	// servers such as Ollama accept.
	APIKey string
	// Key, if set, is asked for the API key at the start of every call
	// instead of APIKey, so that keys stored (encrypted) in the database
	// can change while the daemon runs. An error makes the call fail with
	// chat.ReasonBackendUnavailable and Available report it.
	Key func(ctx context.Context) (string, error)
	// Model is the model of calls whose request names none. Without it,
	// such calls fail.
	Model string
	// Sessions stores the sessions' message histories (required).
	Sessions Sessions
	// Mask, if set, masks secrets in a history before it is saved: it is
	// applied to every message's text and every tool call's arguments
	// (chat's masker String method fits). Nil saves histories as they are.
	Mask func(string) string

	// CallTimeout bounds one model call (one streamed completion); default
	// 2m. A call that times out is retried.
	CallTimeout time.Duration
	// MaxAttempts is how often a model call is tried in all before the
	// turn fails; default 4 (three retries).
	MaxAttempts int
	// BackoffBase and BackoffMax shape the wait before a retry when the
	// endpoint does not say how long to wait: BackoffBase doubled for each
	// retry, at most BackoffMax, less a random part of up to half of it
	// (jitter). Defaults 1s and 30s.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// MaxRetryAfter is the longest wait a Retry-After header may ask for;
	// an endpoint that asks for more (or for a wait past the turn's
	// deadline) fails the turn at once. Default 2m.
	MaxRetryAfter time.Duration

	// ToolTimeout bounds one tool run (a search, a git diff); default 30s.
	ToolTimeout time.Duration
	// Git is the git binary git_diff runs; default "git" from PATH.
	Git string

	// Prices adds to or overrides DefaultPrices: USD per million tokens by
	// model name. A model with no price gets a cost reason instead of a
	// cost. Give local models a zero Price to report a cost of 0.
	Prices map[string]Price
	// DisableStreaming makes calls without streaming, for endpoints that
	// cannot stream tool calls. Text then arrives in one text_delta.
	DisableStreaming bool

	// HTTPClient sends the requests; default a client with no overall
	// timeout (CallTimeout bounds each call).
	HTTPClient *http.Client
	// Logger receives what the backend does (models, statuses, sizes,
	// token counts, durations; never keys, prompts, code or answers);
	// default: discard.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	c.BaseURL = strings.TrimRight(cmp.Or(c.BaseURL, DefaultBaseURL), "/")
	c.CallTimeout = cmp.Or(c.CallTimeout, 2*time.Minute)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, 4)
	c.BackoffBase = cmp.Or(c.BackoffBase, time.Second)
	c.BackoffMax = cmp.Or(c.BackoffMax, 30*time.Second)
	c.MaxRetryAfter = cmp.Or(c.MaxRetryAfter, 2*time.Minute)
	c.ToolTimeout = cmp.Or(c.ToolTimeout, 30*time.Second)
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Sessions == nil:
		return errors.New("openai backend: Config.Sessions is required")
	case !strings.HasPrefix(c.BaseURL, "http://") && !strings.HasPrefix(c.BaseURL, "https://"):
		return fmt.Errorf("openai backend: Config.BaseURL %q is not an http(s) URL", c.BaseURL)
	case c.CallTimeout < 0, c.BackoffBase < 0, c.BackoffMax < 0, c.MaxRetryAfter < 0, c.ToolTimeout < 0:
		return errors.New("openai backend: a Config duration is negative")
	case c.MaxAttempts < 0:
		return fmt.Errorf("openai backend: Config.MaxAttempts %d is negative", c.MaxAttempts)
	case c.BackoffMax < c.BackoffBase:
		return fmt.Errorf("openai backend: Config.BackoffMax %s is less than BackoffBase %s", c.BackoffMax, c.BackoffBase)
	}
	for m, p := range c.Prices {
		if p.Input < 0 || p.Output < 0 {
			return fmt.Errorf("openai backend: Config.Prices[%q] is negative", m)
		}
	}
	return nil
}

// Backend is the openai backend. It implements chat.Backend and is safe for
// concurrent use.
type Backend struct {
	cfg    Config
	log    *slog.Logger
	git    agentsession.Git
	prices map[string]Price

	// noSchema holds the endpoints and models that rejected
	// response_format json_schema: their calls ask by instructions only.
	noSchema sync.Map // schemaKey(base URL, model) -> struct{}
}

var _ chat.Backend = (*Backend)(nil)

// New returns the openai backend for cfg.
func New(cfg Config) (*Backend, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	prices := DefaultPrices()
	for m, p := range cfg.Prices {
		prices[m] = p
	}
	return &Backend{
		cfg:    cfg,
		log:    cfg.Logger,
		git:    agentsession.Git{Path: cfg.Git},
		prices: prices,
	}, nil
}

// Name returns chat.BackendOpenAI.
func (b *Backend) Name() string { return chat.BackendOpenAI }

// Available returns nil when the backend can make calls: it returns the
// error of the Key function, if there is one and it fails. It does not call
// the endpoint, and a missing key is found by Run, since a turn may bring
// its own endpoint and key (chat.RunRequest.Endpoint).
func (b *Backend) Available(ctx context.Context) error {
	_, err := b.apiKey(ctx)
	return err
}

// endpoint returns the base URL and key of a call: the request's endpoint
// if it has one, else the backend's own.
func (b *Backend) endpoint(ctx context.Context, req chat.RunRequest) (baseURL, key string, err error) {
	if e := req.Endpoint; e != nil {
		baseURL = strings.TrimRight(cmp.Or(e.BaseURL, b.cfg.BaseURL), "/")
		if !strings.HasPrefix(baseURL, "http://") && !strings.HasPrefix(baseURL, "https://") {
			return "", "", fmt.Errorf("openai backend: the base URL of provider %s is not an http(s) URL", e.Provider)
		}
		key = e.APIKey
	} else {
		baseURL = b.cfg.BaseURL
		if key, err = b.apiKey(ctx); err != nil {
			return "", "", err
		}
	}
	if key == "" && baseURL == DefaultBaseURL {
		return "", "", errors.New("openai backend: no API key for " + DefaultBaseURL)
	}
	return baseURL, key, nil
}

// schemaKey names an endpoint's model in Backend.noSchema.
func schemaKey(baseURL, model string) string { return baseURL + "\x00" + model }

// apiKey returns the key for a call.
func (b *Backend) apiKey(ctx context.Context) (string, error) {
	if b.cfg.Key == nil {
		return b.cfg.APIKey, nil
	}
	key, err := b.cfg.Key(ctx)
	if err != nil {
		return "", fmt.Errorf("openai backend: get the API key: %w", err)
	}
	return key, nil
}

// HasSession returns nil when Sessions holds session ref.ID, else an error
// wrapping chat.ErrSessionGone (or the store's error). The run directory
// plays no part: the history lives in Sessions.
func (b *Backend) HasSession(ctx context.Context, ref chat.SessionRef) error {
	if ref.ID == "" {
		return fmt.Errorf("openai backend: empty session id: %w", chat.ErrSessionGone)
	}
	if _, err := b.cfg.Sessions.Load(ctx, ref.ID); err != nil {
		return fmt.Errorf("openai backend: session %s: %w", ref.ID, err)
	}
	return nil
}
