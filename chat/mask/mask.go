package mask

import (
	"encoding/base64"
	"math"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// minOwnSecret is the shortest own secret New accepts; shorter values would
// mask ordinary text.
const minOwnSecret = 6

// maskPrefix starts every replacement; text already in the form
// "[masked:<id>]" is left exactly as it is, which makes masking idempotent.
const maskPrefix = "[masked:"

// Masker replaces secrets in text with "[masked:<rule>]". A Masker is
// immutable and safe for concurrent use; the zero value and a nil *Masker
// mask nothing.
type Masker struct {
	ac    *automaton
	specs []*spec // indexed by keyword.rule
	own   []string
}

// builtin holds the compiled built-in rules, shared by all maskers.
var builtin = sync.OnceValue(func() *Masker {
	specs, kws := builtinRules()
	return &Masker{ac: newAutomaton(kws), specs: specs}
})

// New returns a Masker with the built-in rules plus the daemon's own secrets,
// masked by exact value (also when they appear URL-encoded (query and path
// escaping) or base64-encoded (std, url, raw variants)). Empty and very short
// (< 6 bytes) own secrets are ignored.
func New(ownSecrets ...string) *Masker {
	b := builtin()
	seen := map[string]bool{}
	var extra []string
	add := func(v string) {
		if len(v) >= minOwnSecret && !seen[v] {
			seen[v] = true
			extra = append(extra, v)
		}
	}
	for _, sec := range ownSecrets {
		if len(sec) < minOwnSecret {
			continue
		}
		for _, v := range ownVariants(sec) {
			add(v)
		}
	}
	if len(extra) == 0 {
		return b
	}
	own := &spec{kind: kOwn, id: idOwnSecret, prio: prioOwn}
	specs := append(slices.Clip(b.specs), own)
	ownIdx := uint16(len(specs) - 1)
	kws := slices.Clone(b.ac.kws)
	for _, v := range extra {
		kws = append(kws, keyword{lit: v, rule: ownIdx})
	}
	return &Masker{ac: newAutomaton(kws), specs: specs, own: slices.Clone(ownSecrets)}
}

// With returns a Masker of m's rules and own secrets plus more secrets
// masked by value (secrets learnt after start, such as stored keys). m is
// not changed.
func (m *Masker) With(more ...string) *Masker {
	var own []string
	if m != nil {
		own = m.own
	}
	return New(append(slices.Clone(own), more...)...)
}

// ownVariants lists the encodings of an own secret that are masked: the raw
// value, its URL query and path escapings, its four base64 encodings, and the
// stable inner part of its base64 encoding when it is preceded by one or two
// other bytes (as in base64("user:" + secret)).
func ownVariants(sec string) []string {
	vs := []string{sec, url.QueryEscape(sec), url.PathEscape(sec)}
	encs := []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding}
	for _, e := range encs {
		vs = append(vs, e.EncodeToString([]byte(sec)))
	}
	for _, e := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for k := 1; k <= 2; k++ {
			enc := e.EncodeToString(append(make([]byte, k), sec...))
			// Characters fully determined by the secret: bits [8k, 8k+8n).
			from := (8*k + 5) / 6
			to := (8 * (k + len(sec))) / 6
			if to-from >= minOwnSecret+2 {
				vs = append(vs, enc[from:to])
			}
		}
	}
	return vs
}

// Rules lists the ids of the built-in rules (for docs and tests), sorted.
// Own secrets given to New are reported as "own-secret", which is not listed.
func (m *Masker) Rules() []string {
	var ids []string
	for id := ruleID(0); id < numRuleIDs+ruleID(len(tableNames)); id++ {
		if id == idProtect || id == idOwnSecret {
			continue
		}
		ids = append(ids, ruleName(id))
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// String returns s with every secret replaced by [masked:<rule>]. Safe for
// concurrent use. Idempotent: String(String(s)) == String(s). When nothing
// is masked, s itself is returned without allocating.
func (m *Masker) String(s string) string {
	if m == nil || m.ac == nil || s == "" {
		return s
	}
	cands, _, _ := m.scan(s, false, 0, nil)
	if len(cands) == 0 {
		return s
	}
	chosen := resolve(s, cands)
	if !anyMasked(chosen) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	render(&b, s, 0, len(s), chosen)
	return b.String()
}

// cand is one candidate span found by a rule.
type cand struct {
	start, end int // span to replace
	after      int // first byte after the span that is not a '.'
	ks, ke     int // keyword occurrence that produced it
	id         ruleID
	prio       int8
	protect    bool // an existing "[masked:...]" token, kept verbatim
}

// scan runs the prefilter over s and the selected rules at each keyword hit
// that starts at or after skip (text before skip is only context). In stream
// mode it also returns limit, the smallest position at which a candidate
// could still appear or change once more text arrives, and the automaton's
// depth at the end of s.
func (m *Masker) scan(s string, stream bool, skip int, cands []cand) (_ []cand, limit, depth int) {
	a := m.ac
	limit = len(s)
	st := uint32(0)
	var memo assignMemo
	for i := 0; i < len(s); {
		if i, st = a.next(s, i, st); st < a.outBase {
			continue // the end of s
		}
		q := a.index(st)
		for _, ki := range a.outs[a.outStart[q]:a.outStart[q+1]] {
			kw := &a.kws[ki]
			sp := m.specs[kw.rule]
			ke := i
			ks := ke - len(kw.lit)
			if ks < skip {
				continue
			}
			v := view{s: s, reach: ke}
			cands = evalAt(&v, ks, ke, kw.lit, sp, &memo, cands)
			if stream && v.reach > len(s) {
				if lo := ks - max(sp.lookback, v.back); lo < limit {
					limit = max(lo, 0)
				}
			}
		}
	}
	if stream {
		depth = int(a.depth[a.index(st)])
	}
	return cands, limit, depth
}

// evalAt runs the rule sp at the keyword occurrence s[ks:ke] and appends
// the candidates it finds.
func evalAt(v *view, ks, ke int, lit string, sp *spec, memo *assignMemo, cands []cand) []cand {
	switch sp.kind {
	case kAssign:
		if r := matchAssign(v, ks, ke, memo); r.start >= 0 {
			cands = appendCand(v, cands, r, ks, ke, sp)
		}
		return cands
	case kNear:
		var rs [4]result
		n := matchNear(v, ks, ke, sp, &rs)
		for _, r := range rs[:n] {
			cands = appendCand(v, cands, r, ks, ke, sp)
		}
		return cands
	}
	if r := match(v, ks, ke, lit, sp); r.start >= 0 {
		cands = appendCand(v, cands, r, ks, ke, sp)
	}
	return cands
}

func appendCand(v *view, cands []cand, r result, ks, ke int, sp *spec) []cand {
	// resolve looks at the first byte after the span that is not a dot (a
	// sentence may end right after a secret)
	after := r.end
	for v.at(after) == '.' {
		after++
	}
	return append(cands, cand{start: r.start, end: r.end, after: after, ks: ks, ke: ke, id: r.id, prio: sp.prio, protect: r.protect})
}

// hit is one keyword occurrence s[ks:ke] of keyword ki. Once its rule
// has run and its decision is provisional, lo is where its span could
// start, and the decision is not made again while the text that arrived
// after seen is only bytes of wait and ends before waitEnd (view.wait).
type hit struct {
	ks, ke  int
	ki      uint32
	lo      int
	seen    int
	waitEnd int
	wait    *byteSet
	key     int // the generic rule's keyword: where its key name starts (keyStart)
}

// asleep reports whether h's provisional decision would come out the same
// on s: its wait holds for the text that arrived since it was made. The
// occurrences in play wait on few sets and were last looked at together,
// so c remembers the answers of one Write by set.
func (h *hit) asleep(s string, c *waitCache) bool {
	if h.wait == nil || len(s) >= h.waitEnd {
		return false
	}
	if h.wait == setNotNewline {
		// the set most occurrences wait on: no cache needed
		if strings.IndexByte(s[h.seen:], '\n') >= 0 {
			return false
		}
		h.seen = len(s)
		return true
	}
	if h.wait == setNearWait {
		if nearWakes(s, max(h.ke, h.seen-1), h.seen) {
			return false
		}
		h.seen = len(s)
		return true
	}
	k := 0
	for k < c.n && (c.set[k] != h.wait || c.seen[k] != h.seen) {
		k++
	}
	if k == c.n {
		if k == len(c.set) {
			k = 0 // forget the first: the answer is computed again
		} else {
			c.n++
		}
		c.set[k], c.seen[k], c.all[k] = h.wait, h.seen, allIn(s[h.seen:], h.wait)
	}
	if !c.all[k] {
		return false
	}
	h.seen = len(s)
	return true
}

// waitCache holds whether the text after seen is all bytes of set, for a
// few sets.
type waitCache struct {
	n    int
	set  [4]*byteSet
	seen [4]int
	all  [4]bool
}

// shift moves h's positions n bytes to the left.
func (h *hit) shift(n int) {
	h.ks, h.ke, h.lo, h.seen, h.waitEnd, h.key = h.ks-n, h.ke-n, h.lo-n, h.seen-n, h.waitEnd-n, h.key-n
}

// advance runs the prefilter over s[from:], starting in state st, and
// appends the keyword occurrences it finds to hits, except those their
// rule turns down at once (spec.rejects).
func (m *Masker) advance(s string, from int, st uint32, hits []hit) (uint32, []hit) {
	a := m.ac
	for i := from; i < len(s); {
		if i, st = a.next(s, i, st); st < a.outBase {
			continue // the end of s
		}
		hits = m.hitsAt(s, i, st, hits)
	}
	return st, hits
}

// hitsAt appends to hits the keyword occurrences that end at i, where
// the prefilter is in state st, except those their rule turns down at
// once.
func (m *Masker) hitsAt(s string, i int, st uint32, hits []hit) []hit {
	a := m.ac
	q := a.index(st)
	for _, ki := range a.outs[a.outStart[q]:a.outStart[q+1]] {
		kw := &a.kws[ki]
		ks := i - len(kw.lit)
		if sp := m.specs[kw.rule]; !sp.rejects(s, ks, i, kw.lit) {
			hits = append(hits, hit{})
			newHit(&hits[len(hits)-1], s, ks, i, ki, sp)
		}
	}
	return hits
}

// deferBytes is how far past its keyword a Stream lets the text grow
// before it first decides the keyword's rule, unless a line ends first.
const deferBytes = 64

// newHit is the occurrence s[ks:ke] of keyword ki as a Stream first holds
// it: not decided yet, and asleep (hit.asleep) until the line ends or the
// text has grown deferBytes past it (a service name: until its window can
// end), since a rule decided on the first bytes after its keyword is most
// often decided again. Until then it holds the text from the earliest
// position its span could start. It is written to *h, a zero hit in
// place in the Stream's list.
func newHit(h *hit, s string, ks, ke int, ki uint32, sp *spec) {
	lo, waitEnd, wait, key := max(0, ks-sp.lookback), ke+deferBytes, setNotNewline, 0
	switch sp.kind {
	case kOwn:
		wait = nil // decided by its own bytes
	case kAssign:
		key = keyStart(s, ks)
		lo = min(lo, assignStart(s, ks, key))
	case kNear:
		wait, waitEnd = setNearWait, ke+nearWindow+1
	}
	h.ks, h.ke, h.ki, h.lo, h.seen, h.waitEnd, h.key = ks, ke, ki, lo, ke, waitEnd, key
	if wait != nil {
		h.wait = wait
	}
}

// setNotNewline is every byte but '\n'.
var setNotNewline = notSet("\n")

// evalHits runs the rules of the given keyword occurrences that start at or
// after skip, as scan does in stream mode. The candidates of a decision
// that did not depend on the end of s are final: they are appended to
// done and their occurrence is dropped from hits. A decision that did is
// provisional: its occurrence stays, and its candidates are dropped (they
// start at or after the limit, so they cannot change what is released).
// An occurrence whose provisional decision would come out the same
// (hit.asleep) is not decided again. It returns the remaining
// occurrences and done, and sums up the remaining occurrences in *w
// (w.limit is the smallest position at which a provisional candidate
// could start).
func (m *Masker) evalHits(s string, hits []hit, skip int, done []cand, w *wake) ([]hit, []cand) {
	*w = noWake
	var memo assignMemo
	var wc waitCache
	keep := 0
	for i := range hits {
		h := &hits[i] // in place: a hit is eight words
		if h.ks < skip {
			continue
		}
		// A keyword inside the key name the generic rule has just decided
		// on (secret_key holds "secret" and "key") shares that decision
		// (assignMemo), so it is decided with it, asleep or not.
		if h.wait == nil || memo.ok && memo.a <= h.ks && h.ke <= memo.b && m.specs[m.ac.kws[h.ki].rule].kind == kAssign || !h.asleep(s, &wc) {
			kw := &m.ac.kws[h.ki]
			sp := m.specs[kw.rule]
			if sp.kind == kNear && h.wait == setNearWait && len(s) >= h.waitEnd {
				// A service name whose window has arrived but whose last
				// value is still arriving would wait for that value to
				// end: it waits without walking the window.
				if p, ok := nearValueArriving(s, h.ke); ok {
					h.wait, h.waitEnd, h.seen = setNearValue, p+maxNearValue+1, len(s)
					w.add(h)
					hits[keep] = *h
					keep++
					continue
				}
			}
			v := view{s: s, reach: h.ke, provisional: true}
			if sp.kind == kAssign {
				memo.keyKnown, memo.keyKs, memo.key = true, h.ks, h.key
			}
			n := len(done)
			done = evalAt(&v, h.ks, h.ke, kw.lit, sp, &memo, done)
			if v.reach <= len(s) {
				continue
			}
			done = done[:n]
			h.lo = max(0, h.ks-max(sp.lookback, v.back))
			h.wait, h.waitEnd, h.seen = v.wait, v.waitEnd, len(s)
			if h.wait == nil {
				// nothing in particular to wait for: decide again at the
				// line's end or after deferBytes/2 more bytes
				h.wait, h.waitEnd = setNotNewline, len(s)+deferBytes/2
			}
		}
		w.add(h)
		if keep != i {
			hits[keep] = *h
		}
		keep++
	}
	return hits[:keep], done
}

// wake sums up the keyword occurrences a Stream holds, so that a Write
// whose text cannot wake any of them need not look at each: limit is the
// least position their spans could start at, end the least waitEnd, and
// run whether one waits on a set other than setNotNewline and setNearWait
// (then every Write looks).
type wake struct {
	limit, end int
	run        bool
	line       bool // one waits on setNotNewline (a '\n' wakes it)
	near       bool // one waits on setNearWait (see nearWakes)
	now        bool // one is to be decided on the next Write
}

// noWake sums up no occurrences.
var noWake = wake{limit: math.MaxInt, end: math.MaxInt}

func (w *wake) add(h *hit) {
	w.limit = min(w.limit, h.lo)
	switch h.wait {
	case nil:
		w.now = true
	case setNotNewline:
		w.line = true
	case setNearWait:
		w.near = true
	default:
		w.run = true
	}
	w.end = min(w.end, h.waitEnd)
}

// wakes reports whether s, which grew from position from on, may wake an
// occurrence that w sums up.
func (w *wake) wakes(s string, from int) bool {
	return w.now || w.run || len(s) >= w.end || w.line && strings.IndexByte(s[from:], '\n') >= 0 ||
		w.near && nearWakes(s, max(0, from-1), from)
}

// resolve picks the spans to replace: existing mask tokens are kept, any
// candidate touching one is dropped, and among overlapping candidates the
// earliest start wins, then the longest span, then the higher priority.
// Ties are broken by the scan's order, so that the choice does not depend
// on the order of cands. It reorders and filters cands in place and
// returns the chosen spans in text order.
func resolve(s string, cands []cand) []cand {
	hasProtect := false
	for i := range cands {
		if cands[i].protect {
			hasProtect = true
			break
		}
	}
	keep := cands[:0]
	for _, c := range cands {
		if !c.protect {
			// A span glued to a bracket (or followed by dots and a bracket)
			// is not reported: once its neighbour is masked, the neighbour
			// is a mask token, and the span's rule might decide differently
			// next to it. Own secrets depend on their bytes alone and are
			// always masked.
			if c.id != idOwnSecret && (c.start > 0 && s[c.start-1] == ']' || c.after < len(s) && s[c.after] == '[') {
				continue
			}
			if hasProtect && touchesProtected(c, cands) {
				continue
			}
		}
		keep = append(keep, c)
	}
	cands = keep
	sortCands(cands)
	out := cands[:0]
	last := -1
	for _, c := range cands {
		if c.start < last {
			continue
		}
		if c.end <= c.start {
			continue
		}
		out = append(out, c)
		last = c.end
	}
	return out
}

// candCmp orders candidates for resolve: earliest start, then longest
// span, then an existing mask token, then the higher priority; the rest
// (keyword position, rule) is the order of the scan, so that the choice does
// not depend on the order of cands (a Stream decides candidates at
// different times).
func candCmp(x, y *cand) int {
	switch {
	case x.start != y.start:
		return x.start - y.start
	case x.end != y.end:
		return y.end - x.end
	case x.protect != y.protect:
		if x.protect {
			return -1
		}
		return 1
	case x.prio != y.prio:
		return int(y.prio) - int(x.prio)
	case x.ke != y.ke:
		return x.ke - y.ke
	case x.ks != y.ks:
		return x.ks - y.ks
	default:
		return int(x.id) - int(y.id)
	}
}

// sortCands sorts cands by candCmp. The scan finds them nearly in order
// (by keyword, and most spans start at their keyword), so an insertion
// sort does it in about one comparison each; a general sort takes over
// when the input turns out to be far from ordered.
func sortCands(cands []cand) {
	moves := 0
	for i := 1; i < len(cands); i++ {
		if candCmp(&cands[i-1], &cands[i]) <= 0 {
			continue
		}
		x := cands[i]
		j := i
		for j > 0 && candCmp(&cands[j-1], &x) > 0 {
			j--
		}
		copy(cands[j+1:i+1], cands[j:i])
		cands[j] = x
		if moves += i - j; moves > 4*len(cands)+64 {
			slices.SortFunc(cands, func(x, y cand) int { return candCmp(&x, &y) })
			return
		}
	}
}

func touchesProtected(c cand, all []cand) bool {
	for _, p := range all {
		if !p.protect {
			continue
		}
		if c.start < p.end && p.start < c.end || c.ks < p.end && p.start < c.ke {
			return true
		}
	}
	return false
}

func anyMasked(chosen []cand) bool {
	for _, c := range chosen {
		if !c.protect {
			return true
		}
	}
	return false
}

// renderedLen is the length of what render writes for s[from:to].
func renderedLen(from, to int, chosen []cand) int {
	n := to - from
	for _, c := range chosen {
		if c.end <= from || c.start >= to || c.protect {
			continue
		}
		n += len(maskPrefix) + len(ruleName(c.id)) + 1 - (c.end - c.start)
	}
	return n
}

// render writes s[from:to] with the chosen spans replaced. Chosen spans must
// not straddle from or to.
func render(b *strings.Builder, s string, from, to int, chosen []cand) {
	pos := from
	for _, c := range chosen {
		if c.end <= from || c.start >= to {
			continue
		}
		if c.protect {
			continue
		}
		b.WriteString(s[pos:c.start])
		b.WriteString(maskPrefix)
		b.WriteString(ruleName(c.id))
		b.WriteByte(']')
		pos = c.end
	}
	b.WriteString(s[pos:to])
}
