package mask_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/prchat/prchat/chat/mask"
)

func goSrc(n int) string {
	var b strings.Builder
	filepath.Walk(filepath.Join(runtime.GOROOT(), "src", "net"), func(p string, info os.FileInfo, err error) error {
		if b.Len() > n || err != nil || info.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		x, _ := os.ReadFile(p)
		b.Write(x)
		return nil
	})
	return b.String()
}

func BenchmarkGoSrc(b *testing.B) {
	doc := goSrc(4 << 20)
	m := mask.New()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		_ = m.String(doc)
	}
}
