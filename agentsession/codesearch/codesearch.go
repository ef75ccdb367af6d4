// Package codesearch walks a checkout for the files an agent may search.
//
// It skips what is not worth reading or not safe to read: version control
// folders and prchat's private folder, installed and vendored dependencies,
// generated and minified files, lock files, binary files (a NUL byte in the
// first 8 KB), files over a size limit and symbolic links (which could lead
// out of the checkout). A walk is bounded in files and bytes. The local
// backend searches with it, and so can the search tools of model backends.
package codesearch

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// Limits bound a walk. Zero fields take their defaults.
type Limits struct {
	// MaxFiles is how many files a walk reads at most; default 20000.
	MaxFiles int
	// MaxFileSize is the size above which a file is skipped; default 512 KiB.
	MaxFileSize int64
	// MaxTotalBytes is how many bytes a walk reads at most; default 64 MiB.
	MaxTotalBytes int64
	// Workers is how many files are read and searched at once; default 4.
	Workers int
}

// Defaults of Limits.
const (
	DefaultMaxFiles      = 20_000
	DefaultMaxFileSize   = 512 << 10
	DefaultMaxTotalBytes = 64 << 20
	DefaultWorkers       = 4
)

func (l Limits) withDefaults() Limits {
	l.MaxFiles = cmp.Or(l.MaxFiles, DefaultMaxFiles)
	l.MaxFileSize = cmp.Or(l.MaxFileSize, DefaultMaxFileSize)
	l.MaxTotalBytes = cmp.Or(l.MaxTotalBytes, DefaultMaxTotalBytes)
	l.Workers = cmp.Or(l.Workers, DefaultWorkers)
	return l
}

// File is a file a walk found worth searching.
type File struct {
	// Path is the file's slash-separated path relative to the walk's root.
	Path string
	// Content is the file's content. It is valid only during the call that
	// receives it.
	Content []byte
}

// Stats say what a walk did.
type Stats struct {
	// Files counts the files passed to the callback; Bytes counts what was
	// read.
	Files int
	Bytes int64
	// Skipped counts the files the skip rules left out.
	Skipped int
	// Truncated says the walk stopped at MaxFiles or MaxTotalBytes.
	Truncated bool
}

// Walk calls fn for each searchable file under root, whose paths it visits
// in lexical order. fn is called from several goroutines at once (see
// Limits.Workers); callers that need an order sort what they collect. When
// ctx ends, Walk stops and returns an error wrapping ctx.Err().
//
// The same tree gives the same files unless a limit cuts the walk short
// (Stats.Truncated): which files made it in before MaxTotalBytes was reached
// may then vary from walk to walk.
func Walk(ctx context.Context, root string, lim Limits, fn func(File)) (Stats, error) {
	lim = lim.withDefaults()
	fi, err := os.Stat(root)
	if err != nil {
		return Stats{}, fmt.Errorf("search %s: %w", root, err)
	}
	if !fi.IsDir() {
		return Stats{}, fmt.Errorf("search %s: not a directory", root)
	}
	// stop ends the walk early when the byte limit is reached.
	walkCtx, stop := context.WithCancel(ctx)
	defer stop()

	type job struct{ rel, abs string }
	jobs := make(chan job, 64)
	var (
		files, skipped atomic.Int64
		total          atomic.Int64
		truncated      atomic.Bool
		wg             sync.WaitGroup
	)
	for range lim.Workers {
		wg.Go(func() {
			var buf []byte
			for j := range jobs {
				if walkCtx.Err() != nil {
					continue // drain
				}
				var ok bool
				buf, ok = readSearchable(j.abs, lim.MaxFileSize, buf)
				if !ok {
					skipped.Add(1)
					continue
				}
				if total.Add(int64(len(buf))) > lim.MaxTotalBytes {
					truncated.Store(true)
					stop()
					continue
				}
				files.Add(1)
				fn(File{Path: j.rel, Content: buf})
			}
		})
	}

	var (
		st      Stats
		queued  int
		visited int
	)
	walkErr := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		visited++
		if visited%256 == 0 && walkCtx.Err() != nil {
			return walkCtx.Err()
		}
		if err != nil {
			if p == root {
				return err
			}
			if d != nil && d.IsDir() {
				return fs.SkipDir // unreadable folder
			}
			return nil
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && SkipDir(name) {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || SkipName(name) {
			st.Skipped++ // symbolic links, devices, skipped names
			return nil
		}
		if queued >= lim.MaxFiles {
			truncated.Store(true)
			return fs.SkipAll
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return nil
		}
		queued++
		select {
		case jobs <- job{rel: filepath.ToSlash(rel), abs: p}:
		case <-walkCtx.Done():
			return walkCtx.Err()
		}
		return nil
	})
	close(jobs)
	wg.Wait()

	st.Files = int(files.Load())
	st.Bytes = min(total.Load(), lim.MaxTotalBytes)
	st.Skipped += int(skipped.Load())
	st.Truncated = truncated.Load()
	if err := ctx.Err(); err != nil {
		return st, fmt.Errorf("search %s: %w", root, err)
	}
	if walkErr != nil && !errors.Is(walkErr, context.Canceled) {
		return st, fmt.Errorf("search %s: %w", root, walkErr)
	}
	return st, nil
}

// readSearchable reads the file at p into buf and reports whether it is
// worth searching: at most maxSize bytes, not binary, generated or
// minified.
func readSearchable(p string, maxSize int64, buf []byte) ([]byte, bool) {
	buf, ok := readFile(p, maxSize, buf)
	if !ok {
		return buf[:0], false
	}
	return buf, !Binary(buf) && !Generated(buf) && !Minified(buf)
}

// skipDirs are folders a search never enters.
var skipDirs = map[string]bool{
	".git": true, ".hg": true, ".svn": true, ".prchat": true,
	"node_modules": true, "vendor": true, "bower_components": true,
	"__pycache__": true, ".venv": true, ".tox": true, ".mypy_cache": true,
	".pytest_cache": true, ".gradle": true, ".terraform": true,
}

// SkipDir reports whether a folder named name is left out of a search:
// version control, prchat's private folder, installed or vendored
// dependencies, caches.
func SkipDir(name string) bool { return skipDirs[name] }

// skipFiles are file names a search leaves out: lock files and checksums.
var skipFiles = map[string]bool{
	".git": true, "go.sum": true, "package-lock.json": true, "yarn.lock": true,
	"pnpm-lock.yaml": true, "Cargo.lock": true, "poetry.lock": true,
	"composer.lock": true, "Gemfile.lock": true, "Pipfile.lock": true,
	"npm-shrinkwrap.json": true, "uv.lock": true,
}

// skipExts are extensions of binary, minified or generated files.
var skipExts = map[string]bool{
	".png": true, ".jpg": true, ".jpeg": true, ".gif": true, ".ico": true, ".webp": true, ".bmp": true,
	".pdf": true, ".zip": true, ".gz": true, ".tgz": true, ".bz2": true, ".xz": true, ".zst": true,
	".tar": true, ".jar": true, ".war": true, ".class": true, ".so": true, ".dylib": true, ".dll": true,
	".exe": true, ".o": true, ".a": true, ".pyc": true, ".wasm": true, ".woff": true, ".woff2": true,
	".ttf": true, ".otf": true, ".eot": true, ".mp3": true, ".mp4": true, ".mov": true, ".webm": true,
	".map": true, ".sqlite": true, ".db": true,
}

// generatedSuffixes are name endings of generated or minified files.
var generatedSuffixes = []string{
	".min.js", ".min.css", ".min.mjs", ".pb.go", ".pb.gw.go", "_pb2.py", "_pb2_grpc.py",
	".pb.cc", ".pb.h", "_generated.go", ".generated.go", ".gen.go", ".g.dart",
	".designer.cs", ".bundle.js",
}

// SkipName reports whether a file named name is left out of a search by its
// name alone: lock files, binary formats, generated and minified files.
func SkipName(name string) bool {
	if skipFiles[name] || strings.HasPrefix(name, "zz_generated") {
		return true
	}
	lower := strings.ToLower(name)
	if skipExts[path.Ext(lower)] {
		return true
	}
	for _, s := range generatedSuffixes {
		if strings.HasSuffix(lower, s) {
			return true
		}
	}
	return false
}

// sniffLen is how much of a file the content checks look at.
const sniffLen = 8 << 10

// Binary reports whether content looks binary: a NUL byte in its first 8 KB.
func Binary(content []byte) bool {
	return bytes.IndexByte(content[:min(len(content), sniffLen)], 0) >= 0
}

// Generated reports whether content says it is generated, as Go's "Code
// generated ... DO NOT EDIT." line and the "@generated" marker do, in its
// first lines.
func Generated(content []byte) bool {
	head := content[:min(len(content), 1024)]
	if bytes.Contains(head, []byte("@generated")) {
		return true
	}
	return bytes.Contains(head, []byte("DO NOT EDIT")) &&
		(bytes.Contains(head, []byte("Code generated")) || bytes.Contains(bytes.ToLower(head), []byte("generated")))
}

// Minified reports whether content looks minified: its first 8 KB hold
// lines longer than 500 bytes on average.
func Minified(content []byte) bool {
	head := content[:min(len(content), sniffLen)]
	if len(head) < 2048 {
		return false
	}
	lines := bytes.Count(head, []byte{'\n'}) + 1
	return len(head)/lines > 500
}
