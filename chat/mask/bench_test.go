package mask_test

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/prchat/prchat/chat/mask"
	"github.com/prchat/prchat/chat/mask/internal/fakesecret"
)

// answer200 is a typical short answer with one secret in it.
func answer200() string {
	s := "To fix the CI job, set the token in the workflow env: `GITHUB_TOKEN=ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z0` and rerun. The password check in `auth.go` reads cfg.Password, so nothing else changes at all in this PR."
	return s[:200]
}

func clean200() string {
	s := "To fix the CI job, set the token in the workflow env (see the secrets page) and rerun. The password check in `auth.go` reads cfg.Password, so nothing else changes; the API key stays in the vault for now, as before."
	return s[:200]
}

// BenchmarkString200B masks a 200-byte answer (goal: well under 10 µs).
func BenchmarkString200B(b *testing.B) {
	m := mask.New("daemon-own-secret-7Qx!")
	for _, c := range []struct{ name, text string }{{"secret", answer200()}, {"clean", clean200()}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.text)))
			b.ReportAllocs()
			for b.Loop() {
				_ = m.String(c.text)
			}
		})
	}
}

// mixedDoc is about 4 MB of markdown and code with planted secrets and
// look-alikes.
func mixedDoc(every int) string {
	doc, _, _ := fakesecret.Document(rand.New(rand.NewSource(42)), 4<<20, every)
	return doc
}

// BenchmarkMixed measures throughput on mixed code/markdown (goal: at least
// 50 MB/s on one core).
func BenchmarkMixed(b *testing.B) {
	for _, c := range []struct {
		name  string
		every int
	}{{"secrets", 4}, {"clean", 0}} {
		doc := mixedDoc(c.every)
		m := mask.New("daemon-own-secret-7Qx!")
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				_ = m.String(doc)
			}
		})
	}
}

// BenchmarkStream streams the mixed document in 24-byte deltas.
func BenchmarkStream(b *testing.B) {
	doc := mixedDoc(4)[:1<<20]
	m := mask.New()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		st := m.Stream()
		var out strings.Builder
		for i := 0; i < len(doc); i += 24 {
			out.WriteString(st.Write(doc[i:min(len(doc), i+24)]))
		}
		out.WriteString(st.Flush())
	}
}

// BenchmarkNew builds a masker with own secrets (compiles an automaton).
func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = mask.New("daemon-own-secret-7Qx!", "another-secret-value")
	}
}
