package worker

import "github.com/prchat/prchat/chat"

// chat's Service is what cmd/prchat passes as the Server's TurnRunner and
// the Reconciler's Turns.
var (
	_ TurnRunner = (*chat.Service)(nil)
	_ Turns      = (*chat.Service)(nil)
)
