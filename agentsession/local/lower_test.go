package local

import (
	"bytes"
	"testing"
)

func TestASCIILower(t *testing.T) {
	t.Parallel()
	var all []byte
	for c := range 256 {
		all = append(all, byte(c))
	}
	for _, in := range [][]byte{nil, []byte("A"), []byte("Hello, WORLD @[`{ ÄÖ parseConfig MAX_RETRIES"), all, bytes.Repeat(all, 3)[5:]} {
		want := make([]byte, len(in))
		for i, c := range in {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			want[i] = c
		}
		if got := asciiLower(nil, in); !bytes.Equal(got, want) {
			t.Errorf("asciiLower(%q) = %q, want %q", in, got, want)
		}
	}
}
