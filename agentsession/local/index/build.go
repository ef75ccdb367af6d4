package index

import (
	"bytes"
	"context"
	"fmt"
	"go/token"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prchat/prchat/agentsession/codesearch"
)

// Options configure Build.
type Options struct {
	// Head and Base are the review's commits; with both, Build maps the
	// diff base..head onto the definitions.
	Head, Base string
	// Git is the git binary; default "git" from PATH.
	Git string
	// Limits bound the walk of the checkout.
	Limits codesearch.Limits
}

// Lang returns the language Build reads a file in by its name, or "".
func Lang(name string) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".go":
		return "go"
	case ".py", ".pyi":
		return "python"
	case ".ts", ".tsx", ".mts", ".cts":
		return "typescript"
	case ".js", ".jsx", ".mjs", ".cjs":
		return "javascript"
	case ".lua":
		return "lua"
	}
	return ""
}

// Build reads the source files of the checkout at dir and returns their
// index. Files that do not parse in full keep what could be read.
func Build(ctx context.Context, dir string, opt Options) (*Index, error) {
	ix := &Index{Head: opt.Head, Base: opt.Base}
	var (
		mu      sync.Mutex
		goFiles []goSource
		modules = map[string]string{}
		bytesIn atomic.Int64
		fset    = token.NewFileSet()
	)
	_, err := codesearch.Walk(ctx, dir, opt.Limits, func(f codesearch.File) {
		lang := Lang(f.Path)
		if path.Base(f.Path) == "go.mod" {
			if m := modulePath(f.Content); m != "" {
				mu.Lock()
				modules[m] = path.Dir(f.Path)
				mu.Unlock()
			}
			return
		}
		if lang == "" {
			return
		}
		bytesIn.Add(int64(len(f.Content)))
		if lang == "go" {
			g := parseGo(fset, f.Path, bytes.Clone(f.Content))
			mu.Lock()
			goFiles = append(goFiles, g)
			mu.Unlock()
			return
		}
		pf := parseFile(f.Path, lang, f.Content)
		mu.Lock()
		ix.Files = append(ix.Files, pf)
		mu.Unlock()
	})
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", dir, err)
	}
	ix.Files = append(ix.Files, checkGo(fset, goFiles, modules)...)
	ix.Bytes = bytesIn.Load()
	pruneRefs(ix.Files)
	ix.finish()
	if opt.Base != "" && opt.Head != "" {
		if err := ix.diff(ctx, dir, opt); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("index %s: %w", dir, ctx.Err())
			}
			ix.DiffErr = err.Error()
		}
	} else {
		ix.DiffErr = "the review records no base commit"
	}
	return ix, nil
}

// parseFile reads one file of a language other than Go.
func parseFile(p, lang string, src []byte) *File {
	f := &File{Path: p, Lang: lang, Lines: countLines(src), Package: path.Dir(p), Test: isTestPath(p)}
	defer func() {
		// A parser's mistake costs the file its structure, never the
		// process.
		if r := recover(); r != nil {
			*f = File{Path: p, Lang: lang, Lines: countLines(src), Package: path.Dir(p), Test: isTestPath(p), ParseErr: fmt.Sprintf("parser failure: %v", r)}
		}
	}()
	switch lang {
	case "python":
		parsePython(f, src)
	case "typescript", "javascript":
		parseTS(f, src)
	case "lua":
		parseLua(f, src)
	}
	for i := range f.Defs {
		d := &f.Defs[i]
		d.Signature = lineText(src, d.Line)
	}
	return f
}

// isTestPath reports whether a file's name says it holds tests.
func isTestPath(p string) bool {
	base := strings.ToLower(path.Base(p))
	switch {
	case strings.HasSuffix(base, "_test.go"),
		strings.HasPrefix(base, "test_") && strings.HasSuffix(base, ".py"),
		strings.HasSuffix(base, "_test.py"),
		strings.Contains(base, ".test."), strings.Contains(base, ".spec."),
		strings.HasSuffix(base, "_spec.lua"), strings.HasSuffix(base, "_test.lua"):
		return true
	}
	return strings.Contains("/"+p, "/__tests__/")
}

// pruneRefs drops the uses of names that nothing in the checkout defines,
// except Go's resolved and undefined ones: they cannot be asked about.
func pruneRefs(files []*File) {
	defined := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Defs {
			defined[d.Name] = true
		}
	}
	for _, f := range files {
		if f.Lang == "go" {
			continue
		}
		f.Refs = slices.DeleteFunc(f.Refs, func(r Ref) bool { return !defined[r.Name] })
	}
}

func langFamily(lang string) string {
	if lang == "javascript" {
		return "typescript"
	}
	return lang
}

// countLines counts lines as citations do: a last line without a newline
// counts.
func countLines(content []byte) int {
	n := bytes.Count(content, []byte{'\n'})
	if len(content) > 0 && content[len(content)-1] != '\n' {
		n++
	}
	return n
}

// lineText returns line n (1-based) of src, trimmed and cut to 160 bytes.
func lineText(src []byte, n int) string {
	if n < 1 {
		return ""
	}
	start := 0
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(src[start:], '\n')
		if j < 0 {
			return ""
		}
		start += j + 1
	}
	end := bytes.IndexByte(src[start:], '\n')
	if end < 0 {
		end = len(src) - start
	}
	s := strings.TrimSpace(strings.ToValidUTF8(string(src[start:start+end]), "?"))
	if len(s) > 160 {
		s = strings.ToValidUTF8(s[:160], "") + "..."
	}
	return s
}

// lineStarts returns the offsets at which the lines of src start.
func lineStarts(src []byte) []int {
	starts := []int{0}
	for i, c := range src {
		if c == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}
