// Package forge is what prchat's code-host adapters share; each forge has
// one package of its own beneath it (forge/github, forge/gitlab) that owns
// both directions of talking to that forge: reading its webhook deliveries
// (payloads and their signature or token), its REST API client (pull
// requests, reactions, replies, the account prchat posts as, git
// credentials), and the form of its line links in a reply.
//
// The forges sit in an adapter of their own, beside api and worker, rather
// than under api: the API reads a forge's deliveries, but the outbox that
// posts the answers runs on workers, and neither should reach the other's
// adapter for it. Like every adapter, a forge package imports chat and its
// forge's client library, and no other adapter: the API sees a forge's
// webhook half through api.WebhookReader, chat sees the API half through
// chat.Forge, and cmd/prchat wires them.
//
// This package holds the parts both forges need: the webhook settings
// (WebhookConfig), the cache of the account prchat posts as (Self), the
// bounded event label of the metrics (EventLabel), the escaping of a path
// in a web link (LinkPath) and the choice of the forge whose credentials
// go with a clone URL (Credentials). Package forge/forgetest is the core
// that the fakes of the forges' REST APIs share.
package forge
