package agentsession

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// CommonEnv returns the names of the variables that every process an agent
// backend starts may take from the worker's environment: the search path,
// the home directory and user, the temporary directory, the time zone, the
// locale, proxy settings and the TLS trust store. A name ending in '*'
// stands for every name with that prefix.
func CommonEnv() []string {
	return []string{
		"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "TZ",
		"LANG", "LANGUAGE", "LC_*",
		"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
		"NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy",
		"SSL_CERT_FILE", "SSL_CERT_DIR",
	}
}

// GitEnv returns the names of the variables, besides CommonEnv, that the git
// processes preparing run directories take from the worker's environment:
// where git's own configuration is, and how it reaches a remote over SSH
// (the command and the agent's socket). Askpass helpers are not among
// them: git never prompts for credentials here.
func GitEnv() []string {
	return []string{
		"GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM", "XDG_CONFIG_HOME",
		"GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSH_VARIANT", "SSH_AUTH_SOCK",
	}
}

// reservedPrefix starts the names of prchat's own variables, which no agent
// process gets.
const reservedPrefix = "PRCHAT_"

// minContained is the length from which a secret is looked for inside
// values too (a database URL holding its password); a shorter one must be
// the whole value to be recognised.
const minContained = 8

// EnvPolicy decides the environment of a process an agent backend starts.
// A variable of the worker's environment is passed on when its name is in
// CommonEnv, in Allow (what the backend needs to reach its model) or in
// Extra (named by the operator), unless its name starts with PRCHAT_
// (prchat's own settings) or its value holds one of Secrets (the daemon's
// configured secrets: API keys, tokens, passwords). The zero EnvPolicy
// passes on CommonEnv only.
type EnvPolicy struct {
	// Allow names the variables the backend's CLI needs besides CommonEnv:
	// its API key and endpoint variables, its configuration directory. A
	// name ending in '*' stands for every name with that prefix.
	Allow []string
	// Extra names variables the operator passes on on purpose
	// (PRCHAT_AGENT_ENV=NAME,NAME; see ParseEnvNames), such as a cloud's
	// credentials for a model served there. Whole names only.
	Extra []string
	// Secrets are values that no variable of the process may hold, nor
	// contain when they are 8 bytes or longer. Empty ones are ignored.
	Secrets []string
}

// envName is a variable name an operator may pass on.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseEnvNames parses a comma-separated list of variable names, the value
// of PRCHAT_AGENT_ENV, into EnvPolicy.Extra. Spaces around names and empty
// entries are ignored. A name that is not a variable name, or that starts
// with PRCHAT_, is an error naming it.
func ParseEnvNames(list string) ([]string, error) {
	var names []string
	for n := range strings.SplitSeq(list, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		if err := checkExtra(n); err != nil {
			return nil, err
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names, nil
}

func checkExtra(name string) error {
	switch {
	case !envName.MatchString(name):
		return fmt.Errorf("%q is not an environment variable name", name)
	case strings.HasPrefix(strings.ToUpper(name), reservedPrefix):
		return fmt.Errorf("%s: prchat's own PRCHAT_* variables are never passed to an agent", name)
	}
	return nil
}

// Validate checks the policy: Extra holds variable names, none of them
// PRCHAT_*.
func (p EnvPolicy) Validate() error {
	for _, n := range p.Extra {
		if err := checkExtra(n); err != nil {
			return fmt.Errorf("agent environment: %w", err)
		}
	}
	return nil
}

// CheckSettings checks a backend's own settings for its process (KEY=value
// entries such as a Config.Env): each is KEY=value and none sets a PRCHAT_*
// variable.
func CheckSettings(set []string) error {
	for _, kv := range set {
		k, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok || k == "":
			return fmt.Errorf("environment entry %q is not KEY=value", kv)
		case strings.HasPrefix(strings.ToUpper(k), reservedPrefix):
			return fmt.Errorf("environment entry %s: prchat's own PRCHAT_* variables are never passed to an agent", k)
		}
	}
	return nil
}

// Env returns the environment of a process: the variables of base (the
// worker's environment, os.Environ()) that the policy passes on, followed by
// set, the backend's own settings (KEY=value, such as CODEX_HOME or an API
// endpoint it was configured with), which replace variables of the same
// name. Each name appears once. The policy's secrets and the PRCHAT_ prefix
// apply to set too: withheld returns the names of the variables left out
// because their value holds a secret, so the backend can warn about them
// (never log the values).
func (p EnvPolicy) Env(base []string, set ...string) (env, withheld []string) {
	allow := append(append(CommonEnv(), p.Allow...), p.Extra...)
	vals := map[string]string{}
	var order []string
	put := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k != "" && allowed(allow, k) {
			put(k, v)
		}
	}
	for _, kv := range set {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			put(k, v)
		}
	}
	env = make([]string, 0, len(order))
	for _, k := range order {
		v := vals[k]
		switch {
		case strings.HasPrefix(strings.ToUpper(k), reservedPrefix):
		case p.holdsSecret(v):
			withheld = append(withheld, k)
		default:
			env = append(env, k+"="+v)
		}
	}
	return env, withheld
}

// allowed reports whether name is in names, where an entry ending in '*' is
// a prefix.
func allowed(names []string, name string) bool {
	for _, n := range names {
		if prefix, ok := strings.CutSuffix(n, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if n == name {
			return true
		}
	}
	return false
}

// holdsSecret reports whether v is one of the policy's secrets or contains
// one long enough to be looked for inside values.
func (p EnvPolicy) holdsSecret(v string) bool {
	if v == "" {
		return false
	}
	for _, s := range p.Secrets {
		switch {
		case s == "":
		case v == s:
			return true
		case len(s) >= minContained && strings.Contains(v, s):
			return true
		}
	}
	return false
}
