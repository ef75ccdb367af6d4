package mask_test

import (
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// denseText is the beyond corpus's secrets joined into one text, every
// line holding a secret, repeated to about 1 MB.
func denseText() string {
	var lines []string
	for _, rec := range fakesecret.Beyond(1) {
		if rec.Secret != "" {
			lines = append(lines, strings.ReplaceAll(rec.Text, "\n", " "))
		}
	}
	one := strings.Join(lines, "\n") + "\n"
	return strings.Repeat(one, max(1, (1<<20)/len(one)))
}

// sourceText is about 4 MB of ordinary source code: the Go standard
// library's own sources (net, crypto, encoding), which are full of the
// words key, token, secret and password.
func sourceText(tb testing.TB) string {
	root, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		tb.Skip("go env GOROOT:", err)
	}
	var b strings.Builder
	for _, dir := range []string{"net", "crypto", "encoding"} {
		_ = filepath.WalkDir(filepath.Join(strings.TrimSpace(string(root)), "src", dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || b.Len() >= 4<<20 || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(p)
			if err == nil {
				b.Write(src)
			}
			return nil
		})
	}
	if b.Len() < 1<<20 {
		tb.Skip("Go sources not found")
	}
	return b.String()
}

// reportCPU adds MB per CPU second of the process ("cpu-MB/s"), the
// figure that stays put when other work shares the machine.
func reportCPU(b *testing.B, size int, cpu time.Duration) {
	if cpu > 0 {
		b.ReportMetric(float64(size)*float64(b.N)/1e6/cpu.Seconds(), "cpu-MB/s")
	}
}

// streamDeltas streams text to m in n-byte deltas and returns how many
// bytes came out. It hands each Write's text on to nobody, as String's
// benchmark drops String's result: copying the pieces into one string
// would charge Stream alone with a collector's copy. What Stream returns
// is checked against String by TestStreamEqualsString and the corpus
// tests.
func streamDeltas(m *mask.Masker, text string, n int) int {
	st := m.Stream()
	out := 0
	for i := 0; i < len(text); i += n {
		out += len(st.Write(text[i:min(len(text), i+n)]))
	}
	return out + len(st.Flush())
}

// BenchmarkThroughput measures String and Stream (16- and 64-byte deltas)
// on dense secret text (goal: at least 50 MB/s) and on ordinary source
// code (goal: at least 200 MB/s). The comparison module prints the same
// beside gitleaks.
func BenchmarkThroughput(b *testing.B) {
	m := mask.New("daemon-own-secret-7Qx!")
	for _, c := range []struct {
		name string
		text string
	}{{"dense", denseText()}, {"source", sourceText(b)}} {
		b.Run(c.name+"/String", func(b *testing.B) {
			b.SetBytes(int64(len(c.text)))
			cpu := cpuTime()
			for b.Loop() {
				_ = m.String(c.text)
			}
			reportCPU(b, len(c.text), cpuTime()-cpu)
		})
		for _, n := range []int{16, 64} {
			b.Run(fmt.Sprintf("%s/Stream%d", c.name, n), func(b *testing.B) {
				b.SetBytes(int64(len(c.text)))
				cpu := cpuTime()
				for b.Loop() {
					_ = streamDeltas(m, c.text, n)
				}
				reportCPU(b, len(c.text), cpuTime()-cpu)
			})
		}
	}
}
