package chat

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// CatalogStore reads the repositories and reviews every role looks up.
// Implemented by package store.
type CatalogStore interface {
	Repository(ctx context.Context, name string) (Repository, error)
	// RepositoryByForgeProject returns the repository whose ForgeProject
	// is project (CodeRepositoryNotFound when none names it).
	RepositoryByForgeProject(ctx context.Context, project string) (Repository, error)
	// Review returns a version of a PR's review; version 0 is the latest.
	Review(ctx context.Context, repo string, pr, version int) (Review, error)
	ReviewByID(ctx context.Context, id int64) (Review, error)
}

// repoCacheTTL is how long a looked-up repository is reused. Registering a
// repository again updates it here at once; other processes see the new
// clone path or URL within this time.
const repoCacheTTL = 5 * time.Second

// maxCachedReviews bounds the review cache; it starts over when full.
const maxCachedReviews = 10_000

// Catalog looks up repositories and reviews for the roles of one process,
// which share it: every question and every run looks its repository up and
// repositories rarely change, and reviews never change once recorded. It
// shows a request's token only the repositories the token may see.
type Catalog struct {
	store CatalogStore
	now   Clock

	mu      sync.Mutex
	repos   map[string]cachedRepo
	reviews map[int64]Review
	// versions maps repo#pr@version to a review id.
	versions map[string]int64
}

type cachedRepo struct {
	repo Repository
	at   time.Time
}

// NewCatalog returns a Catalog over st; now tells the time (time.Now when
// nil).
func NewCatalog(st CatalogStore, now Clock) *Catalog {
	if now == nil {
		now = time.Now
	}
	return &Catalog{store: st, now: now}
}

// repository returns the repository named name, from the cache when fresh;
// one the request's token may not see is not found.
func (c *Catalog) repository(ctx context.Context, name string) (Repository, error) {
	if !sees(ctx, name) {
		return Repository{}, repositoryNotFound(name)
	}
	now := c.now()
	c.mu.Lock()
	cr, ok := c.repos[name]
	c.mu.Unlock()
	if ok && now.Sub(cr.at) < repoCacheTTL {
		return cr.repo, nil
	}
	r, err := c.store.Repository(ctx, name)
	if err != nil {
		return r, err
	}
	c.remember(r)
	return r, nil
}

// remember caches a repository as it is now.
func (c *Catalog) remember(r Repository) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.repos == nil {
		c.repos = map[string]cachedRepo{}
	}
	if len(c.repos) > 10_000 {
		clear(c.repos)
	}
	c.repos[r.Name] = cachedRepo{repo: r, at: c.now()}
}

// reviewByID returns a review; recorded reviews never change, so a review
// once read is kept.
func (c *Catalog) reviewByID(ctx context.Context, id int64) (Review, error) {
	c.mu.Lock()
	r, ok := c.reviews[id]
	c.mu.Unlock()
	if ok {
		return r, nil
	}
	r, err := c.store.ReviewByID(ctx, id)
	if err != nil {
		return r, err
	}
	c.rememberReview(r)
	return r, nil
}

// review returns a version of a PR's review; version 0 (the latest) is
// always read from the store, a numbered one once.
func (c *Catalog) review(ctx context.Context, repo string, pr, version int) (Review, error) {
	key := fmt.Sprintf("%s#%d@%d", repo, pr, version)
	if version > 0 {
		c.mu.Lock()
		id, ok := c.versions[key]
		r, found := c.reviews[id]
		c.mu.Unlock()
		if ok && found {
			return r, nil
		}
	}
	r, err := c.store.Review(ctx, repo, pr, version)
	if err != nil {
		return r, err
	}
	c.rememberReview(r)
	return r, nil
}

func (c *Catalog) rememberReview(r Review) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reviews == nil || len(c.reviews) > maxCachedReviews {
		c.reviews = map[int64]Review{}
		c.versions = map[string]int64{}
	}
	c.reviews[r.ID] = r
	c.versions[fmt.Sprintf("%s#%d@%d", r.Repository, r.PR, r.Version)] = r.ID
}

// sessionHost is the worker that holds the session a conversation's next
// turn continues: the conversation's own, or while it has none, its
// review's ("" when unknown).
func (c *Catalog) sessionHost(ctx context.Context, conv Conversation) string {
	if conv.SessionID != "" {
		return conv.SessionHost
	}
	if rev, err := c.reviewByID(ctx, conv.ReviewID); err == nil {
		return rev.SessionHost
	}
	return conv.SessionHost
}
