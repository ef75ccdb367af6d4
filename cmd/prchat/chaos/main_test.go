//go:build chaos

package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// lab is what every trial shares: the prchat binary, the suite's Postgres
// and the fake model. TestMain sets it up and tears it down.
var lab struct {
	bin   string
	pg    *postgres
	model *model

	mu      sync.Mutex
	figures []string // what the suite measured, printed at the end
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	dir, err := os.MkdirTemp("", "prchat-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	lab.bin = filepath.Join(dir, "prchat")
	start := time.Now()
	build := exec.Command("go", "build", "-o", lab.bin, "github.com/prchat/prchat/cmd/prchat")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "chaos: build prchat: %v\n%s", err, out)
		return 1
	}
	fmt.Printf("chaos: built prchat in %s\n", time.Since(start).Round(time.Millisecond))
	if lab.pg, err = startPostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos: postgres:", err)
		return 1
	}
	defer lab.pg.close()
	fmt.Printf("chaos: postgres from %s on 127.0.0.1:%d\n", lab.pg.bin, lab.pg.port)
	lab.model = newModel(2 * time.Second)
	defer lab.model.Close()

	code := m.Run()

	fmt.Println("chaos: figures")
	for _, f := range lab.figures {
		fmt.Println("  " + f)
	}
	return code
}

// figure logs a measured figure and keeps it for the summary at the end.
func figure(t *testing.T, format string, args ...any) {
	t.Helper()
	s := fmt.Sprintf(format, args...)
	t.Log(s)
	lab.mu.Lock()
	defer lab.mu.Unlock()
	lab.figures = append(lab.figures, s)
}

// dist describes a distribution of durations: count, min, p50, p90, max.
func dist(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n=0"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	r := func(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }
	return fmt.Sprintf("n=%d min %s p50 %s p90 %s max %s", len(s), r(s[0]), r(q(0.5)), r(q(0.9)), r(s[len(s)-1]))
}

// counts renders a map of counts in key order.
func counts(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
