package worker

import "github.com/prchat/prchat/chat"

// chat's roles are what cmd/prchat passes as the Server's TurnRunner, the
// Reconciler's Turns and the Outbox's Replies.
var (
	_ TurnRunner = (*chat.Runner)(nil)
	_ Turns      = (*chat.Turns)(nil)
	_ Replies    = (*chat.Webhooks)(nil)
)
