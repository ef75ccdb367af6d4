// Package agentsession runs the agents that answer prchat's turns and
// prepares the directories they run in.
//
// Each agent backend (the Claude Code and Codex CLIs, an OpenAI-compatible
// endpoint, the offline local search, a scripted test double) lives in a
// sub-package and implements chat.Backend. This package holds what they
// share: Workspaces, which implements chat.Workspaces (run directories that
// are git worktrees of a repository's clone at a review's head, seeded with
// the saved review and the conversation's earlier turns under
// chat.PrivateDir), Git for running git safely, and Command for starting a
// process whose whole process tree dies with its context.
//
// # The agents' environment
//
// No process an agent backend starts inherits the worker's environment.
// EnvPolicy builds each one's from an allow-list:
//
//   - CommonEnv, for every process: PATH, HOME, USER, LOGNAME, SHELL,
//     TMPDIR, TZ, LANG, LANGUAGE, LC_*, HTTPS_PROXY, HTTP_PROXY, NO_PROXY,
//     ALL_PROXY (and their lower-case forms), SSL_CERT_FILE, SSL_CERT_DIR;
//   - what the backend needs to reach its model, named by the backend
//     (claude.ModelEnv: ANTHROPIC_*, CLAUDE_CONFIG_DIR, CLAUDE_CODE_*, the
//     CLI's update and telemetry switches, NODE_EXTRA_CA_CERTS;
//     codex.ModelEnv: CODEX_HOME, CODEX_API_KEY, CODEX_CA_CERTIFICATE,
//     OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_ORGANIZATION, OPENAI_PROJECT,
//     and the variable each model provider's env_key names);
//   - the variables the operator names on purpose (PRCHAT_AGENT_ENV=NAME,NAME,
//     parsed by ParseEnvNames into the backends' Config.ExtraEnv), such as
//     AWS_* for Claude on Bedrock;
//   - the backend's own settings (its Config.Env, CODEX_HOME, ...).
//
// Never passed on, whatever the list says: a PRCHAT_* variable (a name
// that would add one is refused), and a variable whose value is, or
// contains, one of the daemon's configured secrets (Config.Secrets of each
// backend; such variables are named in a warning). git, run to prepare run
// directories, gets CommonEnv and GitEnv (its configuration and SSH
// variables: GIT_CONFIG_GLOBAL, GIT_CONFIG_SYSTEM, GIT_CONFIG_NOSYSTEM,
// XDG_CONFIG_HOME, GIT_SSH, GIT_SSH_COMMAND, GIT_SSH_VARIANT,
// SSH_AUTH_SOCK), with prompts and askpass helpers off.
//
// The sub-package agentsessiontest is the conformance suite every backend
// passes; RunChildEnv checks a backend's child environment.
package agentsession
