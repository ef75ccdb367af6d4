package chat

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prchat/prchat/chat/mask"
)

// liveMasker is the Service's masker: the configured one (Deps.Masker)
// plus every provider key stored in the settings, masked by value (DESIGN
// §6 "Access"). A key stored by any process of the deployment is learnt
// within keyRefresh: each use that finds the keys older than that reads
// them again (one query; the automaton is rebuilt only when they changed),
// and a key stored through this process is learnt at once. A key once
// learnt stays masked after it is removed or replaced.
type liveMasker struct {
	base *mask.Masker
	cur  atomic.Pointer[mask.Masker]

	mu     sync.Mutex
	keys   []string
	readAt time.Time
}

// keyRefresh is how long the stored keys are trusted before they are read
// again.
const keyRefresh = time.Second

func newLiveMasker(base *mask.Masker) *liveMasker {
	l := &liveMasker{base: base}
	l.cur.Store(base)
	return l
}

// String masks s with the masker as last refreshed.
func (l *liveMasker) String(s string) string { return l.cur.Load().String(s) }

// Stream returns a streaming masker of the masker as last refreshed.
func (l *liveMasker) Stream() *mask.Stream { return l.cur.Load().Stream() }

// refreshKeys reads the stored provider keys again if the last read is
// older than keyRefresh (or force) and masks them from now on.
func (s *Service) refreshKeys(ctx context.Context, force bool) {
	l := s.masker
	if s.settings == nil || s.sealer == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !force && !l.readAt.IsZero() && s.now().Sub(l.readAt) < keyRefresh {
		return
	}
	stored, err := s.settings.ProviderKeys(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "read the stored keys to mask them", slog.Any("err", err))
		return
	}
	// Keys once seen stay masked: a key removed or replaced is still a
	// secret of someone's.
	keys := slices.Clone(l.keys)
	for id, sealed := range stored {
		if k, err := s.sealer.Open(id, sealed); err == nil && strings.TrimSpace(k) != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	l.readAt = s.now()
	if slices.Equal(keys, l.keys) {
		return
	}
	l.keys = keys
	l.cur.Store(l.base.With(keys...))
}

// MaskString masks s like every answer, with the stored keys as of now:
// for parts outside the Service (the openai backend's tool results).
func (s *Service) MaskString(s2 string) string {
	s.refreshKeys(context.Background(), false)
	return s.masker.String(s2)
}
