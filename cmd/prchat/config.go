package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prchat/prchat/cmd/internal/cliflag"
	"github.com/prchat/prchat/cmd/internal/secretkey"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/worker"
)

// Config is every setting of prchat, read from PRCHAT_* environment
// variables and overridden by flags of the same name.
type Config struct {
	Listen      string
	DataDir     string
	DatabaseURL string
	RedisURL    string
	WorkerID    string
	Concurrency int
	TurnTimeout time.Duration
	MaxRepairs  int
	// MaxSessionBytes is the largest agent session file stored
	// (PRCHAT_MAX_SESSION_BYTES).
	MaxSessionBytes int64
	MaxCalls        int
	MaxTokens       int64
	DefaultBackend  string
	OpenAIBaseURL   string
	OpenAIAPIKey    string
	OpenAIModel     string
	ClaudeBin       string
	CodexBin        string
	// AgentEnv names variables passed on to the agent CLIs on purpose.
	AgentEnv     []string
	GitHubSecret string
	GitHubToken  string
	GitHubAPIURL string
	// The GitHub and GitLab webhooks (DESIGN.md §6 "Webhooks").
	GitHubSecretPrevious    string
	GitHubAppID             int64
	GitHubAppPrivateKeyFile string
	GitHubAutoRegister      bool
	GitLabSecret            string
	GitLabToken             string
	GitLabAPIURL            string
	GitLabAutoRegister      bool
	// WebhookAskers says whose /ask comments are taken: writers, members
	// or anyone (chat.WebhooksConfig.Askers).
	WebhookAskers string
	SecretKey     string
	// SecretKeyFile holds the key when SecretKey is empty; made (random,
	// owner-only) by the first process that needs it. Default: secret.key
	// in DataDir.
	SecretKeyFile string
	// Endpoints of OpenAI-compatible servers besides OpenAI's own.
	OllamaBaseURL, OllamaAPIKey, OllamaModel    string
	VLLMBaseURL, VLLMAPIKey, VLLMModel          string
	LiteLLMBaseURL, LiteLLMAPIKey, LiteLLMModel string
	ReconcileInterval                           time.Duration
	ShutdownGrace                               time.Duration
	PollInterval                                time.Duration
	IdlePollInterval                            time.Duration
	LogFormat                                   string
	LogLevel                                    string
	// CPUProfile, if set, is the file the daemon writes a CPU profile of
	// its run to (flag --cpuprofile of serve, api and worker only; a
	// measuring aid: prchat-bench --cpuprofile profiles its daemons so).
	CPUProfile string
	// Access (see access.go).
	InsecureNoAuth     bool
	ReposRoots         string
	AllowFileURLs      bool
	PublicURL          string
	CloneAllowPrivate  bool
	RateRequests       chat.Rate
	RateQuestionsRepo  chat.Rate
	RateQuestionsToken chat.Rate
}

// setting is one configuration entry: its variable, flag and default.
type setting struct {
	env  string
	help string
	def  string
	set  func(c *Config, v string) error
}

func (s setting) flagName() string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s.env, "PRCHAT_")), "_", "-")
}

func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "prchat")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "prchat")
	}
	return "prchat-data"
}

// defaultWorkerID is the host name: $HOSTNAME, which container runtimes set
// to each container's own, else the kernel's.
func defaultWorkerID() string {
	if h := os.Getenv("HOSTNAME"); h != "" {
		return h
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "worker"
	}
	return h
}

// settings lists every setting in the order --help shows them.
func settings() []setting {
	return append([]setting{
		{env: "PRCHAT_LISTEN", def: "127.0.0.1:8080", help: "address the HTTP API listens on", set: cliflag.String(func(c *Config) *string { return &c.Listen })},
		{env: "PRCHAT_DATA_DIR", def: defaultDataDir(), help: "directory for the embedded database, clones and run directories", set: cliflag.String(func(c *Config) *string { return &c.DataDir })},
		{env: "PRCHAT_DATABASE_URL", def: "", help: "Postgres URL (postgres://...); empty: embedded SQLite in the data directory", set: cliflag.String(func(c *Config) *string { return &c.DatabaseURL })},
		{env: "PRCHAT_REDIS_URL", def: "", help: "Redis URL (redis://host:6379/0); empty: embedded in-process Redis (serve only)", set: cliflag.String(func(c *Config) *string { return &c.RedisURL })},
		{env: "PRCHAT_WORKER_ID", def: defaultWorkerID(), help: "this worker's id; its queue is host:<id>", set: cliflag.String(func(c *Config) *string { return &c.WorkerID })},
		{env: "PRCHAT_CONCURRENCY", def: strconv.Itoa(worker.DefaultConcurrency()), help: "turns a worker runs at once; the default comes from this host's memory (its cgroup's limit if lower): 256 MiB per turn after 1 GiB for the host, at most 8 per core and 64", set: cliflag.Int(func(c *Config) *int { return &c.Concurrency })},
		{env: "PRCHAT_TURN_TIMEOUT", def: "10m", help: "time limit of one turn, repairs included", set: cliflag.PositiveDuration(func(c *Config) *time.Duration { return &c.TurnTimeout })},
		{env: "PRCHAT_MAX_REPAIRS", def: "2", help: "how often an invalid answer is sent back to the agent", set: cliflag.Int(func(c *Config) *int { return &c.MaxRepairs })},
		{env: "PRCHAT_MAX_CALLS", def: "40", help: "model calls allowed per turn", set: cliflag.Int(func(c *Config) *int { return &c.MaxCalls })},
		{env: "PRCHAT_MAX_TOKENS", def: "10000000", help: "tokens (input, cached input included, and output) allowed per turn", set: func(c *Config, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("not a whole number: %q", v)
			}
			c.MaxTokens = n
			return nil
		}},
		{env: "PRCHAT_MAX_SESSION_BYTES", def: strconv.Itoa(chat.DefaultMaxSessionBytes), help: "largest agent session file a review may upload (PUT .../reviews/{version}/session) and a worker stores after a turn", set: func(c *Config, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return fmt.Errorf("not a positive whole number of bytes: %q", v)
			}
			c.MaxSessionBytes = n
			return nil
		}},
		{env: "PRCHAT_DEFAULT_BACKEND", def: "local", help: "backend for conversations of reviews that name none: " + strings.Join(defaultBackends(), ", "), set: cliflag.OneOf(defaultBackends(), func(c *Config) *string { return &c.DefaultBackend })},
		{env: "PRCHAT_OPENAI_BASE_URL", def: "https://api.openai.com/v1", help: "OpenAI-compatible endpoint", set: cliflag.String(func(c *Config) *string { return &c.OpenAIBaseURL })},
		{env: "PRCHAT_OPENAI_API_KEY", def: "", help: "API key of the OpenAI-compatible endpoint", set: cliflag.String(func(c *Config) *string { return &c.OpenAIAPIKey })},
		{env: "PRCHAT_OPENAI_MODEL", def: "gpt-4.1-mini", help: "model of the openai backend", set: cliflag.String(func(c *Config) *string { return &c.OpenAIModel })},
		{env: "PRCHAT_CLAUDE_BIN", def: "claude", help: "Claude Code CLI binary", set: cliflag.String(func(c *Config) *string { return &c.ClaudeBin })},
		{env: "PRCHAT_CODEX_BIN", def: "codex", help: "Codex CLI binary", set: cliflag.String(func(c *Config) *string { return &c.CodexBin })},
		{env: "PRCHAT_AGENT_ENV", def: "", help: "comma-separated names of further environment variables the agent CLIs may see (never PRCHAT_*; see README)", set: func(c *Config, v string) error {
			names, err := agentsession.ParseEnvNames(v)
			c.AgentEnv = names
			return err
		}},
		{env: "PRCHAT_GITHUB_WEBHOOK_SECRET", def: "", help: "secret that signs GitHub webhooks", set: cliflag.String(func(c *Config) *string { return &c.GitHubSecret })},
		{env: "PRCHAT_GITHUB_TOKEN", def: "", help: "token to post answers back to GitHub", set: cliflag.String(func(c *Config) *string { return &c.GitHubToken })},
		{env: "PRCHAT_GITHUB_API_URL", def: "https://api.github.com", help: "GitHub API base URL (GitHub Enterprise: https://HOST/api/v3)", set: cliflag.String(func(c *Config) *string { return &c.GitHubAPIURL })},
		{env: "PRCHAT_GITHUB_WEBHOOK_SECRET_PREVIOUS", def: "", help: "the previous GitHub webhook secret, also accepted while the secret is rotated", set: cliflag.String(func(c *Config) *string { return &c.GitHubSecretPrevious })},
		{env: "PRCHAT_GITHUB_APP_ID", def: "", help: "GitHub App id: post answers and clone as the App (with PRCHAT_GITHUB_APP_PRIVATE_KEY_FILE) instead of PRCHAT_GITHUB_TOKEN", set: func(c *Config, v string) error {
			if v == "" {
				return nil
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return fmt.Errorf("not a GitHub App id: %q", v)
			}
			c.GitHubAppID = n
			return nil
		}},
		{env: "PRCHAT_GITHUB_APP_PRIVATE_KEY_FILE", def: "", help: "PEM file of the GitHub App's private key", set: cliflag.String(func(c *Config) *string { return &c.GitHubAppPrivateKeyFile })},
		{env: "PRCHAT_GITHUB_AUTO_REGISTER", def: "0", help: "1: register an unknown repository from a signed GitHub event's clone_url; 0: ignore its events", set: cliflag.Bool(func(c *Config) *bool { return &c.GitHubAutoRegister })},
		{env: "PRCHAT_GITLAB_WEBHOOK_SECRET", def: "", help: "secret token of GitLab webhooks (X-Gitlab-Token)", set: cliflag.String(func(c *Config) *string { return &c.GitLabSecret })},
		{env: "PRCHAT_GITLAB_TOKEN", def: "", help: "GitLab token to post answers back (api scope)", set: cliflag.String(func(c *Config) *string { return &c.GitLabToken })},
		{env: "PRCHAT_GITLAB_API_URL", def: "https://gitlab.com/api/v4", help: "GitLab API base URL", set: cliflag.String(func(c *Config) *string { return &c.GitLabAPIURL })},
		{env: "PRCHAT_GITLAB_AUTO_REGISTER", def: "0", help: "1: register an unknown project from a signed GitLab event's clone URL; 0: ignore its events", set: cliflag.Bool(func(c *Config) *bool { return &c.GitLabAutoRegister })},
		{env: "PRCHAT_WEBHOOK_ASKERS", def: "writers", help: "whose /ask comments are answered: writers (people who can push), members (also the organisation's or group's members) or anyone; others get the confused reaction and no answer", set: cliflag.OneOf([]string{chat.AskersWriters, chat.AskersMembers, chat.AskersAnyone}, func(c *Config) *string { return &c.WebhookAskers })},
		{env: "PRCHAT_SECRET_KEY", def: "", help: "key that seals stored provider keys and agent session files (any string of 16+ bytes; every process of a deployment must use the same one); empty: the key in PRCHAT_SECRET_KEY_FILE", set: cliflag.String(func(c *Config) *string { return &c.SecretKey })},
		{env: "PRCHAT_SECRET_KEY_FILE", def: "", help: "file holding the secret key when PRCHAT_SECRET_KEY is empty, made (random, owner-only) by the first process that finds none; empty: secret.key in the data directory", set: cliflag.String(func(c *Config) *string { return &c.SecretKeyFile })},
		{env: "PRCHAT_OLLAMA_BASE_URL", def: "http://127.0.0.1:11434/v1", help: "Ollama's OpenAI-compatible endpoint (provider ollama)", set: cliflag.String(func(c *Config) *string { return &c.OllamaBaseURL })},
		{env: "PRCHAT_OLLAMA_API_KEY", def: "", help: "API key for the ollama provider (usually none)", set: cliflag.String(func(c *Config) *string { return &c.OllamaAPIKey })},
		{env: "PRCHAT_OLLAMA_MODEL", def: "qwen2.5-coder:14b", help: "default model of the ollama provider", set: cliflag.String(func(c *Config) *string { return &c.OllamaModel })},
		{env: "PRCHAT_VLLM_BASE_URL", def: "http://127.0.0.1:8000/v1", help: "vLLM's OpenAI-compatible endpoint (provider vllm)", set: cliflag.String(func(c *Config) *string { return &c.VLLMBaseURL })},
		{env: "PRCHAT_VLLM_API_KEY", def: "", help: "API key for the vllm provider", set: cliflag.String(func(c *Config) *string { return &c.VLLMAPIKey })},
		{env: "PRCHAT_VLLM_MODEL", def: "", help: "default model of the vllm provider (the served model's name)", set: cliflag.String(func(c *Config) *string { return &c.VLLMModel })},
		{env: "PRCHAT_LITELLM_BASE_URL", def: "http://127.0.0.1:4000/v1", help: "LiteLLM proxy's endpoint (provider litellm)", set: cliflag.String(func(c *Config) *string { return &c.LiteLLMBaseURL })},
		{env: "PRCHAT_LITELLM_API_KEY", def: "", help: "API key (virtual key) for the litellm provider", set: cliflag.String(func(c *Config) *string { return &c.LiteLLMAPIKey })},
		{env: "PRCHAT_LITELLM_MODEL", def: "", help: "default model of the litellm provider", set: cliflag.String(func(c *Config) *string { return &c.LiteLLMModel })},
		{env: "PRCHAT_POLL_INTERVAL", def: worker.DefaultTaskCheckInterval.String(), help: "how long a worker whose queues just emptied waits before it looks for new turns again, unless an enqueue wakes it (each look is one Redis script call per queue)", set: cliflag.DurationBetween(time.Millisecond, 0, func(c *Config) *time.Duration { return &c.PollInterval })},
		{env: "PRCHAT_IDLE_POLL_INTERVAL", def: worker.DefaultIdlePollInterval.String(), help: "how often a worker whose queues have been empty for a second looks at them when no enqueue wakes it (1ms..10s, and no less than PRCHAT_POLL_INTERVAL; bounds a turn's wait when a wake-up is lost)", set: cliflag.DurationBetween(time.Millisecond, 10*time.Second, func(c *Config) *time.Duration { return &c.IdlePollInterval })},
		{env: "PRCHAT_SHUTDOWN_GRACE", def: "10s", help: "how long a stopping worker lets its running turns finish before it hands them to a live worker (a second SIGTERM ends it at once)", set: cliflag.DurationBetween(time.Millisecond, 0, func(c *Config) *time.Duration { return &c.ShutdownGrace })},
		{env: "PRCHAT_RECONCILE_INTERVAL", def: "5s", help: "how often the reconciler looks for lost or stuck turns", set: cliflag.Duration(func(c *Config) *time.Duration { return &c.ReconcileInterval })},
		{env: "PRCHAT_LOG_FORMAT", def: "text", help: "log format: text or json", set: cliflag.String(func(c *Config) *string { return &c.LogFormat })},
		{env: "PRCHAT_LOG_LEVEL", def: "info", help: "log level: debug, info, warn or error", set: cliflag.String(func(c *Config) *string { return &c.LogLevel })},
	}, accessSettings()...)
}

// defaultBackends are the backends PRCHAT_DEFAULT_BACKEND may name.
func defaultBackends() []string {
	return []string{chat.BackendLocal, chat.BackendOpenAI, chat.BackendClaudeCode, chat.BackendCodex}
}

// loadConfig reads the environment, then the flags of a command; asked
// for help it prints the settings to help.
func loadConfig(cmd string, args []string, getenv func(string) string, help io.Writer) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("prchat "+cmd, flag.ContinueOnError)
	daemon := cmd != "migrate"
	if daemon {
		fs.StringVar(&c.CPUProfile, "cpuprofile", "", "")
	}
	all := settings()
	values := make([]*string, len(all))
	for i, s := range all {
		values[i] = fs.String(s.flagName(), cmp.Or(getenv(s.env), s.def), s.help)
	}
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "Usage: prchat %s [flags]\n\nEvery flag can also be set by its environment variable.\n\n", cmd)
		for _, s := range all {
			def := s.def
			if def == "" {
				def = `""`
			}
			fmt.Fprintf(out, "  --%s  (%s, default %s)\n        %s\n", s.flagName(), s.env, def, s.help)
		}
		if daemon {
			fmt.Fprint(out, "\nA measuring aid, never on by default:\n\n"+
				"  --cpuprofile FILE  (flag only, default none)\n"+
				"        write a CPU profile of the daemon's run, from its start to its stop,\n"+
				"        to FILE\n")
		}
	}
	if err := cliflag.Parse(fs, args, help); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, cliflag.Usagef("unexpected argument %q", fs.Arg(0))
	}
	for i, s := range all {
		if err := s.set(&c, *values[i]); err != nil {
			return c, fmt.Errorf("%s (--%s): %w", s.env, s.flagName(), err)
		}
	}
	return c, nil
}

// secrets returns the configured secret values, which are masked wherever
// they would appear.
func (c Config) secrets() []string {
	out := []string{c.OpenAIAPIKey, c.GitHubSecret, c.GitHubSecretPrevious, c.GitHubToken, c.GitLabSecret, c.GitLabToken, c.SecretKey, c.OllamaAPIKey, c.VLLMAPIKey, c.LiteLLMAPIKey}
	for _, raw := range []string{c.DatabaseURL, c.RedisURL} {
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok {
				// The masker adds its escaped spellings.
				out = append(out, p)
			}
		}
	}
	return out
}

// providers lists the providers a question may name: the OpenAI-compatible
// endpoints the openai backend runs, and the agent CLIs and local backend.
func (c Config) providers() []chat.ProviderConfig {
	return []chat.ProviderConfig{
		{ID: "openai", Name: "OpenAI", Backend: chat.BackendOpenAI, BaseURL: c.OpenAIBaseURL, KeyEnv: "PRCHAT_OPENAI_API_KEY", EnvKey: c.OpenAIAPIKey, Keys: true, DefaultModel: c.OpenAIModel},
		{ID: "ollama", Name: "Ollama", Backend: chat.BackendOpenAI, BaseURL: c.OllamaBaseURL, KeyEnv: "PRCHAT_OLLAMA_API_KEY", EnvKey: c.OllamaAPIKey, Keys: true, DefaultModel: c.OllamaModel},
		{ID: "vllm", Name: "vLLM", Backend: chat.BackendOpenAI, BaseURL: c.VLLMBaseURL, KeyEnv: "PRCHAT_VLLM_API_KEY", EnvKey: c.VLLMAPIKey, Keys: true, DefaultModel: c.VLLMModel},
		{ID: "litellm", Name: "LiteLLM", Backend: chat.BackendOpenAI, BaseURL: c.LiteLLMBaseURL, KeyEnv: "PRCHAT_LITELLM_API_KEY", EnvKey: c.LiteLLMAPIKey, Keys: true, DefaultModel: c.LiteLLMModel},
		{ID: chat.BackendClaudeCode, Name: "Claude Code CLI", Backend: chat.BackendClaudeCode},
		{ID: chat.BackendCodex, Name: "Codex CLI", Backend: chat.BackendCodex},
		{ID: chat.BackendLocal, Name: "Local search (no model)", Backend: chat.BackendLocal},
	}
}

// secretKey returns PRCHAT_SECRET_KEY, or the key in PRCHAT_SECRET_KEY_FILE
// (by default secret.key in the data directory), which the first process
// to find none makes.
func (c Config) secretKey() ([]byte, error) {
	return secretkey.Load(c.SecretKey, cmp.Or(c.SecretKeyFile, filepath.Join(c.DataDir, "secret.key")))
}
