package mask

import (
	"math"
	"math/rand"
	"strings"
	"testing"
)

// The value checks that classify bytes without branching on them must
// say what a plain walk over the same bytes says. The references below
// are those walks; camelWords is its own, and textStats.camelWords may
// skip it only where it finds nothing.

func statsRef(v string) textStats {
	var t textStats
	cnt := map[byte]int{}
	run := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		cnt[c]++
		switch {
		case isLower(c):
			t.lower++
		case isUpper(c):
			t.upper++
		case isDigit(c):
			t.digit++
		default:
			t.other++
		}
		if isLetter(c) {
			run++
			t.letterRun = max(t.letterRun, run)
		} else {
			run = 0
		}
	}
	t.distinct = len(cnt)
	for _, k := range cnt {
		p := float64(k) / float64(len(v))
		t.entropy -= p * math.Log2(p)
	}
	return t
}

func looksLikeCodeRef(v string) bool {
	if !isLetter(v[0]) && v[0] != '_' && v[0] != '$' {
		return false
	}
	dots, segStart := 0, true
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '.':
			if segStart {
				return false
			}
			dots++
			segStart = true
		case isLetter(c) || c == '_' || c == '$':
			segStart = false
		case isDigit(c):
			if segStart {
				return false
			}
		default:
			return false
		}
	}
	if segStart {
		return false
	}
	if dots > 0 {
		return namedParts(v) // the same after the walk
	}
	return looksLikeIdentifierRef(v)
}

func looksLikeIdentifierRef(v string) bool {
	letters, words, upper := 0, 1, 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case isLower(c):
			letters++
		case isUpper(c):
			letters++
			upper++
			if i > 0 && isLower(v[i-1]) {
				words++
			}
		case c == '_':
			if i > 0 && i < len(v)-1 {
				words++
			}
		default:
			return false
		}
	}
	if letters == 0 {
		return false
	}
	return upper == letters || letters >= 3*words
}

// values draws strings from alphabets that make each check's cases
// common: names, dotted paths, random tokens, long and short.
func values(n int) []string {
	r := rand.New(rand.NewSource(7))
	alphabets := []string{
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
		"aeiouxyzAEIOUXYZ_._$9",
		"ToknSecrtAgncyIdentfCodeContentType",
		"aA0._-+/=~ ",
		"0123456789abcdef",
	}
	out := []string{"a", "_", "__", "a_", "_a", "A.b", "a..b", "a.", ".a", "a.b1", "cfg.Secret", "process.env.TOKEN",
		"AgencyIdentificationCodeContentType", "1AbcdeAbcdeAbcdef1", "getPassword", "token_store", "API_KEY", "x1y2z3", strings.Repeat("ab", 200)}
	for len(out) < n {
		a := alphabets[r.Intn(len(alphabets))]
		b := make([]byte, 1+r.Intn(80))
		if r.Intn(20) == 0 {
			b = make([]byte, 200+r.Intn(400))
		}
		for i := range b {
			b[i] = a[r.Intn(len(a))]
		}
		out = append(out, string(b))
	}
	return out
}

func TestValueChecksMatchPlainWalks(t *testing.T) {
	camels := 0
	for _, v := range values(20000) {
		got, want := statsOf(v), statsRef(v)
		if math.Abs(got.entropy-want.entropy) > 1e-9 {
			t.Fatalf("statsOf(%q).entropy = %v, want %v", v, got.entropy, want.entropy)
		}
		got.entropy = want.entropy
		if got != want {
			t.Fatalf("statsOf(%q) = %+v, want %+v", v, got, want)
		}
		if got, want := looksLikeCode(v), looksLikeCodeRef(v); got != want {
			t.Fatalf("looksLikeCode(%q) = %v, want %v", v, got, want)
		}
		if got, want := looksLikeIdentifier(v), looksLikeIdentifierRef(v); got != want {
			t.Fatalf("looksLikeIdentifier(%q) = %v, want %v", v, got, want)
		}
		// the walk textStats.camelWords skips would find nothing
		camel := camelWords(v)
		if got := statsOf(v).camelWords(v); got != camel {
			t.Fatalf("textStats.camelWords(%q) = %v, camelWords says %v", v, got, camel)
		}
		if camel {
			camels++
		}
	}
	if camels == 0 {
		t.Fatal("no value holds capitalised words: the camelWords check was not tried")
	}
}
