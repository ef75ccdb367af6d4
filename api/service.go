package api

import (
	"context"
	"errors"
	"time"

	"github.com/prchat/prchat/chat"
)

// Domain is what the API asks of prchat's domain: one small interface per
// role of chat behind its routes.
type Domain struct {
	Ready         Readiness
	Repositories  Repositories
	Turns         Turns
	Subscriptions Subscriptions
	Providers     Providers
	Reports       Reports
	// Webhooks, if nil, leaves the webhook routes answering unavailable.
	Webhooks Webhooks
}

func (d Domain) validate() error {
	if d.Ready == nil || d.Repositories == nil || d.Turns == nil || d.Subscriptions == nil || d.Providers == nil || d.Reports == nil {
		return errors.New("api: every role of the domain but Webhooks is required")
	}
	return nil
}

// Readiness tells /readyz whether the database and the queue answer.
// *chat.Readiness implements it.
type Readiness interface {
	Ready(ctx context.Context) error
}

// Repositories registers and reads repositories and their reviews.
// *chat.Admin implements it.
type Repositories interface {
	RegisterRepository(ctx context.Context, r chat.Repository) (chat.Repository, bool, error)
	Repository(ctx context.Context, name string) (chat.Repository, error)
	Repositories(ctx context.Context) ([]chat.Repository, error)
	RecordReview(ctx context.Context, repo string, r chat.Review) (chat.Review, error)
	Review(ctx context.Context, repo string, pr, version int) (chat.Review, error)
	Reviews(ctx context.Context, repo string, pr int) ([]chat.Review, error)
	// PutReviewSession stores a review version's agent session file.
	PutReviewSession(ctx context.Context, repo string, pr, version int, data []byte) error
}

// Turns asks questions, cancels turns and reads conversations.
// *chat.Turns implements it.
type Turns interface {
	Ask(ctx context.Context, repo string, pr, version int, a chat.Ask) (chat.Conversation, chat.Turn, error)
	Continue(ctx context.Context, conversationID string, a chat.Ask) (chat.Turn, error)
	Cancel(ctx context.Context, conversationID string, number int) (chat.Turn, error)
	Conversation(ctx context.Context, id string) (chat.Conversation, error)
	Conversations(ctx context.Context, repo string, pr int) ([]chat.Conversation, error)
	DeleteConversation(ctx context.Context, id string) error
}

// Subscriptions follow turns and repository feeds. *chat.Subscriptions
// implements it.
type Subscriptions interface {
	// WaitTurn returns a turn once it is settled, or as it is when wait
	// ends; a zero wait returns it at once.
	WaitTurn(ctx context.Context, conversationID string, number int, wait time.Duration) (chat.Turn, error)
	// Subscribe returns a turn's events after the event after, ending with
	// its final event; SubscribeFeed a repository's feed until ctx ends.
	Subscribe(ctx context.Context, conversationID string, number int, after int64) (*chat.Subscription, error)
	SubscribeFeed(ctx context.Context, repo, after string) (<-chan chat.FeedEvent, error)
	Transcript(ctx context.Context, conversationID string, number int) ([]chat.Event, error)
}

// Providers shows and changes the provider settings. *chat.Providers
// implements it.
type Providers interface {
	Settings(ctx context.Context) (chat.ProviderSettings, error)
	SetActive(ctx context.Context, provider, model string) (chat.ProviderSettings, error)
	SetKey(ctx context.Context, provider, key string) error
	DeleteKey(ctx context.Context, provider string) error
}

// Reports are the dashboard's lists and figures: a repository's reviewed
// pull requests, lines of a file at a review's head, the team figures.
// *chat.Reports implements it.
type Reports interface {
	PullRequests(ctx context.Context, repo string) ([]chat.PullRequest, error)
	FileLines(ctx context.Context, repo string, pr, version int, path string, start, end int) (chat.FileLines, error)
	Stats(ctx context.Context, window time.Duration, repo string) (chat.Stats, error)
}

// Webhooks take questions from pull request comments: each stored once,
// asked at once when it can be. *chat.Webhooks implements it.
type Webhooks interface {
	ReceiveComment(ctx context.Context, c chat.Comment, autoRegister bool) (chat.Receipt, error)
}
