package mask

import "math"

// view is the text a matcher examines. Every read at or after the keyword
// goes through at, which records reach: one past the furthest position the
// matcher looked at. A decision whose reach exceeds len(s) depended on the
// end of the text; in a stream such a decision is provisional.
type view struct {
	s     string
	reach int
	// back is how far before its keyword a matcher found that a span could
	// start (a value written before its label), when that is further than
	// its rule's lookback.
	back int
	// provisional: the text may continue (a Stream's pending text). A
	// decision that has read past the end is provisional, and its
	// candidates cannot change what is released (the release stops before
	// the keyword), so a matcher may skip the checks of a value that runs
	// to the end.
	provisional bool
	// wait is set when the first read past the end was a run of bytes of
	// this set (view.run) that could have gone on for waitEnd: as long as
	// the text grows by bytes of wait alone and stays shorter than
	// waitEnd, the run goes on to the end, and the decision is still
	// provisional, so a Stream need not make it again.
	wait    *byteSet
	waitEnd int
}

// pending reports a provisional view whose matcher has read past the end:
// its decision will be made again when more text arrives.
func (v *view) pending() bool { return v.provisional && v.reach > len(v.s) }

// at returns s[i], or -1 past the end, and records the read.
func (v *view) at(i int) int {
	if i >= v.reach {
		v.reach = i + 1
	}
	if i < len(v.s) {
		return int(v.s[i])
	}
	return -1
}

// run returns the end of the run of bytes in set that starts at i, looking
// at no more than limit bytes of the run.
func (v *view) run(i int, set *byteSet, limit int) int {
	s := v.s
	j := i
	if end := min(len(s), i+limit); i < end {
		t, k := s[i:end], 0
		_ = set[0] // set is not nil: the loop need not check it on every byte
		for k < len(t) && set[t[k]] {
			k++
		}
		j += k
	}
	switch {
	case j-i >= limit: // looked at s[i:j]
		if limit > 0 {
			v.reach = max(v.reach, j)
		}
	case j < len(s): // and at the byte that ends the run
		v.reach = max(v.reach, j+1)
	default: // and past the end
		if v.reach <= len(s) {
			v.wait, v.waitEnd = set, i+limit
		}
		v.reach = max(v.reach, j+1)
	}
	return j
}

// hasPrefix reports whether s[i:] starts with lit (exact bytes).
func (v *view) hasPrefix(i int, lit string) bool {
	for k := 0; k < len(lit); k++ {
		if v.at(i+k) != int(lit[k]) {
			return false
		}
	}
	return true
}

// skipBlank skips spaces and tabs.
func (v *view) skipBlank(i int) int {
	for {
		c := v.at(i)
		if c != ' ' && c != '\t' {
			return i
		}
		i++
	}
}

// byteSet is a membership table for bytes.
type byteSet [256]bool

// newSet builds a set from a spec of single bytes and ranges like "a-z";
// a '-' at either end of the spec is literal.
func newSet(spec string) *byteSet {
	var s byteSet
	for i := 0; i < len(spec); i++ {
		if i+2 < len(spec) && spec[i+1] == '-' {
			for c := int(spec[i]); c <= int(spec[i+2]); c++ {
				s[c] = true
			}
			i += 2
			continue
		}
		s[spec[i]] = true
	}
	return &s
}

// notSet builds the complement of newSet(spec).
func notSet(spec string) *byteSet {
	s := newSet(spec)
	for i := range s {
		s[i] = !s[i]
	}
	return s
}

var (
	setAlnum     = newSet("A-Za-z0-9")
	setWord      = newSet("A-Za-z0-9_")
	setB64       = newSet("A-Za-z0-9+/=")
	setB64URL    = newSet("A-Za-z0-9_-")
	setB64URLDot = newSet("A-Za-z0-9_.-")
	setHexLower  = newSet("0-9a-f")
	setHex       = newSet("0-9a-fA-F")
	setUpperNum  = newSet("A-Z0-9")
	setLowerNum  = newSet("a-z0-9")
	setDigit     = newSet("0-9")
	// identifier characters of a key name (db.password, DB_PASSWORD, x-api-key)
	setIdent = newSet("A-Za-z0-9_.-")
	// URL scheme characters
	setScheme = newSet("A-Za-z0-9+.-")
	// URL user-info user part
	setURLUser = notSet(" \t\r\n\v\f:/@\"'`<>\\?#[]")
	// unquoted assignment values stop at these
	setUnquoted = notSet(" \t\r\n\v\f\"'`,;&(){}[]<>\\")
	// credential characters after an Authorization scheme or Bearer
	setAuthValue = newSet("A-Za-z0-9._~+/=-")
	setAuthSch   = newSet("A-Za-z0-9-")
	setPEMLabel  = newSet("A-Z0-9 ")
	setPEMBody   = newSet("A-Za-z0-9+/=:,-")
	setAzure     = newSet("A-Za-z0-9_~.")
	setAzureBody = newSet("A-Za-z0-9_~.-")
	setSAS       = newSet("A-Za-z0-9%+/=")
	setMaskID    = newSet("a-z0-9-")
	setWebhook   = newSet("A-Za-z0-9_/-")
	setAge       = newSet("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L")
)

func isSpace(c int) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isLower(c byte) bool  { return 'a' <= c && c <= 'z' }
func isUpper(c byte) bool  { return 'A' <= c && c <= 'Z' }
func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// wordBefore reports whether the byte before position i is a word byte. The
// n, r or t of a JSON escape (\n, \r, \t) is not: masked text is often a
// JSON string.
func wordBefore(s string, i int) bool {
	if i == 0 || !setWord[s[i-1]] {
		return false
	}
	if i >= 2 && s[i-2] == '\\' {
		switch s[i-1] {
		case 'n', 'r', 't':
			return false
		}
	}
	return true
}

// wordAt reports whether v has a word byte at i.
func wordAt(v *view, i int) bool {
	c := v.at(i)
	return c >= 0 && setWord[c]
}

// textStats summarises the characters of a value.
type textStats struct {
	lower, upper, digit, other int
	distinct                   int
	letterRun                  int     // the longest run of letters
	entropy                    float64 // Shannon entropy, bits per byte
}

func (t textStats) classes() int {
	n := 0
	for _, c := range [...]int{t.lower, t.upper, t.digit, t.other} {
		if c > 0 {
			n++
		}
	}
	return n
}

// klog2k[k] is k*log2(k), the term of statsOf's entropy sum, for the
// counts of short values.
var klog2k = func() (t [512]float64) {
	for k := 2; k < len(t); k++ {
		t[k] = float64(k) * math.Log2(float64(k))
	}
	return t
}()

// byteClass is 0 for a lower-case letter, 1 upper case, 2 a digit, 3
// anything else (the counts of textStats, in that order).
var byteClass = func() (t [256]uint8) {
	for c := range t {
		switch b := byte(c); {
		case isLower(b):
			t[c] = 0
		case isUpper(b):
			t[c] = 1
		case isDigit(b):
			t[c] = 2
		default:
			t[c] = 3
		}
	}
	return t
}()

func statsOf(v string) textStats {
	var t textStats
	if len(v) == 0 {
		return t
	}
	// The byte counts of a value shorter than 256 fit a byte, and a
	// quarter of the table is cleared.
	var seen [257]byte
	var cls [4]int
	sum := 0.0
	if len(v) < 256 {
		var cnt [256]uint8
		t.distinct, t.letterRun = countBytes(v, &cnt, &seen)
		sum = sumCounts(&cnt, seen[:t.distinct], &cls)
	} else {
		var cnt [256]uint32
		t.distinct, t.letterRun = countBytes(v, &cnt, &seen)
		sum = sumCounts(&cnt, seen[:t.distinct], &cls)
	}
	// H = log2(n) - (1/n) * sum(c * log2(c)) over the byte counts c; the
	// classes are counted by distinct byte too.
	n := float64(len(v))
	log2n := 0.0
	if len(v) < len(klog2k) {
		log2n = klog2k[len(v)] / n
	} else {
		log2n = math.Log2(n)
	}
	t.entropy = log2n - sum/n
	t.lower, t.upper, t.digit, t.other = cls[0], cls[1], cls[2], cls[3]
	return t
}

// countBytes counts the bytes of v in cnt (all zero, wide enough for
// len(v)) and lists each distinct byte once in seen, in the order of
// first occurrence; it returns their number and the length of the longest
// run of letters. The loop does not branch on whether a byte is new or a
// letter, which for a random value is a coin toss: each byte is written at
// the end of the list, which moves on only past a new one, and the run is
// masked to zero by a byte that is not a letter.
func countBytes[T uint8 | uint32](v string, cnt *[256]T, seen *[257]byte) (distinct, letterRun int) {
	d, run, best := 0, 0, 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		k := cnt[c]
		seen[d] = c
		cnt[c] = k + 1
		if k == 0 {
			d++
		}
		run = (run + 1) & letterMask[c]
		best = max(best, run)
	}
	return d, best
}

// sumCounts adds the counts of the distinct bytes seen to their classes
// in cls and returns the sum of k*log2(k) over them (statsOf's entropy
// term; klog2k[1] is 0).
func sumCounts[T uint8 | uint32](cnt *[256]T, seen []byte, cls *[4]int) float64 {
	sum := 0.0
	for _, c := range seen {
		k := cnt[c]
		cls[byteClass[c]] += int(k)
		if uint32(k) < uint32(len(klog2k)) {
			sum += klog2k[k]
		} else {
			sum += float64(k) * math.Log2(float64(k))
		}
	}
	return sum
}

// letterMask[b] is all ones for a letter, else zero.
var letterMask = func() (t [256]int) {
	for b := range t {
		if isLetter(byte(b)) {
			t[b] = -1
		}
	}
	return t
}()

// distinctAtLeast reports whether v has at least k distinct bytes.
func distinctAtLeast(v string, k int) bool {
	var seen [256]bool
	n := 0
	for i := 0; i < len(v); i++ {
		if !seen[v[i]] {
			seen[v[i]] = true
			n++
			if n >= k {
				return true
			}
		}
	}
	return false
}

func hasDigitAndLetter(v string) bool {
	d, l := false, false
	for i := 0; i < len(v); i++ {
		d = d || isDigit(v[i])
		l = l || isLetter(v[i])
	}
	return d && l
}

func hasUpperAndLower(v string) bool {
	u, l := false, false
	for i := 0; i < len(v); i++ {
		c := v[i]
		u = u || 'A' <= c && c <= 'Z'
		l = l || 'a' <= c && c <= 'z'
	}
	return u && l
}

// equalFold reports ASCII case-insensitive equality.
func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if fold(a[i]) != fold(b[i]) {
			return false
		}
	}
	return true
}

func hasPrefixFold(s, p string) bool { return len(s) >= len(p) && equalFold(s[:len(p)], p) }
func hasSuffixFold(s, p string) bool {
	return len(s) >= len(p) && equalFold(s[len(s)-len(p):], p)
}
