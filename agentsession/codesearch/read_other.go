//go:build !unix

package codesearch

import (
	"errors"
	"io"
	"os"
	"slices"
)

// readFile reads the file at p into buf, unless it is larger than maxSize
// bytes or cannot be read.
func readFile(p string, maxSize int64, buf []byte) ([]byte, bool) {
	f, err := os.Open(p)
	if err != nil {
		return buf[:0], false
	}
	defer f.Close()
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(len(buf), 16<<10))
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > maxSize {
			return buf[:0], false
		}
		if errors.Is(err, io.EOF) {
			return buf, true
		}
		if err != nil {
			return buf[:0], false
		}
	}
}
