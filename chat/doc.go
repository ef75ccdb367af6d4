// Package chat is prchat's domain: the questions a reviewer asks about a saved
// review, the turns that answer them, and the rules every answer must pass.
//
// It holds the types (Repository, Review, Conversation, Turn, Answer, Event),
// the domain errors with their codes, the limits on a question, the answer
// schema and the citation checks, the prompts given to agents, and the
// domain's roles, each with the store interface it needs (declared beside
// it, implemented by package store):
//
//   - Turns (turns.go, TurnStore) begins turns — one begin for the API and
//     for PR comments alike —, cancels and settles them, and reads
//     conversations; Runner (run.go, RunStore) runs them on a worker.
//   - Subscriptions (subscribe.go, EventStore) stream a turn's events, wait
//     for it to settle and follow a repository's feed.
//   - Webhooks (webhook.go, CommentStore and WebhookTurnStore) are the inbox
//     of questions from PR comments and the outbox of their answers, posted
//     back through a Forge (GitHub, GitLab) each once (reply.go).
//   - Admin (admin.go, AdminStore) registers repositories and records
//     reviews; Providers (providers.go, SettingsStore) keeps the provider
//     settings and keys; Access (access.go, TokenStore) the API tokens.
//   - Reports (stats.go, ReportStore) are the team figures, the reviewed pull
//     requests and the file views; Readiness (ready.go) the probe of the
//     database and the queue.
//
// The roles of one process share a Catalog (catalog.go, CatalogStore): the
// cached repositories and reviews, shown to a request's token only when it
// may see them. cmd/prchat wires the roles a process needs; package
// chattest wires them all for tests. The other interfaces chat needs from
// the outside world — a Queue, the live Hosts, agent Backends and
// Workspaces for them, a Publisher and a Follower of live events — are in
// interfaces.go; the adapter packages (store, worker, agentsession, api)
// implement or call them.
//
// chat imports no other prchat package (its own sub-packages aside) and no
// adapter library: no HTTP framework, job queue, ORM or model SDK.
package chat
