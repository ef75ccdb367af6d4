package mask

import (
	"math"
	"strings"
	"unsafe"
)

// Stream masks text that arrives in pieces, such as the text deltas of a
// streamed model answer. The concatenation of everything Write and Flush
// return equals String of the concatenated input. A Stream is not safe for
// concurrent use; use one per stream.
type Stream struct {
	m *Masker
	// The retained text, buf, is blk[base:n] read as a string (text).
	// blk is written only past n: a delta is appended without copying
	// what is retained, and the text released unmasked is returned as a
	// substring of it, without a copy, which no later Write changes.
	// Forgetting text moves base; a delta that does not fit moves the
	// retained text to a new block. Only that move stores a pointer: a
	// Write stores integers, so it costs no write barrier while the
	// collector marks (a strings.Builder stores its slice on each write,
	// and the garbage this stream makes keeps the collector marking a
	// fifth of the time).
	blk     []byte
	n, base int
	// Masked text is rendered into outBlk the same way: each release is
	// a substring of it, and a release that does not fit starts a new one.
	outBlk strings.Builder

	// Positions below are in buf: context, released text not yet
	// forgotten, pending text.
	skip int // keywords starting before buf[skip:] have been dealt with
	out  int // bytes of buf already released
	// The prefilter runs over each byte once: st is its state after
	// buf[:len(buf)], and hits are the keyword occurrences found in buf
	// that start at or after skip, whose rules run again on every Write
	// (their decision may depend on text still to come).
	st   uint32
	hits []hit
	// wake sums up hits; a Write that cannot wake any of them does not
	// look at them
	wake wake
	// where the runs that beforeHold looks back over start in buf
	trail trail
	// done are the candidates of keyword occurrences whose decision is
	// final (it did not depend on text still to come); their occurrences
	// are no longer in hits, so their rules do not run again.
	done []cand
	// chosen is resolve of done, made again only when done changes
	// (fresh is false); its array is reused by every resolve
	chosen []cand
	fresh  bool
}

// streamBlock is the least size of a Stream's text block; a block is at
// least twice the retained text and the delta that did not fit.
const streamBlock = 8192

// streamContext is how much text before the cut point a Stream keeps: more
// than any rule looks back from its keyword (a key name, a URL scheme, the
// digits of a Telegram bot id).
const streamContext = 160

// streamForget is the least a Stream forgets at once: the text before the
// context is dropped in pieces of at least this size, not on every Write.
const streamForget = 512

// Stream returns a masker for text that arrives in pieces (text deltas):
// Write returns the text that can be released now (masked), holding back only
// a trailing part that could still be the start of a secret; Flush returns
// (masked) whatever is held back at the end.
func (m *Masker) Stream() *Stream {
	return &Stream{m: m, wake: noWake}
}

// Write adds delta to the stream and returns the masked text that is now
// final. It holds back only a tail that a secret could still be completing:
// a token or key = value pair running to the end of the input, an open PEM
// block, a partly seen keyword.
func (s *Stream) Write(delta string) string {
	if s.m == nil || s.m.ac == nil {
		return delta
	}
	if delta == "" {
		return ""
	}
	from := s.n - s.base
	buf := s.append(delta)
	a := s.m.ac
	quiet := len(s.hits) == 0 && len(s.done) == 0
	n := len(s.hits)
	if quiet {
		// Most deltas end no keyword: then the prefilter's pass is all
		// there is to do before the release.
		i, st := a.next(buf, from, s.st)
		if st < a.outBase {
			s.st = st
			return s.releaseQuiet(buf)
		}
		// the pass goes on after the keyword it stopped at
		s.st, s.hits = s.m.advance(buf, i, st, s.m.hitsAt(buf, i, st, s.hits))
	} else {
		s.st, s.hits = s.m.advance(buf, from, s.st, s.hits)
	}
	if quiet && len(s.hits) == 0 {
		return s.releaseQuiet(buf)
	}
	limit := len(buf)
	if len(s.hits) > 0 {
		for i := n; i < len(s.hits); i++ {
			s.wake.add(&s.hits[i])
		}
		if s.wake.wakes(buf, from) {
			nd := len(s.done)
			s.hits, s.done = s.m.evalHits(buf, s.hits, s.skip, s.done, &s.wake)
			if len(s.done) != nd {
				s.fresh = false
			}
		}
		if s.wake.limit <= s.out {
			// A keyword still undecided holds the text that is not
			// released yet: nothing more can be released (what was
			// decided now is released by a later Write).
			return ""
		}
		limit = s.wake.limit
	}
	var chosen []cand
	if len(s.done) > 0 {
		if !s.fresh {
			// resolve reorders its argument; s.done stays as it is for cutPoint
			s.chosen = resolve(buf, append(s.chosen[:0], s.done...))
			s.fresh = true
		}
		chosen = s.chosen
	}
	f := max(s.out, frontier(buf, limit, int(a.depth[a.index(s.st)]), chosen, &s.trail))
	out := s.release(buf, f, chosen)
	if len(s.hits) == 0 && len(s.done) == 0 {
		// nothing in play: the text up to f is dealt with
		s.skip = f
		if c0 := f - streamContext; c0 >= streamForget {
			s.forget(c0)
		}
	} else if c := cutPoint(f, s.done); c > s.skip {
		// Keywords before the cut point are dealt with. The occurrences in
		// hits all start at or after it: the release never passes one.
		s.skip = c
		// drop the candidates whose keyword starts before c, in place
		keep := 0
		for i := range s.done {
			if s.done[i].ks >= c {
				if keep != i {
					s.done[keep] = s.done[i]
				}
				keep++
			}
		}
		if keep != len(s.done) {
			s.done = s.done[:keep]
			s.fresh = false
		}
		if c0 := c - streamContext; c0 >= streamForget {
			s.forget(c0)
		}
	}
	return out
}

// releaseQuiet is Write's end when no keyword is in play: the text up
// to the frontier is released unmasked and dealt with.
func (s *Stream) releaseQuiet(buf string) string {
	a := s.m.ac
	f := max(s.out, openEnd(buf, len(buf)-int(a.depth[a.index(s.st)]), &s.trail))
	out := buf[s.out:f]
	s.out, s.skip = f, f
	if c0 := f - streamContext; c0 >= streamForget {
		s.forget(c0)
	}
	return out
}

// text is the retained text.
func (s *Stream) text() string {
	return unsafe.String(unsafe.SliceData(s.blk), s.n)[s.base:]
}

// append adds delta to the retained text and returns it.
func (s *Stream) append(delta string) string {
	if len(s.blk)-s.n < len(delta) {
		// The retained text moves to a new block; the old one stays with
		// the text released from it.
		buf := s.text()
		blk := make([]byte, max(streamBlock, 2*(len(buf)+len(delta))))
		s.blk, s.n, s.base = blk, copy(blk, buf), 0
	}
	s.n += copy(s.blk[s.n:], delta)
	return s.text()
}

// forget drops the first n bytes of the retained text, which lie before
// the cut point (skip) and the released text (out).
func (s *Stream) forget(n int) {
	s.skip -= n
	s.out -= n
	for i := range s.hits {
		s.hits[i].shift(n)
	}
	for i := range s.done {
		x := &s.done[i]
		x.start, x.end, x.after, x.ks, x.ke = x.start-n, x.end-n, x.after-n, x.ks-n, x.ke-n
	}
	s.fresh = false
	if s.wake.limit != math.MaxInt {
		s.wake.limit -= n
	}
	if s.wake.end != math.MaxInt {
		s.wake.end -= n
	}
	s.base += n
	s.trail.shift(n)
}

// release returns buf[s.out:f] masked and marks it released: a
// substring of the retained text when nothing in it is masked.
func (s *Stream) release(buf string, f int, chosen []cand) string {
	from := s.out
	s.out = f
	masked := false
	for _, c := range chosen {
		if c.end > from && c.start < f && !c.protect {
			masked = true
			break
		}
	}
	if !masked {
		return buf[from:f]
	}
	n := renderedLen(from, f, chosen)
	if s.outBlk.Cap()-s.outBlk.Len() < n {
		s.outBlk = strings.Builder{}
		s.outBlk.Grow(max(streamBlock, n))
	}
	start := s.outBlk.Len()
	render(&s.outBlk, buf, from, f, chosen)
	return s.outBlk.String()[start:]
}

// Flush returns the masked remainder of the stream and resets it, so the
// Stream can be reused for a new text.
func (s *Stream) Flush() string {
	if s.m == nil || s.m.ac == nil {
		return ""
	}
	buf, out, skip := s.text(), s.out, s.skip
	s.blk, s.outBlk = nil, strings.Builder{}
	s.n, s.base, s.out, s.skip, s.st, s.hits, s.done, s.trail = 0, 0, 0, 0, 0, s.hits[:0], s.done[:0], trail{}
	s.wake, s.fresh = noWake, false
	if out >= len(buf) {
		return ""
	}
	cands, _, _ := s.m.scan(buf, false, skip, nil)
	chosen := resolve(buf, cands)
	var b strings.Builder
	render(&b, buf, out, len(buf), chosen)
	return b.String()
}

// frontier is the end of the text that is final: no span can start before
// it or change once more text arrives.
func frontier(s string, limit, depth int, chosen []cand, t *trail) int {
	f := min(limit, openEnd(s, len(s)-depth, t))
	// Never cut inside a chosen span.
	for _, c := range chosen {
		if c.start < f && f < c.end {
			f = c.start
		}
	}
	return f
}

// openEnd is where the text that a future span could claim starts: base,
// where a keyword may be partly seen at the end, or before it the few
// bytes a future keyword's span may start before it (spanLookbacks), or a
// quoted value a label may still follow (beforeHold).
func openEnd(s string, base int, t *trail) int {
	f := min(base, beforeHold(s, t))
	if base == 0 || base-maxSpanLookback >= f || !setSpanLookback[s[base-1]] {
		return f // no run before base can lower f
	}
	for i := range spanLookbacks {
		lb := &spanLookbacks[i]
		if !lb.set[s[base-1]] {
			continue
		}
		k := 1
		for k < lb.n && base-k > 0 && lb.set[s[base-k-1]] {
			k++
		}
		f = min(f, base-k)
	}
	return f
}

// cutPoint is the latest position c at or before f such that every
// candidate whose keyword starts before c ends at or before c, and every
// candidate whose keyword starts at or after c also starts there. Text
// before c then no longer influences masking, except as the context that
// rules look back on, so the stream may forget all but streamContext bytes
// of it.
func cutPoint(f int, cands []cand) int {
	c := f
	for changed := true; changed; {
		changed = false
		for _, x := range cands {
			if x.ks < c && x.end > c {
				c, changed = x.ks, true
			}
			if x.ks >= c && x.start < c {
				c, changed = x.start, true
			}
		}
	}
	return c
}
