package chat

import (
	"context"
	"sync"
	"time"
)

// repoCacheTTL is how long a looked-up repository is reused. Registering a
// repository again updates it here at once; other processes see the new
// clone path or URL within this time.
const repoCacheTTL = 5 * time.Second

// repoCache keeps recently looked-up repositories, since every question and
// every run looks its repository up and repositories rarely change.
type repoCache struct {
	mu    sync.Mutex
	repos map[string]cachedRepo
}

type cachedRepo struct {
	repo Repository
	at   time.Time
}

// repository returns the repository named name, from the cache when fresh.
func (s *Service) repository(ctx context.Context, name string) (Repository, error) {
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
