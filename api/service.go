package api

import (
	"context"
	"time"

	"github.com/prchat/prchat/chat"
)

// Service is what the API asks of prchat's domain: the questions, lookups,
// subscriptions and settings behind its routes. *chat.Service implements it;
// the API's tests may use another.
type Service interface {
	// Ready reports whether the database and the queue answer.
	Ready(ctx context.Context) error

	RegisterRepository(ctx context.Context, r chat.Repository) (chat.Repository, bool, error)
	Repository(ctx context.Context, name string) (chat.Repository, error)
	Repositories(ctx context.Context) ([]chat.Repository, error)

	RecordReview(ctx context.Context, repo string, r chat.Review) (chat.Review, error)
	Review(ctx context.Context, repo string, pr, version int) (chat.Review, error)
	Reviews(ctx context.Context, repo string, pr int) ([]chat.Review, error)
	// PutReviewSession stores a review version's agent session file.
	PutReviewSession(ctx context.Context, repo string, pr, version int, data []byte) error

	Ask(ctx context.Context, repo string, pr, version int, a chat.Ask) (chat.Conversation, chat.Turn, error)
	Continue(ctx context.Context, conversationID string, a chat.Ask) (chat.Turn, error)
	Conversation(ctx context.Context, id string) (chat.Conversation, error)
	Conversations(ctx context.Context, repo string, pr int) ([]chat.Conversation, error)
	DeleteConversation(ctx context.Context, id string) error

	// WaitTurn returns a turn once it is settled, or as it is when wait
	// ends; a zero wait returns it at once.
	WaitTurn(ctx context.Context, conversationID string, number int, wait time.Duration) (chat.Turn, error)
	Cancel(ctx context.Context, conversationID string, number int) (chat.Turn, error)
	// Subscribe returns a turn's events after the event after, ending with
	// its final event; SubscribeFeed a repository's feed until ctx ends.
	Subscribe(ctx context.Context, conversationID string, number int, after int64) (*chat.Subscription, error)
	SubscribeFeed(ctx context.Context, repo, after string) (<-chan chat.FeedEvent, error)
	Transcript(ctx context.Context, conversationID string, number int) ([]chat.Event, error)

	Providers(ctx context.Context) (chat.ProviderSettings, error)
	SetActiveProvider(ctx context.Context, provider, model string) (chat.ProviderSettings, error)
	SetProviderKey(ctx context.Context, provider, key string) error
	DeleteProviderKey(ctx context.Context, provider string) error

	// PullRequests lists a repository's reviewed pull requests; FileLines
	// reads lines of a file at a review's head; Stats are the team figures.
	PullRequests(ctx context.Context, repo string) ([]chat.PullRequest, error)
	FileLines(ctx context.Context, repo string, pr, version int, path string, start, end int) (chat.FileLines, error)
	Stats(ctx context.Context, window time.Duration, repo string) (chat.Stats, error)
	// ReceiveComment takes a question from a pull request's comment (the
	// webhooks): stored once, asked at once when it can be.
	ReceiveComment(ctx context.Context, c chat.Comment, autoRegister bool) (chat.Receipt, error)
}
