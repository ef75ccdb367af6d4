package agentsession

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/prchat/prchat/chat"
)

// LineCount returns the number of lines of the file at path in commit sha
// of repo's clone; a last line without a trailing newline counts, an empty
// file has none. It reads the file with git cat-file, so the checkout of a
// run directory plays no part. A path that is not a clean repository-relative
// path (absolute, with .. or empty elements), a path under chat.PrivateDir,
// a directory, a missing file or an unknown commit is an error.
//
// Counts are cached per clone, commit and path, since citations repeat.
func (w *Workspaces) LineCount(ctx context.Context, repo chat.Repository, sha, p string) (int, error) {
	if err := checkRepoPath(p); err != nil {
		return 0, fmt.Errorf("count lines of %s at %s: %w", p, sha, err)
	}
	if !shaPattern.MatchString(sha) {
		return 0, fmt.Errorf("count lines of %s: %q is not a commit id", p, sha)
	}
	clones := w.clonesOf(repo)
	if len(clones) == 0 {
		return 0, chat.Errorf(chat.CodeNeedsClone, "repository %s has no clone on this host", repo.Name)
	}
	var missing error
	for _, clone := range clones {
		key := lineKey{clone: clone, sha: strings.ToLower(sha), path: p}
		if n, ok := w.lines.get(key); ok {
			return n, nil
		}
		n, err := w.countLines(ctx, clone, sha, p)
		if errors.Is(err, errObjectMissing) {
			missing = err
			continue // the commit may be in the next clone
		}
		if err != nil {
			return 0, fmt.Errorf("count lines of %s at %s in %s: %w", p, sha, repo.Name, err)
		}
		w.lines.put(key, n)
		return n, nil
	}
	return 0, fmt.Errorf("count lines of %s at %s in %s: %w", p, sha, repo.Name, missing)
}

// checkRepoPath checks that p is a clean, relative, slash-separated path
// inside a repository and outside the private folder.
func checkRepoPath(p string) error {
	switch {
	case p == "":
		return errors.New("empty path")
	case strings.ContainsAny(p, "\x00\n\r\\"):
		return errors.New("path has a forbidden character")
	case path.IsAbs(p) || filepath.IsAbs(p):
		return errors.New("path is absolute, not relative to the repository")
	case path.Clean(p) != p || !filepath.IsLocal(p):
		return errors.New("path is not a clean path inside the repository")
	case p == chat.PrivateDir || strings.HasPrefix(p, chat.PrivateDir+"/"):
		return fmt.Errorf("path is in prchat's private folder %s", chat.PrivateDir)
	case p == ".git" || strings.HasPrefix(p, ".git/"):
		return errors.New("path is in the .git folder")
	}
	return nil
}

// clonesOf lists the clones of repo on this host: its ClonePath, then its
// mirror under DataDir/clones.
func (w *Workspaces) clonesOf(repo chat.Repository) []string {
	var out []string
	if repo.ClonePath != "" {
		if p, err := filepath.Abs(repo.ClonePath); err == nil && isRepo(p) {
			out = append(out, p)
		}
	}
	if repo.CloneURL != "" {
		if p, err := w.mirrorPath(repo.Name); err == nil && isRepo(p) {
			out = append(out, p)
		}
	}
	return out
}

// errObjectMissing is a commit or path that is not in a clone.
var errObjectMissing = errors.New("no such file at this commit")

// countLines counts the lines of sha:p in clone with git cat-file --batch,
// counting as the blob streams by instead of holding it.
func (w *Workspaces) countLines(ctx context.Context, clone, sha, p string) (int, error) {
	var c blobLineCounter
	err := w.git.run(ctx, clone, strings.NewReader(sha+":"+p+"\n"), &c, "cat-file", "--batch")
	if err != nil {
		return 0, err
	}
	return c.result()
}

// blobLineCounter parses the answer of git cat-file --batch to one request
// ("<oid> <type> <size>\n<content>\n", or "<name> missing\n") and counts
// the content's lines.
type blobLineCounter struct {
	header  []byte
	parsed  bool
	kind    string
	left    int64 // content bytes still to come
	lines   int
	last    byte // last content byte seen
	badHead error
}

func (c *blobLineCounter) Write(b []byte) (int, error) {
	n := len(b)
	if !c.parsed {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			c.header = append(c.header, b...)
			return n, nil
		}
		c.header = append(c.header, b[:i]...)
		b = b[i+1:]
		c.parsed = true
		c.parseHeader()
	}
	if c.left > 0 {
		chunk := b[:min(int64(len(b)), c.left)]
		c.lines += bytes.Count(chunk, []byte{'\n'})
		if len(chunk) > 0 {
			c.last = chunk[len(chunk)-1]
		}
		c.left -= int64(len(chunk))
	}
	return n, nil
}

func (c *blobLineCounter) parseHeader() {
	f := strings.Fields(string(c.header))
	switch {
	case len(f) == 2 && (f[1] == "missing" || f[1] == "ambiguous"):
		c.kind = f[1]
	case len(f) == 3:
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || size < 0 {
			c.badHead = fmt.Errorf("git cat-file: unexpected answer %q", c.header)
			return
		}
		c.kind, c.left = f[1], size
		if size == 0 {
			c.last = '\n'
		}
	default:
		c.badHead = fmt.Errorf("git cat-file: unexpected answer %q", c.header)
	}
}

func (c *blobLineCounter) result() (int, error) {
	switch {
	case c.badHead != nil:
		return 0, c.badHead
	case !c.parsed:
		return 0, errors.New("git cat-file: no answer")
	case c.kind == "missing" || c.kind == "ambiguous":
		return 0, errObjectMissing
	case c.kind == "tree":
		return 0, errors.New("path is a directory, not a file")
	case c.kind != "blob":
		return 0, fmt.Errorf("path is a %s, not a file", c.kind)
	case c.left > 0:
		return 0, errors.New("git cat-file: answer cut short")
	}
	n := c.lines
	if c.last != '\n' {
		n++ // a last line without a newline
	}
	return n, nil
}

// lineKey names a cached line count.
type lineKey struct{ clone, sha, path string }

// lineCache is a small least-recently-used map of line counts.
type lineCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *lineEntry, most recent first
	items map[lineKey]*list.Element
}

type lineEntry struct {
	key   lineKey
	lines int
}

func newLineCache(max int) *lineCache {
	return &lineCache{max: max, order: list.New(), items: map[lineKey]*list.Element{}}
}

func (c *lineCache) get(k lineKey) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok {
		return 0, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*lineEntry).lines, true
}

func (c *lineCache) put(k lineKey, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		e.Value.(*lineEntry).lines = n
		return
	}
	c.items[k] = c.order.PushFront(&lineEntry{key: k, lines: n})
	for c.order.Len() > c.max {
		old := c.order.Remove(c.order.Back()).(*lineEntry)
		delete(c.items, old.key)
	}
}
