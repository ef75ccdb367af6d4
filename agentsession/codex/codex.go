// Package codex is prchat's agent backend for the OpenAI Codex CLI
// (chat.BackendCodex): each agent call is one `codex exec --json` run in the
// turn's run directory, under the CLI's read-only sandbox, with the answer's
// JSON Schema as its output schema.
//
// A new session is `codex exec`, resuming one is `codex exec resume <id>`
// and forking one is `codex exec fork <id>`. Sessions live where the CLI
// keeps them, in session files ("rollouts") under $CODEX_HOME/sessions on
// the worker that ran them; the worker's CODEX_HOME is the reviewing
// agent's, so a review written with Codex on that host can be forked.
//
// What the CLI does, as relied on here (checked on codex-cli 0.169.0):
//
//   - Session ids are uuids. A resume or fork argument that is not a uuid
//     is taken as a thread name, so only uuids are passed, and the id the
//     CLI reports in thread.started is checked: the asked-for one on
//     resume, a new one on fork.
//   - A fork's session file holds only what the fork added and points into
//     its parent's file, which must be kept: HasSession follows the chain.
//   - resume and fork reject -C and -s: the run directory is the process's
//     working directory and the sandbox is set with -c sandbox_mode. The
//     sandbox of the session's earlier runs does not carry over.
//   - -c developer_instructions applies to new sessions only; a fork keeps
//     its parent's, so prchat's instructions go before the fork's first
//     prompt instead.
//   - The usage in turn.completed is the thread's running total (a resumed
//     or forked thread starts with what its history cost), so a call's
//     usage and number of model requests are read from the
//     token_usage_record lines of its turn in the session file, and only
//     when that fails from turn.completed.
//   - The events now and then leave out a command that ended at once; the
//     tool calls of the turn in the session file fill the gap.
//   - Commands run in sessions (process groups) of their own, so a
//     cancelled call kills the CLI's descendants as well as its group. The
//     shell snapshot (a background login shell running the worker's shell
//     profile, which may outlive the CLI) is disabled.
//   - Two processes cannot resume one session at once ("already has an
//     active writer"): calls resuming one session run one at a time.
//   - The prompt goes on stdin ("-"), which has no argument-length limit;
//     stdin is closed after it, so the CLI never waits for more.
//   - The output schema is sent without minLength and maxLength, which the
//     API's strict structured outputs do not take; chat checks answers
//     against the whole schema.
package codex

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/chat"
)

// Config configures the codex backend. The zero Config runs "codex" from
// PATH with the CLI's own configuration, and with the environment policy's
// share of the worker's environment (see ModelEnv).
type Config struct {
	// Bin is the codex CLI: a path, or a name looked up in PATH. Default
	// "codex" (cmd/prchat sets it from PRCHAT_CODEX_BIN).
	Bin string
	// Env is the CLI's own settings (KEY=value), added to what the
	// environment policy takes from the worker's environment and replacing
	// variables of the same name: an API key, CODEX_HOME, ... A PRCHAT_*
	// name is refused.
	Env []string
	// ExtraEnv names variables of the worker's environment that the CLI
	// gets on purpose besides CommonEnv, ModelEnv and the env_key variables
	// of its model providers (cmd/prchat sets it from PRCHAT_AGENT_ENV). A
	// PRCHAT_* name is refused.
	ExtraEnv []string
	// Secrets are the daemon's configured secret values (API keys, tokens,
	// passwords): no variable holding one reaches the CLI, whatever its
	// name.
	Secrets []string
	// Home is the CLI's CODEX_HOME, where its sessions are. Default: the
	// CODEX_HOME the CLI would get (from Env, else this process's
	// environment), else ~/.codex, as the CLI itself resolves it. The CLI
	// always runs with CODEX_HOME set to Home, so the backend and the CLI
	// look for sessions in the same place.
	Home string
	// Model is the model of calls whose request names none; default: the
	// model the CLI's configuration chooses.
	Model string
	// ExtraArgs are added to every `codex exec` (new, resume and fork)
	// before the prompt: -c settings such as a model provider, --disable
	// features, ...
	ExtraArgs []string
	// Prices are the USD prices of models per million tokens, used to
	// compute a call's cost; default DefaultPrices(). A model missing from
	// the table leaves the cost unknown, with the reason.
	Prices map[string]Price
	// Logger receives what the backend does (modes, session ids, sizes,
	// durations; never prompts or answers); default: discard.
	Logger *slog.Logger
}

// Backend is the codex backend. It implements chat.Backend and is safe for
// concurrent use: calls that fork or resume sessions of one lineage (a
// review's session and the conversations forked from it) run one at a
// time on a host, and a restore of its files waits for them (the CLI
// refuses a second writer of a session, and a fork whose parent's rollout
// changes or is projected by another process meanwhile); others run in
// parallel.
type Backend struct {
	bin       string
	env       []string
	home      string
	model     string
	extraArgs []string
	prices    map[string]Price
	log       *slog.Logger

	locks agentsession.SessionLocks
	runs  atomic.Int64 // calls made, to keep tool ids unique across calls
}

var _ chat.Backend = (*Backend)(nil)

// New returns the codex backend for cfg. It fails only when CODEX_HOME
// cannot be found (no Home, no CODEX_HOME and no home directory); a missing
// binary is reported by Available, and by Run as backend_unavailable.
func New(cfg Config) (*Backend, error) {
	if err := agentsession.CheckSettings(cfg.Env); err != nil {
		return nil, fmt.Errorf("codex backend: Config.Env: %w", err)
	}
	home, err := resolveHome(cfg)
	if err != nil {
		return nil, err
	}
	policy := agentsession.EnvPolicy{
		Allow:   append(ModelEnv(), envKeys(home, cfg.ExtraArgs)...),
		Extra:   cfg.ExtraEnv,
		Secrets: cfg.Secrets,
	}
	if err := policy.Validate(); err != nil {
		return nil, fmt.Errorf("codex backend: Config.ExtraEnv: %w", err)
	}
	log := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	// SHLVL=1: bash started with a socket as its stdin at shell level 1
	// reads ~/.bashrc, so without it the CLI's command shells would run the
	// worker's profile (and print what it prints) before each command.
	env, withheld := policy.Env(os.Environ(), append([]string{"SHLVL=1"}, append(slices.Clone(cfg.Env), "CODEX_HOME="+home)...)...)
	if len(withheld) > 0 {
		log.Warn("codex: variables not passed to the CLI, their value holds one of the daemon's secrets",
			slog.Any("names", withheld))
	}
	prices := cfg.Prices
	if prices == nil {
		prices = DefaultPrices()
	}
	return &Backend{
		bin:       cmp.Or(cfg.Bin, "codex"),
		env:       env,
		home:      home,
		model:     cfg.Model,
		extraArgs: cfg.ExtraArgs,
		prices:    prices,
		log:       log,
	}, nil
}

// resolveHome returns the CODEX_HOME the CLI uses with cfg.
func resolveHome(cfg Config) (string, error) {
	// The last setting of a variable wins, as in exec.Cmd.Env.
	fromEnv := ""
	for _, kv := range cfg.Env {
		if v, ok := strings.CutPrefix(kv, "CODEX_HOME="); ok {
			fromEnv = v
		}
	}
	home := cmp.Or(cfg.Home, fromEnv, os.Getenv("CODEX_HOME"))
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("codex backend: no Config.Home, no CODEX_HOME and no home directory: %w", err)
		}
		home = filepath.Join(h, ".codex")
	}
	abs, err := filepath.Abs(home)
	if err != nil {
		return "", fmt.Errorf("codex backend: CODEX_HOME %s: %w", home, err)
	}
	return abs, nil
}

// Name returns chat.BackendCodex.
func (b *Backend) Name() string { return chat.BackendCodex }

// Home returns the CODEX_HOME the backend and its CLI use.
func (b *Backend) Home() string { return b.home }

// Available returns nil when the codex binary is found, else why not.
func (b *Backend) Available(context.Context) error {
	if _, err := exec.LookPath(b.bin); err != nil {
		return fmt.Errorf("codex CLI %q is not installed: %w", b.bin, err)
	}
	return nil
}

// HasSession returns nil when ref.ID is a codex session on this host that
// can be resumed or forked: its session file (rollout) is under
// $CODEX_HOME/sessions and so are the files of the sessions it was forked
// from. Otherwise it returns an error wrapping chat.ErrSessionGone; an id
// that is not a uuid is never a session.
func (b *Backend) HasSession(_ context.Context, ref chat.SessionRef) error {
	_, err := b.rollout(ref.ID)
	return err
}

// sessionsDir returns the directory that holds the CLI's session files.
func (b *Backend) sessionsDir() string { return filepath.Join(b.home, "sessions") }

// errString returns err's text, or "" for nil.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
