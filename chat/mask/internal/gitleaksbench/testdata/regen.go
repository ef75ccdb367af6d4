// This file replaces gitleaks' cmd/generate/secrets/regen.go when
// gitleaksbench builds gitleaks' config generator: the same NewSecret, but
// drawn from a seeded generator, so that every run compares prchat and
// gitleaks on the same sample secrets and the figures (and CI) do not move
// with the draw. GITLEAKSBENCH_SEED picks another seed; "random" draws
// afresh as gitleaks itself does. It is prchat's code, not gitleaks'.

package secrets

import (
	"hash/fnv"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/lucasjones/reggen"
)

var (
	mu    sync.Mutex
	calls = map[string]int64{}
)

// seedOf derives a seed from the regex and how often it was asked for, so
// that the draw does not depend on the order the rules are built in.
func seedOf(regex string) int64 {
	base := int64(20261201)
	switch v := os.Getenv("GITLEAKSBENCH_SEED"); v {
	case "":
	case "random":
		return time.Now().UnixNano()
	default:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			base = n
		}
	}
	mu.Lock()
	calls[regex]++
	n := calls[regex]
	mu.Unlock()
	h := fnv.New64a()
	h.Write([]byte(regex))
	return base ^ int64(h.Sum64()) ^ n*0x5DEECE66D
}

func NewSecret(regex string) string {
	g, err := reggen.NewGenerator(regex)
	if err != nil {
		panic(err)
	}
	g.SetSeed(seedOf(regex))
	return g.Generate(1)
}
