package codex

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// ModelEnv returns the names of the variables, besides
// agentsession.CommonEnv, that the CLI takes from the worker's environment
// whatever its configuration: its home (CODEX_HOME), the OpenAI API's key,
// endpoint, organisation and project, and its CA certificate. The variable
// that a model provider's env_key names (in $CODEX_HOME/config.toml or in a
// -c setting of Config.ExtraArgs) is passed on too.
func ModelEnv() []string {
	return []string{
		"CODEX_HOME", "CODEX_API_KEY", "CODEX_CA_CERTIFICATE",
		"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORGANIZATION", "OPENAI_PROJECT",
	}
}

// envKeys returns the variables that the model providers configured for
// the CLI read their API key from: the env_key settings of
// home/config.toml and of the -c settings in args. A file or setting that
// cannot be read adds nothing.
func envKeys(home string, args []string) []string {
	var keys []string
	add := func(v any) {
		walkEnvKeys(v, func(name string) {
			if !slices.Contains(keys, name) {
				keys = append(keys, name)
			}
		})
	}
	if raw, err := os.ReadFile(filepath.Join(home, "config.toml")); err == nil {
		var doc map[string]any
		if _, err := toml.Decode(string(raw), &doc); err == nil {
			add(doc)
		}
	}
	for i, a := range args {
		var setting string
		switch {
		case (a == "-c" || a == "--config") && i+1 < len(args):
			setting = args[i+1]
		case strings.HasPrefix(a, "--config="):
			setting = strings.TrimPrefix(a, "--config=")
		default:
			continue
		}
		path, value, ok := strings.Cut(setting, "=")
		if !ok {
			continue
		}
		var doc map[string]any
		if _, err := toml.Decode("v = "+value, &doc); err != nil {
			continue
		}
		if last := path[strings.LastIndexByte(path, '.')+1:]; strings.TrimSpace(last) == "env_key" {
			add(map[string]any{"env_key": doc["v"]})
			continue
		}
		add(doc["v"])
	}
	return keys
}

// walkEnvKeys calls f with the string value of every env_key in v, a
// decoded TOML value.
func walkEnvKeys(v any, f func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "env_key" && s != "" {
				f(s)
				continue
			}
			walkEnvKeys(x, f)
		}
	case []map[string]any:
		for _, x := range v {
			walkEnvKeys(x, f)
		}
	case []any:
		for _, x := range v {
			walkEnvKeys(x, f)
		}
	}
}
