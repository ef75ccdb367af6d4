package mask_test

import (
	"encoding/base64"
	"math/rand"
	"net/url"
	"strings"
	"testing"

	"github.com/prchat/prchat/chat/mask"
	"github.com/prchat/prchat/chat/mask/internal/fakesecret"
)

const fuzzOwn = "daemon-own-secret-7Qx!"

// FuzzMask checks, for arbitrary text with a fake secret planted in it (on
// its own line, at a fuzzed position), that masking never panics, is
// idempotent, removes the planted secret, and that streaming the text split
// at any byte (and byte by byte, and in random pieces) gives exactly
// String of the whole text, so a split secret never leaks.
func FuzzMask(f *testing.F) {
	for i, text := range corpusTexts(f) {
		f.Add(text, uint64(i), uint16(i*37))
	}
	for i, s := range samples(10, 1, append(fakesecret.Formats(), fakesecret.LookAlikes()...)) {
		f.Add(s.Text, uint64(i*13+1), uint16(i))
	}
	f.Add("", uint64(0), uint16(0))
	f.Add("password = \"[masked:x] -----BEGIN PRIVATE KEY-----", uint64(3), uint16(9))
	m := mask.New(fuzzOwn)
	formats := fakesecret.Formats()
	f.Fuzz(func(t *testing.T, text string, seed uint64, at uint16) {
		out := m.String(text)
		if again := m.String(out); again != out {
			t.Fatalf("not idempotent:\n in    %q\n once  %q\n twice %q", text, out, again)
		}

		r := rand.New(rand.NewSource(int64(seed)))
		var secret, snippet string
		if seed%10 == 9 {
			secret = []string{
				fuzzOwn,
				url.QueryEscape(fuzzOwn),
				url.PathEscape(fuzzOwn),
				base64.StdEncoding.EncodeToString([]byte(fuzzOwn)),
				base64.RawURLEncoding.EncodeToString([]byte(fuzzOwn)),
			}[r.Intn(5)]
			snippet = "value: " + secret
		} else {
			s := formats[int(seed%uint64(len(formats)))].Sample(r)
			secret, snippet = s.Secret, s.Text
		}
		pos := int(at) % (len(text) + 1)
		planted := text[:pos] + "\n" + snippet + "\n" + text[pos:]
		want := m.String(planted)
		if strings.Contains(want, secret) {
			t.Fatalf("planted secret left:\n in  %q\n out %q", planted, want)
		}
		if again := m.String(want); again != want {
			t.Fatalf("not idempotent:\n in    %q\n once  %q\n twice %q", planted, want, again)
		}
		check := func(how string, pieces []string) {
			if got := streamPieces(m, pieces); got != want {
				t.Fatalf("stream (%s) differs:\n in   %q\n got  %q\n want %q", how, planted, got, want)
			}
		}
		if len(planted) <= 1024 {
			for i := 0; i <= len(planted); i++ {
				check("split", splitAt(planted, i))
			}
			check("bytes", bytewise(planted))
		} else {
			for range 32 {
				check("split", splitAt(planted, r.Intn(len(planted)+1)))
			}
		}
		check("random", randomPieces(r, planted))
	})
}
