package local

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prchat/prchat/agentsession/codesearch"
	"github.com/prchat/prchat/agentsession/local/index"
	"github.com/prchat/prchat/chat"
)

// maxCached is how many indexes the backend keeps in memory.
const maxCached = 8

// sharedCache is the indexes of the process's backends: a worker runs
// one Backend, tests many.
var sharedCache indexCache

// indexCache keeps the indexes of recent review heads, one build at a
// time for each.
type indexCache struct {
	mu      sync.Mutex
	entries map[string]*cacheEntry
	order   []string // least recently used first
}

type cacheEntry struct {
	done chan struct{}
	ix   *index.Index
	err  error
	// sum is, for a checkout without a head commit, the fingerprint of
	// its source files the index was built from.
	sum uint64
}

// indexFile is where the index of a review head is kept in its run
// directory: the private folder, which searches and citations never see.
func indexFile(dir, head, base string) string {
	return filepath.Join(dir, chat.PrivateDir, fmt.Sprintf("local-index-%s-%s.gob", short(head), short(base)))
}

func short(sha string) string { return sha[:min(len(sha), 12)] }

// index returns the index of req's checkout: from memory, from the file
// kept with the checkout, or built now (and saved there). Without a head
// commit there is nothing to key it by, so it is built each time.
func (b *Backend) index(ctx context.Context, req chat.RunRequest) (*index.Index, bool, error) {
	head, base := req.Review.HeadSHA, req.Review.BaseSHA
	opt := index.Options{Head: head, Base: base, Git: b.git, Limits: b.limits}
	key := fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%+v", req.Dir, head, base, b.git, b.limits)
	var sum uint64
	if head == "" {
		// Nothing names the checkout's content: its files' names, sizes
		// and times do.
		sum = fingerprint(req.Dir)
	}
	c := &sharedCache
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[string]*cacheEntry{}
	}
	e, ok := c.entries[key]
	if ok && e.sum != sum {
		select {
		case <-e.done:
			delete(c.entries, key)
			ok = false
		default:
		}
	}
	if ok {
		c.touch(key)
		c.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
		if e.err == nil {
			return e.ix, false, nil
		}
		// The build that failed (or was cancelled) is not this call's:
		// build again.
		c.mu.Lock()
		if c.entries[key] == e {
			delete(c.entries, key)
		}
		c.mu.Unlock()
		return b.index(ctx, req)
	}
	e = &cacheEntry{done: make(chan struct{}), sum: sum}
	c.entries[key] = e
	c.touch(key)
	for len(c.order) > maxCached {
		delete(c.entries, c.order[0])
		c.order = c.order[1:]
	}
	c.mu.Unlock()

	built := false
	file := indexFile(req.Dir, head, base)
	e.err = errors.New("no head commit to key a saved index by")
	if head != "" {
		e.ix, e.err = index.Load(file, head, base)
	}
	if e.err != nil {
		start := time.Now()
		e.ix, e.err = index.Build(ctx, req.Dir, opt)
		built = true
		if e.err == nil {
			b.log.DebugContext(ctx, "local index built", slog.Int("files", len(e.ix.Files)),
				slog.Int64("bytes", e.ix.Bytes), slog.Duration("took", time.Since(start)))
			if head == "" {
				// Not saved: only the head commit names the content.
			} else if err := os.MkdirAll(filepath.Dir(file), 0o755); err == nil {
				if err := e.ix.Save(file); err != nil {
					b.log.WarnContext(ctx, "local index not saved", slog.String("error", err.Error()))
				}
			}
		}
	}
	close(e.done)
	if e.err != nil {
		c.mu.Lock()
		if c.entries[key] == e {
			delete(c.entries, key)
		}
		c.mu.Unlock()
	}
	return e.ix, built, e.err
}

// touch marks key as just used; the caller holds c.mu.
func (c *indexCache) touch(key string) {
	for i, k := range c.order {
		if k == key {
			c.order = append(c.order[:i], c.order[i+1:]...)
			break
		}
	}
	c.order = append(c.order, key)
}

// fingerprint hashes the names, sizes and modification times of the
// source files under dir (what the index reads), skipping what a search
// skips.
func fingerprint(dir string) uint64 {
	h := fnv.New64a()
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if p != dir && codesearch.SkipDir(d.Name()) {
				return fs.SkipDir
			}
			return nil
		}
		if index.Lang(d.Name()) == "" && d.Name() != "go.mod" {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\n", p, fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	return h.Sum64()
}
