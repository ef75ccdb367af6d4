// Package codextest helps tests run prchat's codex backend against the real
// Codex CLI and a fake of the model API (package responses).
package codextest

import (
	"testing"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/codex"
	"github.com/prchat/prchat/agentsession/fakeapi/responses"
)

// BinEnv names the variable that points tests at the codex binary.
const BinEnv = "PRCHAT_TEST_CODEX_BIN"

// CachePath is where prchat's CI installs the CLI (@openai/codex) under the
// user's home directory.
const CachePath = ".cache/prchat/cli/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"

// Model is a model name the CLI's catalog knows, for runs against the fake.
const Model = "gpt-5.5"

// Bin returns the codex binary for tests: $PRCHAT_TEST_CODEX_BIN, else
// ~/.cache/prchat/... (CachePath). A CLI that is missing fails the test
// when CI is set or the variable names it, and skips it otherwise.
func Bin(tb testing.TB) string {
	tb.Helper()
	return agentsessiontest.CLI(tb, "codex", BinEnv, CachePath)
}

// Config returns a codex backend configuration that runs the real CLI
// (Bin) against api, with a CODEX_HOME of the test's own and the model
// Model.
func Config(tb testing.TB, api *responses.Server) codex.Config {
	tb.Helper()
	return codex.Config{
		Bin:       Bin(tb),
		Home:      tb.TempDir(),
		Env:       api.CodexEnv(),
		Model:     Model,
		ExtraArgs: api.CodexArgs(),
	}
}
