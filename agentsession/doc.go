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
// The sub-package agentsessiontest is the conformance suite every backend
// passes.
package agentsession
