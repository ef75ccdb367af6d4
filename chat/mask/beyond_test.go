package mask_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/prchat/prchat/chat/mask"
	"github.com/prchat/prchat/chat/mask/internal/fakesecret"
)

// Goals on the beyond corpus (fakesecret.Beyond): the scores these tests
// hold the masker to. Recall is the share of secrets masked whole.
const (
	beyondMinRecall   = 0.99 // at least, over all families
	beyondMinFamily   = 0.95 // at least, in every family
	beyondMaxHarmless = 0.00 // at most, the share of look-alikes changed
)

// wholeMask reports how the masker treated a secret: "missed" (the secret
// is still in the output), "partial" (masked, but a piece of it is left
// next to a mask) or "masked". The changed region of the text lies between
// the longest common prefix and suffix of input and output; a secret not
// inside it was cut.
func wholeMask(in, out, secret string) string {
	if strings.Contains(out, secret) {
		return "missed"
	}
	i := strings.Index(in, secret)
	j := i + len(secret)
	p := 0
	for p < len(in) && p < len(out) && in[p] == out[p] {
		p++
	}
	q := 0
	for q < len(in)-p && q < len(out)-p && in[len(in)-1-q] == out[len(out)-1-q] {
		q++
	}
	if lo, hi := p, len(in)-q; lo > i || hi < j {
		return "partial"
	}
	return "masked"
}

// beyondScores are the results of one masker on the beyond corpus.
type beyondScores struct {
	families              []string
	secrets, masked       map[string]int
	partial               []string
	wrongRule             []string
	missed                []string
	harmless, changed     int
	changedTexts          []string
	totalSec, totalMasked int
}

func scoreBeyond(m *mask.Masker, recs []fakesecret.Record) beyondScores {
	sc := beyondScores{secrets: map[string]int{}, masked: map[string]int{}}
	for _, rec := range recs {
		out := m.String(rec.Text)
		if rec.Secret == "" {
			sc.harmless++
			if out != rec.Text {
				sc.changed++
				sc.changedTexts = append(sc.changedTexts, fmt.Sprintf("%q -> %q", rec.Text, out))
			}
			continue
		}
		if !slices.Contains(sc.families, rec.Family) {
			sc.families = append(sc.families, rec.Family)
		}
		sc.secrets[rec.Family]++
		sc.totalSec++
		switch wholeMask(rec.Text, out, rec.Secret) {
		case "masked":
			sc.masked[rec.Family]++
			sc.totalMasked++
			if rec.Rule != "" && !strings.Contains(out, "[masked:"+rec.Rule+"]") {
				sc.wrongRule = append(sc.wrongRule, fmt.Sprintf("%s: %q -> %q", rec.Rule, rec.Text, out))
			}
		case "partial":
			sc.partial = append(sc.partial, fmt.Sprintf("%s: %q -> %q", rec.Family, rec.Text, out))
		default:
			sc.missed = append(sc.missed, fmt.Sprintf("%s: %q", rec.Family, rec.Text))
		}
	}
	return sc
}

func ratio(a, b int) float64 { return float64(a) / float64(max(b, 1)) }

// TestBeyond scores the masker on the beyond corpus, prints recall per
// family, partial masks and look-alikes changed, and fails below the goals
// above, on any partial mask and on a secret masked under another rule
// than its format's.
func TestBeyond(t *testing.T) {
	t.Parallel()
	m := mask.New()
	sc := scoreBeyond(m, fakesecret.Beyond(1))
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "beyond corpus\tsecrets\tmasked whole\trecall\n")
	for _, f := range sc.families {
		fmt.Fprintf(w, "%s\t%d\t%d\t%.1f%%\n", f, sc.secrets[f], sc.masked[f], 100*ratio(sc.masked[f], sc.secrets[f]))
	}
	fmt.Fprintf(w, "all\t%d\t%d\t%.1f%%\n", sc.totalSec, sc.totalMasked, 100*ratio(sc.totalMasked, sc.totalSec))
	fmt.Fprintf(w, "partly masked\t%d\t\t\n", len(sc.partial))
	fmt.Fprintf(w, "look-alikes changed\t%d of %d\t\t%.1f%%\n", sc.changed, sc.harmless, 100*ratio(sc.changed, sc.harmless))
	w.Flush()
	for _, s := range sc.missed {
		t.Logf("missed %s", s)
	}
	for _, s := range sc.partial {
		t.Errorf("partly masked %s", s)
	}
	for _, s := range sc.wrongRule {
		t.Errorf("masked under another rule: %s", s)
	}
	for _, s := range sc.changedTexts {
		t.Logf("look-alike changed: %s", s)
	}
	if got := ratio(sc.totalMasked, sc.totalSec); got < beyondMinRecall {
		t.Errorf("recall %.3f, want at least %.2f", got, beyondMinRecall)
	}
	for _, f := range sc.families {
		if got := ratio(sc.masked[f], sc.secrets[f]); got < beyondMinFamily {
			t.Errorf("recall on %s %.3f, want at least %.2f", f, got, beyondMinFamily)
		}
	}
	if got := ratio(sc.changed, sc.harmless); got > beyondMaxHarmless {
		t.Errorf("%.3f of the look-alikes changed, want at most %.2f", got, beyondMaxHarmless)
	}
	if sc.totalSec < 500 || sc.harmless < 100 {
		t.Errorf("corpus too small: %d secrets, %d look-alikes", sc.totalSec, sc.harmless)
	}
}

// TestBeyondStream: Stream equals String on every record of the beyond
// corpus, in 16-byte deltas, split at every byte (a value written before
// its label, split right after its closing quote, was once released before
// its label arrived) and byte by byte.
func TestBeyondStream(t *testing.T) {
	t.Parallel()
	m := mask.New()
	for _, rec := range fakesecret.Beyond(1) {
		want := m.String(rec.Text)
		var pieces []string
		for i := 0; i < len(rec.Text); i += 16 {
			pieces = append(pieces, rec.Text[i:min(len(rec.Text), i+16)])
		}
		if got := streamPieces(m, pieces); got != want {
			t.Errorf("%s: 16-byte deltas of %q\n got  %q\n want %q", rec.Family, rec.Text, got, want)
		}
		for i := 0; i <= len(rec.Text); i++ {
			if got := streamPieces(m, splitAt(rec.Text, i)); got != want {
				t.Errorf("%s: split at %d of %q\n got  %q\n want %q", rec.Family, i, rec.Text, got, want)
				break
			}
		}
		if got := streamPieces(m, bytewise(rec.Text)); got != want {
			t.Errorf("%s: byte-wise %q\n got  %q\n want %q", rec.Family, rec.Text, got, want)
		}
	}
}
