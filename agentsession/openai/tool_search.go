package openai

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/prchat/prchat/agentsession/codesearch"
)

// buildDirs are folders of build output and caches that search_code and
// list_files leave out, in addition to those codesearch skips (version
// control, prchat's private folder, dependencies). A path_glob that names
// such a folder before its first wildcard searches it anyway.
var buildDirs = map[string]bool{
	"dist": true, "build": true, "out": true, "target": true, ".next": true, ".nuxt": true,
	".svelte-kit": true, "coverage": true, ".cache": true, ".parcel-cache": true,
}

// skippedDir reports whether list_files and search_code leave out a folder
// named name.
func skippedDir(name string) bool { return codesearch.SkipDir(name) || buildDirs[name] }

// match is a line search_code found.
type match struct {
	path string
	line int
	text string
}

// searchCode finds the lines that contain query in the searchable files
// whose paths match glob.
func (tb *toolbox) searchCode(ctx context.Context, query, glob string) (string, string, error) {
	switch {
	case strings.TrimSpace(query) == "":
		return "", "", toolErrorf("query is empty")
	case len(query) > maxQuery:
		return "", "", toolErrorf("query is longer than %d bytes", maxQuery)
	case strings.ContainsAny(query, "\n\r"):
		return "", "", toolErrorf("query spans lines; search for one line of text")
	}
	keep, explicit, err := compileGlob(glob)
	if err != nil {
		return "", "", err
	}
	needle := asciiLower(nil, []byte(query))

	var (
		mu      sync.Mutex
		matches []match
		total   int
		files   int
	)
	_, err = codesearch.Walk(ctx, tb.root, codesearch.Limits{}, func(f codesearch.File) {
		if inBuildDir(f.Path, explicit) || !keep(f.Path) {
			return
		}
		found, n := scan(f, needle)
		if n == 0 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		matches = append(matches, found...)
		total += n
		files++
	})
	if err != nil {
		if ctx.Err() != nil {
			return "", "", ctx.Err()
		}
		return "", "", fmt.Errorf("search_code: %w", err)
	}
	slices.SortFunc(matches, func(a, b match) int { return cmp.Or(strings.Compare(a.path, b.path), a.line-b.line) })

	var out strings.Builder
	if total == 0 {
		fmt.Fprintf(&out, "No matches for %q", query)
		if glob != "" {
			fmt.Fprintf(&out, " in files matching %q", glob)
		}
		out.WriteString(".\n")
		return out.String(), "no matches", nil
	}
	shown := matches[:min(len(matches), maxMatches)]
	for _, m := range shown {
		fmt.Fprintf(&out, "%s:%d: %s\n", m.path, m.line, m.text)
	}
	if total > len(shown) {
		fmt.Fprintf(&out, "(%d more matches not shown; narrow the query or the path_glob)\n", total-len(shown))
	}
	summary := plural(total, "match", "matches") + " in " + plural(files, "file", "files")
	return out.String(), summary, nil
}

// scan returns the first matches of needle (ASCII lower case) in f and
// how many there are.
func scan(f codesearch.File, needle []byte) ([]match, int) {
	lower := asciiLower(nil, f.Content)
	var (
		found []match
		n     int
	)
	line, scanned := 1, 0
	for off := 0; off < len(lower); {
		j := bytes.Index(lower[off:], needle)
		if j < 0 {
			break
		}
		at := off + j
		line += bytes.Count(f.Content[scanned:at], []byte{'\n'})
		start := bytes.LastIndexByte(f.Content[:at], '\n') + 1
		end := bytes.IndexByte(f.Content[at:], '\n')
		if end < 0 {
			end = len(f.Content)
		} else {
			end += at
		}
		n++
		if len(found) < maxMatchesPer {
			found = append(found, match{path: f.Path, line: line, text: matchText(f.Content[start:end])})
		}
		// One match per line: go on after the line.
		off, scanned = end, end
		if off < len(lower) {
			off++
			scanned++
			line++
		}
	}
	return found, n
}

// matchText renders a matching line: trimmed, valid UTF-8, bounded.
func matchText(line []byte) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(line), "\uFFFD"))
	return clip(s, maxMatchLine)
}

// asciiLower writes s with ASCII letters lower-cased into buf and returns
// it; other bytes are kept, so offsets stay the same.
func asciiLower(buf, s []byte) []byte {
	buf = slices.Grow(buf[:0], len(s))[:len(s)]
	for i, c := range s {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return buf
}

// inBuildDir reports whether a file's path goes through a build output
// folder that explicit (the folders a glob names literally) does not name.
func inBuildDir(p string, explicit []string) bool {
	parts := strings.Split(p, "/")
	for i, part := range parts[:len(parts)-1] {
		if buildDirs[part] && (i >= len(explicit) || explicit[i] != part) {
			return true
		}
	}
	return false
}

// compileGlob returns a matcher of repository-relative paths for glob, and
// the folders glob names literally before its first wildcard. An empty
// glob matches everything. A glob with no slash matches file names at any
// depth (*.go is **/*.go).
func compileGlob(glob string) (func(string) bool, []string, error) {
	if glob == "" || glob == "**" || glob == "**/*" {
		return func(string) bool { return true }, nil, nil
	}
	if len(glob) > 256 || !utf8.ValidString(glob) || strings.ContainsAny(glob, "\x00\n\r") {
		return nil, nil, toolErrorf("path_glob %q is not a usable glob", clip(glob, 64))
	}
	g := strings.TrimPrefix(glob, "./")
	if strings.HasPrefix(g, "/") || filepath.IsAbs(g) {
		return nil, nil, toolErrorf("path_glob %q is absolute: give a pattern relative to the repository root", glob)
	}
	if !strings.Contains(g, "/") {
		g = "**/" + g
	}
	var re strings.Builder
	re.WriteString("^")
	for i := 0; i < len(g); i++ {
		switch c := g[i]; c {
		case '*':
			if i+1 < len(g) && g[i+1] == '*' {
				i++
				if i+1 < len(g) && g[i+1] == '/' {
					i++
					re.WriteString("(?:.*/)?")
				} else {
					re.WriteString(".*")
				}
			} else {
				re.WriteString("[^/]*")
			}
		case '?':
			re.WriteString("[^/]")
		case '{':
			// {a,b} alternatives.
			end := strings.IndexByte(g[i:], '}')
			if end < 0 {
				return nil, nil, toolErrorf("path_glob %q has an unclosed {", glob)
			}
			var alts []string
			for _, a := range strings.Split(g[i+1:i+end], ",") {
				alts = append(alts, regexp.QuoteMeta(a))
			}
			re.WriteString("(?:" + strings.Join(alts, "|") + ")")
			i += end
		default:
			re.WriteString(regexp.QuoteMeta(g[i : i+1]))
		}
	}
	re.WriteString("$")
	rx, err := regexp.Compile(re.String())
	if err != nil {
		return nil, nil, toolErrorf("path_glob %q is not a usable glob", glob)
	}
	// The folders before the first wildcard.
	var explicit []string
	parts := strings.Split(g, "/")
	for _, part := range parts[:len(parts)-1] {
		if strings.ContainsAny(part, "*?{") {
			break
		}
		explicit = append(explicit, part)
	}
	return rx.MatchString, explicit, nil
}

// plural renders a count with the noun in the right number.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
