package local

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/prchat/prchat/agentsession/codesearch"
	"github.com/prchat/prchat/chat"
)

// Bounds of what one file contributes.
const (
	maxHitsPerTerm = 200 // occurrences of one term in one file
	maxSnippet     = 100 // runes of a matching line quoted in the answer
)

// lineHit is a line of a file that matches terms.
type lineHit struct {
	line    int
	terms   uint32 // bit i: terms[i] occurs on the line
	defines uint32 // bit i: the line defines terms[i]
	text    string // the line, trimmed
}

// fileHits is what one file matched.
type fileHits struct {
	path      string
	lines     int // the file's line count
	hits      []lineHit
	terms     uint32 // terms occurring anywhere in the file
	pathTerms uint32 // file and path terms the file's path matches
}

// searchResult is the outcome of a search.
type searchResult struct {
	terms []term
	focus []chat.Anchor
	files []*fileHits // sorted by path
	stats codesearch.Stats
	// weight of each term: its kind's weight times its rarity.
	weight []float64
}

// search searches dir for terms and ranks what matched.
func search(ctx context.Context, dir string, terms []term, focus []chat.Anchor, lim codesearch.Limits) (*searchResult, error) {
	res := &searchResult{terms: terms, focus: focus}
	var (
		mu   sync.Mutex
		pool = sync.Pool{New: func() any { return new([]byte) }}
	)
	st, err := codesearch.Walk(ctx, dir, lim, func(f codesearch.File) {
		buf := pool.Get().(*[]byte)
		fh := scanFile(f, terms, buf)
		pool.Put(buf)
		if fh != nil {
			mu.Lock()
			res.files = append(res.files, fh)
			mu.Unlock()
		}
	})
	if err != nil {
		return nil, err
	}
	res.stats = st
	slices.SortFunc(res.files, func(a, b *fileHits) int { return strings.Compare(a.path, b.path) })

	// Rarer terms weigh more: a term in every file says little.
	n := float64(st.Files)
	res.weight = make([]float64, len(terms))
	for i, t := range terms {
		df := 0
		for _, fh := range res.files {
			if fh.terms&(1<<i) != 0 {
				df++
			}
		}
		res.weight[i] = baseWeight[t.kind] * (1 + math.Log((n+1)/(float64(df)+1)))
	}
	return res, nil
}

// scanFile finds the terms in one file; nil when nothing matches.
func scanFile(f codesearch.File, terms []term, buf *[]byte) *fileHits {
	fh := &fileHits{path: f.Path}
	lowerPath := strings.ToLower(f.Path)
	for i, t := range terms {
		switch t.kind {
		case kindFile:
			if lowerPath == t.match || strings.HasSuffix(lowerPath, "/"+t.match) {
				fh.pathTerms |= 1 << i
			}
		case kindPath:
			if strings.HasPrefix(lowerPath, t.match+"/") || strings.Contains(lowerPath, "/"+t.match+"/") {
				fh.pathTerms |= 1 << i
			}
		}
	}

	content := f.Content
	lower := asciiLower(*buf, content)
	*buf = lower
	type pos struct {
		at   int
		term int
	}
	var found []pos
	for i, t := range terms {
		count := 0
		for _, n := range t.needles() {
			needle := []byte(n)
			for off := 0; off < len(lower) && count < maxHitsPerTerm; {
				j := bytes.Index(lower[off:], needle)
				if j < 0 {
					break
				}
				at := off + j
				off = at + len(needle)
				if startsWord(content, at) {
					found = append(found, pos{at, i})
					count++
				}
			}
		}
	}
	if len(found) == 0 && fh.pathTerms == 0 {
		return nil
	}
	fh.lines = countLines(content)
	if len(found) == 0 {
		return fh
	}
	slices.SortFunc(found, func(a, b pos) int { return cmp.Or(a.at-b.at, a.term-b.term) })

	line, lineStart, scanned := 1, 0, 0
	for _, p := range found {
		if nl := bytes.Count(content[scanned:p.at], []byte{'\n'}); nl > 0 {
			line += nl
			lineStart = bytes.LastIndexByte(content[:p.at], '\n') + 1
		}
		scanned = p.at
		if k := len(fh.hits); k == 0 || fh.hits[k-1].line != line {
			end := bytes.IndexByte(content[lineStart:], '\n')
			if end < 0 {
				end = len(content) - lineStart
			}
			fh.hits = append(fh.hits, lineHit{line: line, text: snippet(content[lineStart : lineStart+end])})
		}
		h := &fh.hits[len(fh.hits)-1]
		bit := uint32(1) << p.term
		h.terms |= bit
		fh.terms |= bit
		if t := terms[p.term]; t.kind != kindWord && defines(lower[lineStart:], p.at-lineStart, len(t.match)) {
			h.defines |= bit
		}
	}
	return fh
}

// asciiLower writes s lower-cased (ASCII letters only, so that offsets stay
// the same) into buf and returns it. It works on eight bytes at a time.
func asciiLower(buf, s []byte) []byte {
	buf = slices.Grow(buf[:0], len(s))[:len(s)]
	const (
		lows  = 0x7f7f7f7f7f7f7f7f
		highs = 0x8080808080808080
	)
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := binary.LittleEndian.Uint64(s[i:])
		h := w & lows
		ge := h + 0x3f3f3f3f3f3f3f3f // high bit: byte >= 'A'
		gt := h + 0x2525252525252525 // high bit: byte > 'Z'
		upper := ge &^ gt &^ w & highs
		binary.LittleEndian.PutUint64(buf[i:], w|upper>>2)
	}
	for ; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return buf
}

// startsWord reports whether a match at content[at] starts a word: it
// follows a character that is not a letter or digit, or is a camel-case
// boundary (parse|Config).
func startsWord(content []byte, at int) bool {
	if at == 0 {
		return true
	}
	prev, cur := content[at-1], content[at]
	if !isAlnum(prev) {
		return true
	}
	return isLowerOrDigit(prev) && 'A' <= cur && cur <= 'Z'
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c >= 0x80
}

func isLowerOrDigit(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// defKeywords are words that, right before a name, define it.
var defKeywords = toSet(`func def fn function class struct interface type trait enum impl const var let val
	module macro record object protocol typedef`)

// defines reports whether the match at line[at:at+n] (a lower-cased line and
// the rest of the file after it) is a definition: a definition keyword right
// before the name (func parseConfig, class Foo, func (c *T) Name), or a key
// at the start of the line followed by = or : (max_retries: 3).
func defines(line []byte, at, n int) bool {
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	prefix := bytes.TrimSpace(line[:at])
	if len(prefix) == 0 || bytes.Equal(prefix, []byte("-")) || bytes.Equal(prefix, []byte(`"`)) {
		rest := bytes.TrimLeft(line[min(at+n, len(line)):], ` "'`)
		return len(rest) > 0 && (rest[0] == ':' || rest[0] == '=') && !bytes.HasPrefix(rest, []byte("=="))
	}
	words := bytes.FieldsFunc(prefix, func(r rune) bool { return !(r == '_' || r < utf8.RuneSelf && isAlnum(byte(r))) })
	if len(words) == 0 {
		return false
	}
	if defKeywords[string(words[len(words)-1])] && isAlnum(prefix[len(prefix)-1]) {
		return true
	}
	// A Go method: func (r *T) Name.
	return string(words[0]) == "func" && prefix[len(prefix)-1] == ')'
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

// snippet returns a line trimmed and cut to maxSnippet runes, as valid
// UTF-8.
func snippet(line []byte) string {
	s := strings.ToValidUTF8(strings.TrimSpace(string(line)), "?")
	if utf8.RuneCountInString(s) > maxSnippet {
		r := []rune(s)
		s = string(r[:maxSnippet]) + "..."
	}
	return s
}

// candidate is a line that may be cited.
type candidate struct {
	file  *fileHits
	hit   lineHit // zero line: the file is named by the question
	score float64
}

// pick returns the best lines to cite, at most max, best first and no two
// within a few lines of each other in one file: first the best line of each
// file, then second lines, then any.
func pick(res *searchResult, max int) []candidate {
	var cands []candidate
	for _, fh := range res.files {
		base := res.fileScore(fh)
		if len(fh.hits) == 0 {
			if fh.lines > 0 {
				cands = append(cands, candidate{file: fh, score: base})
			}
			continue
		}
		for _, h := range fh.hits {
			s := base + res.anchorScore(fh.path, h.line)
			for i := range res.terms {
				bit := uint32(1) << i
				if h.terms&bit != 0 {
					s += res.weight[i]
				}
				if h.defines&bit != 0 {
					s += res.weight[i]
				}
			}
			cands = append(cands, candidate{file: fh, hit: h, score: s})
		}
	}
	slices.SortStableFunc(cands, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(b.score, a.score), strings.Compare(a.file.path, b.file.path), a.hit.line-b.hit.line)
	})

	var picked []candidate
	perFile := map[string]int{}
	near := func(c candidate) bool {
		for _, p := range picked {
			if p.file == c.file && abs(p.hit.line-c.hit.line) <= 4 {
				return true
			}
		}
		return false
	}
	for _, limit := range []int{1, 2, max} {
		for _, c := range cands {
			if len(picked) >= max {
				return picked
			}
			if perFile[c.file.path] >= limit || near(c) {
				continue
			}
			picked = append(picked, c)
			perFile[c.file.path]++
		}
	}
	return picked
}

// fileScore is what every line of a file gets for the file itself: the
// question names it or its folder, the focus points at it, and it holds
// several of the terms.
func (res *searchResult) fileScore(fh *fileHits) float64 {
	s := 0.0
	for i, t := range res.terms {
		if fh.pathTerms&(1<<i) != 0 {
			s += 2 * baseWeight[t.kind]
		}
	}
	for _, a := range res.focus {
		if a.Path == fh.path {
			s += 2
			break
		}
	}
	if n := bits.OnesCount32(fh.terms); n > 1 {
		s += 0.5 * float64(n-1)
	}
	return s
}

// anchorScore is what a line gets for being near the lines the focus points
// at.
func (res *searchResult) anchorScore(path string, line int) float64 {
	for _, a := range res.focus {
		if a.Path == path && a.StartLine > 0 && line >= a.StartLine-3 && line <= max(a.EndLine, a.StartLine)+3 {
			return 3
		}
	}
	return 0
}

// citations returns the cited ranges of picks: two lines around each line,
// or the start of a file the question names, within the file.
func citations(picks []candidate) []chat.Citation {
	out := make([]chat.Citation, 0, len(picks))
	for _, c := range picks {
		out = append(out, citeRange(c))
	}
	return out
}

func citeRange(c candidate) chat.Citation {
	n := c.file.lines
	if c.hit.line == 0 {
		return chat.Citation{Path: c.file.path, StartLine: 1, EndLine: min(n, 10)}
	}
	return chat.Citation{Path: c.file.path, StartLine: max(1, c.hit.line-2), EndLine: min(n, c.hit.line+2)}
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
