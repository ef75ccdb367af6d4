package mask_test

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/prchat/prchat/chat/mask"
	"github.com/prchat/prchat/chat/mask/internal/fakesecret"
)

// streamPieces feeds pieces to a fresh Stream and returns everything it
// released, Flush included.
func streamPieces(m *mask.Masker, pieces []string) string {
	st := m.Stream()
	var b strings.Builder
	for _, p := range pieces {
		b.WriteString(st.Write(p))
	}
	b.WriteString(st.Flush())
	return b.String()
}

// splitAt cuts s at the given increasing positions.
func splitAt(s string, cuts ...int) []string {
	var out []string
	prev := 0
	for _, c := range cuts {
		out = append(out, s[prev:c])
		prev = c
	}
	return append(out, s[prev:])
}

func bytewise(s string) []string {
	out := make([]string, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = s[i : i+1]
	}
	return out
}

func randomPieces(r *rand.Rand, s string) []string {
	var out []string
	for len(s) > 0 {
		n := 1 + r.Intn(min(len(s), 1+r.Intn(40)))
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// checkStream asserts the stream property: for a split of text at every
// byte, for byte-by-byte deltas and for random deltas, the concatenation of
// all Write outputs and Flush equals String(text).
func checkStream(t *testing.T, m *mask.Masker, text string, r *rand.Rand) {
	t.Helper()
	want := m.String(text)
	for i := 0; i <= len(text); i++ {
		if got := streamPieces(m, splitAt(text, i)); got != want {
			t.Fatalf("split at %d:\n text %q\n got  %q\n want %q", i, text, got, want)
		}
	}
	if got := streamPieces(m, bytewise(text)); got != want {
		t.Fatalf("byte-wise:\n text %q\n got  %q\n want %q", text, got, want)
	}
	for range 3 {
		if got := streamPieces(m, randomPieces(r, text)); got != want {
			t.Fatalf("random pieces:\n text %q\n got  %q\n want %q", text, got, want)
		}
	}
}

// TestStreamEqualsString is the stream property over the corpus and
// generated samples of every format and look-alike.
func TestStreamEqualsString(t *testing.T) {
	t.Parallel()
	m := mask.New("own-secret-value-1")
	r := rand.New(rand.NewSource(7))
	texts := corpusTexts(t)
	for _, s := range samples(8, 2, append(fakesecret.Formats(), fakesecret.LookAlikes()...)) {
		texts = append(texts, s.Text, "before "+s.Text+" after")
	}
	for _, text := range texts {
		checkStream(t, m, text, r)
	}
}

// TestStreamDocument streams a larger mixed document in random deltas.
func TestStreamDocument(t *testing.T) {
	t.Parallel()
	m := mask.New()
	r := rand.New(rand.NewSource(9))
	doc, secrets, _ := fakesecret.Document(r, 300_000, 2)
	want := m.String(doc)
	got := streamPieces(m, randomPieces(r, doc))
	if got != want {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("stream differs from String at byte %d:\n got  %q\n want %q", i, got[i:min(len(got), i+200)], want[i:min(len(want), i+200)])
	}
	for _, s := range secrets {
		if strings.Contains(got, s.Secret) {
			t.Errorf("%s leaked: %q", s.Rule, s.Secret)
		}
	}
}

// TestStreamHoldsBackLittle: plain text is released as it arrives, except a
// short tail; an open PEM block is held until its END line.
func TestStreamHoldsBackLittle(t *testing.T) {
	t.Parallel()
	m := mask.New()
	st := m.Stream()
	text := "The deploy finished without errors and the dashboard shows green checks everywhere. "
	released := 0
	for i := range len(text) {
		released += len(st.Write(text[i : i+1]))
		if held := i + 1 - released; held > 12 {
			t.Fatalf("after %q %d bytes are held back", text[:i+1], held)
		}
	}
	if rest := st.Flush(); released+len(rest) != len(text) {
		t.Fatalf("lost text")
	}

	st = m.Stream()
	out := st.Write("Key:\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n")
	if strings.Contains(out, "MIIE") || out != "Key:\n" {
		t.Fatalf("open PEM block released: %q", out)
	}
	out += st.Write("BKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\nok")
	if out != "Key:\n[masked:private-key]\n" {
		t.Fatalf("after END: %q", out)
	}
	if out += st.Flush(); out != "Key:\n[masked:private-key]\nok" {
		t.Fatalf("flush: %q", out)
	}

	// A token split in the middle is never released before it is complete.
	st = m.Stream()
	tok := "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z0"
	got := st.Write("token " + tok[:10])
	got += st.Write(tok[10:])
	if strings.Contains(got, "ghp_") {
		t.Fatalf("partial token released: %q", got)
	}
	if got += st.Write(" done") + st.Flush(); got != "token [masked:github-pat] done" {
		t.Fatalf("got %q", got)
	}
}

// TestStreamReuse: Flush resets the Stream.
func TestStreamReuse(t *testing.T) {
	t.Parallel()
	st := mask.New().Stream()
	a := st.Write("password = \"hunter2abc\"") + st.Flush()
	b := st.Write("second ") + st.Write("text") + st.Flush()
	if a != `password = "[masked:generic-assignment]"` || b != "second text" {
		t.Fatalf("got %q, %q", a, b)
	}
}

// TestStreamLongRun: a long run without whitespace (a base64 image) streamed
// in small deltas is released as it comes and does not make Write slow.
func TestStreamLongRun(t *testing.T) {
	t.Parallel()
	m := mask.New()
	r := rand.New(rand.NewSource(11))
	blob := "![img](data:image/png;base64," + randString(r, 1<<20) + ")"
	st := m.Stream()
	var b strings.Builder
	for i := 0; i < len(blob); i += 7 {
		b.WriteString(st.Write(blob[i:min(len(blob), i+7)]))
		if held := i + 7 - b.Len(); held > 200 && i+7 < len(blob) {
			t.Fatalf("%d bytes held back inside a base64 run", held)
		}
	}
	b.WriteString(st.Flush())
	if b.String() != m.String(blob) {
		t.Fatal("stream differs from String")
	}
}
