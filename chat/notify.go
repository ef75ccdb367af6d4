package chat

import (
	"context"
	"log/slog"
)

// notifier sends a turn's stored events and state changes live through
// a Publisher; without one it sends nothing (clients read the store).
type notifier struct {
	publisher Publisher
	log       *slog.Logger
	now       Clock
}

func (n notifier) publish(ctx context.Context, turnID string, evs []Event, feed ...FeedEvent) {
	if n.publisher == nil || len(evs)+len(feed) == 0 {
		return
	}
	if err := n.publisher.Publish(ctx, turnID, evs, feed); err != nil {
		n.log.WarnContext(ctx, "publish events", slog.String("turn", turnID), slog.Any("err", err))
	}
}

// feedEvent is a turn's state change for its repository's feed.
func (n notifier) feedEvent(repo string, pr int, t Turn, state State, reason Reason) FeedEvent {
	return FeedEvent{Type: "turn", Repository: repo, PR: pr, ConversationID: t.ConversationID, Turn: t.Number, State: state, Reason: reason, At: n.now()}
}
