// Package chat is prchat's domain: the questions a reviewer asks about a saved
// review, the turns that answer them, and the rules every answer must pass.
//
// It holds the types (Repository, Review, Conversation, Turn, Answer, Event),
// the domain errors with their codes, the limits on a question, the answer
// schema and the citation checks, the prompts given to agents, and the Service
// that begins, runs and settles turns. It also declares the small interfaces
// it needs from the outside world — a Store, a Queue, the live Hosts, agent
// Backends and Workspaces for them, and a Publisher for live events — which
// the adapter packages (store, worker, agentsession, api) implement or call.
//
// Questions from pull request comments (webhook.go) are stored once in a
// CommentStore (the inbox of questions and outbox of their answers in one
// record), asked like any other, and answered back through a Forge
// (GitHub, GitLab) by DeliverReplies, each reply once (reply.go).
//
// chat imports no other prchat package (its own sub-packages aside) and no
// adapter library: no HTTP framework, job queue, ORM or model SDK.
package chat
