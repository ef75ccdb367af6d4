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

// Masker masks every text the roles of one process store or show: the
// configured masker plus every provider key stored in the settings, masked
// by value (DESIGN §6 "Access"). The roles of a process share one. A key
// stored by any process of the deployment is learnt within keyRefresh:
// each refresh that finds the keys older than that reads them again (one
// query; the automaton is rebuilt only when they changed), and a key
// stored through this process is learnt at once. A key once learnt stays
// masked after it is removed or replaced.
type Masker struct {
	base     *mask.Masker
	settings SettingsStore
	sealer   *Sealer
	log      *slog.Logger
	now      Clock
	cur      atomic.Pointer[mask.Masker]

	mu     sync.Mutex
	keys   []string
	readAt time.Time
}

// keyRefresh is how long the stored keys are trusted before they are read
// again.
const keyRefresh = time.Second

// NewMasker returns a Masker of base (the built-in rules only when nil)
// and the keys that settings keep sealed with sealer (none when either is
// nil).
func NewMasker(base *mask.Masker, settings SettingsStore, sealer *Sealer, log *slog.Logger, now Clock) *Masker {
	if base == nil {
		base = mask.New()
	}
	if now == nil {
		now = time.Now
	}
	l := &Masker{base: base, settings: settings, sealer: sealer, log: cmpLogger(log), now: now}
	l.cur.Store(base)
	return l
}

// orMasker returns m, or a Masker of the built-in rules when m is nil.
func orMasker(m *Masker) *Masker {
	if m == nil {
		return NewMasker(nil, nil, nil, nil, nil)
	}
	return m
}

// cmpLogger returns log, or one that discards.
func cmpLogger(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

// String masks s with the masker as last refreshed.
func (l *Masker) String(s string) string { return l.cur.Load().String(s) }

// Stream returns a streaming masker of the masker as last refreshed.
func (l *Masker) Stream() *mask.Stream { return l.cur.Load().Stream() }

// MaskString masks s like every answer, with the stored keys as of now:
// for parts outside the roles (the openai backend's tool results).
func (l *Masker) MaskString(s string) string {
	l.refresh(context.Background(), false)
	return l.String(s)
}

// refresh reads the stored provider keys again if the last read is older
// than keyRefresh (or force) and masks them from now on.
func (l *Masker) refresh(ctx context.Context, force bool) {
	if l.settings == nil || l.sealer == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !force && !l.readAt.IsZero() && l.now().Sub(l.readAt) < keyRefresh {
		return
	}
	stored, err := l.settings.ProviderKeys(ctx)
	if err != nil {
		l.log.WarnContext(ctx, "read the stored keys to mask them", slog.Any("err", err))
		return
	}
	// Keys once seen stay masked: a key removed or replaced is still a
	// secret of someone's.
	keys := slices.Clone(l.keys)
	for id, sealed := range stored {
		if k, err := l.sealer.Open(id, sealed); err == nil && strings.TrimSpace(k) != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	l.readAt = l.now()
	if slices.Equal(keys, l.keys) {
		return
	}
	l.keys = keys
	l.cur.Store(l.base.With(keys...))
}
