package mask_test

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/prchat/prchat/chat/mask"
	"github.com/prchat/prchat/chat/mask/internal/fakesecret"
)

// stressPieces are fragments that make rules interact: keywords, operators,
// quotes, brackets, mask tokens, partial tokens and whole secrets.
var stressPieces = []string{
	" ", "\n", "\t", "=", ":", ": ", " = ", "\"", "'", "`", "[", "]", "(", ")", "{", "}", ",", ";", "&", "?", "@", "/", "#", "!", ".", "-", "_", "\\n", "\\\"",
	"password", "token", "secret", "api_key", "KEY", "pass", "Authorization", "Bearer ", "Basic ", "://", "postgres", "https",
	"-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "-----BEGIN ", "PRIVATE KEY-----",
	"[masked:github-pat]", "[masked:", "masked", "ghp_", "sk-", "AKIA", "eyJ", "xoxb-", "Q~", ":AA", "sig=", "AccountKey=",
	"abc123XYZ", "Zq8xV2mN4pL7rT1w", "0123456789", "hunter2", "MIIEowIBAAKCAQEA", "dXNlcjpwYXNz", "daemon-own-secret-7Qx!",
	"ZGFlbW9uLW93bi1zZWNyZXQtN1F4IQ==", "${TOKEN}", "<your-token>", "xxxx", "getPassword()", "cfg.Secret",
}

func stressText(r *rand.Rand, samples []fakesecret.Sample) string {
	var b strings.Builder
	n := 1 + r.Intn(40)
	for range n {
		if r.Intn(6) == 0 {
			s := samples[r.Intn(len(samples))]
			if r.Intn(2) == 0 {
				b.WriteString(s.Secret)
			} else {
				b.WriteString(s.Text)
			}
			continue
		}
		b.WriteString(stressPieces[r.Intn(len(stressPieces))])
	}
	return b.String()
}

// TestStress builds texts from fragments chosen to make rules collide and
// checks that masking is idempotent and that streaming at every split
// equals String.
func TestStress(t *testing.T) {
	t.Parallel()
	m := mask.New(fuzzOwn)
	r := rand.New(rand.NewSource(12))
	ss := samples(13, 1, fakesecret.Formats())
	iters := 3000
	if testing.Short() {
		iters = 300
	}
	for range iters {
		text := stressText(r, ss)
		out := m.String(text)
		if again := m.String(out); again != out {
			t.Fatalf("not idempotent:\n in    %q\n once  %q\n twice %q", text, out, again)
		}
		if strings.Contains(out, fuzzOwn) {
			t.Fatalf("own secret left: %q -> %q", text, out)
		}
		if len(text) < 400 {
			for i := 0; i <= len(text); i++ {
				if got := streamPieces(m, splitAt(text, i)); got != out {
					t.Fatalf("split at %d:\n in   %q\n got  %q\n want %q", i, text, got, out)
				}
			}
		}
		if got := streamPieces(m, bytewise(text)); got != out {
			t.Fatalf("byte-wise:\n in   %q\n got  %q\n want %q", text, got, out)
		}
	}
}
