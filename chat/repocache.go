package chat

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// repoCacheTTL is how long a looked-up repository is reused. Registering a
// repository again updates it here at once; other processes see the new
// clone path or URL within this time.
const repoCacheTTL = 5 * time.Second

// repoCache keeps recently looked-up repositories, since every question and
// every run looks its repository up and repositories rarely change, and
// reviews, which never change once recorded.
type repoCache struct {
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

// repository returns the repository named name, from the cache when fresh.
func (s *Service) repository(ctx context.Context, name string) (Repository, error) {
	if !sees(ctx, name) {
		return Repository{}, repositoryNotFound(name)
	}
	now := s.now()
	s.repos.mu.Lock()
	c, ok := s.repos.repos[name]
	s.repos.mu.Unlock()
	if ok && now.Sub(c.at) < repoCacheTTL {
		return c.repo, nil
	}
	r, err := s.store.Repository(ctx, name)
	if err != nil {
		return r, err
	}
	s.remember(r)
	return r, nil
}

// remember caches a repository as it is now.
func (s *Service) remember(r Repository) {
	s.repos.mu.Lock()
	defer s.repos.mu.Unlock()
	if s.repos.repos == nil {
		s.repos.repos = map[string]cachedRepo{}
	}
	if len(s.repos.repos) > 10_000 {
		clear(s.repos.repos)
	}
	s.repos.repos[r.Name] = cachedRepo{repo: r, at: s.now()}
}

// maxCachedReviews bounds the review cache; it starts over when full.
const maxCachedReviews = 10_000

// reviewByID returns a review; recorded reviews never change, so a review
// once read is kept.
func (s *Service) reviewByID(ctx context.Context, id int64) (Review, error) {
	s.repos.mu.Lock()
	r, ok := s.repos.reviews[id]
	s.repos.mu.Unlock()
	if ok {
		return r, nil
	}
	r, err := s.store.ReviewByID(ctx, id)
	if err != nil {
		return r, err
	}
	s.rememberReview(r)
	return r, nil
}

// review returns a version of a PR's review; version 0 (the latest) is
// always read from the store, a numbered one once.
func (s *Service) review(ctx context.Context, repo string, pr, version int) (Review, error) {
	key := fmt.Sprintf("%s#%d@%d", repo, pr, version)
	if version > 0 {
		s.repos.mu.Lock()
		id, ok := s.repos.versions[key]
		r, found := s.repos.reviews[id]
		s.repos.mu.Unlock()
		if ok && found {
			return r, nil
		}
	}
	r, err := s.store.Review(ctx, repo, pr, version)
	if err != nil {
		return r, err
	}
	s.rememberReview(r)
	return r, nil
}

func (s *Service) rememberReview(r Review) {
	s.repos.mu.Lock()
	defer s.repos.mu.Unlock()
	if s.repos.reviews == nil || len(s.repos.reviews) > maxCachedReviews {
		s.repos.reviews = map[int64]Review{}
		s.repos.versions = map[string]int64{}
	}
	s.repos.reviews[r.ID] = r
	s.repos.versions[fmt.Sprintf("%s#%d@%d", r.Repository, r.PR, r.Version)] = r.ID
}
