package gitleaksbench

import (
	"bufio"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	// The rules package is what the config generator is built from; importing
	// it keeps its dependencies in this module's go.sum.
	_ "github.com/zricethezav/gitleaks/v8/cmd/generate/config/rules"
)

// ruleExamples are the examples one rule of gitleaks' default configuration
// is validated against upstream: strings it must find (TPs) and strings it
// must not find (FPs).
type ruleExamples struct {
	Rule  string   `json:"rule"`
	TPs   []string `json:"tps"`
	FPs   []string `json:"fps"`
	Paths bool     `json:"paths,omitempty"` // examples that need a file path
}

// loadExamples builds gitleaks' own config generator (cmd/generate/config)
// from a copy of the gitleaks module in which utils/validate.go is replaced
// by testdata/validate.go, runs it, and returns the examples it recorded.
// The generator writes the default configuration as a side effect; it must
// equal the one gitleaks ships, which shows the examples belong to exactly
// the rules the detector runs. Sample secrets made with gitleaks'
// secrets.NewSecret come from a seeded generator (testdata/regen.go), so
// every run compares on the same draw; GITLEAKSBENCH_SEED=random draws
// afresh.
func loadExamples(tb testing.TB) []ruleExamples {
	tb.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/zricethezav/gitleaks/v8").Output()
	if err != nil {
		tb.Fatalf("locate gitleaks module: %v", err)
	}
	modDir := strings.TrimSpace(string(out))
	tmp := tb.TempDir()
	src := filepath.Join(tmp, "gitleaks")
	err = filepath.WalkDir(modDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(modDir, p)
		if d.IsDir() {
			if rel == "testdata" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(src, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(src, rel), b, 0o644)
	})
	if err != nil {
		tb.Fatalf("copy gitleaks module: %v", err)
	}
	overlay, err := os.ReadFile("testdata/validate.go")
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "cmd/generate/config/utils/validate.go"), overlay, 0o644); err != nil {
		tb.Fatal(err)
	}
	seeded, err := os.ReadFile("testdata/regen.go")
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "cmd/generate/secrets/regen.go"), seeded, 0o644); err != nil {
		tb.Fatal(err)
	}
	gen := filepath.Join(tmp, "generate")
	build := exec.Command("go", "build", "-o", gen, "./cmd/generate/config")
	build.Dir = src
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("build gitleaks' config generator: %v\n%s", err, out)
	}
	exFile, tomlFile := filepath.Join(tmp, "examples.jsonl"), filepath.Join(tmp, "gitleaks.toml")
	run := exec.Command(gen, tomlFile)
	run.Dir = filepath.Join(src, "cmd/generate/config")
	run.Env = append(os.Environ(), "GITLEAKSBENCH_EXAMPLES="+exFile)
	if out, err := run.CombinedOutput(); err != nil {
		tb.Fatalf("run gitleaks' config generator: %v\n%s", err, out)
	}
	got, err := os.ReadFile(tomlFile)
	if err != nil {
		tb.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(modDir, "config/gitleaks.toml"))
	if err != nil {
		tb.Fatal(err)
	}
	if string(got) != string(want) {
		tb.Fatalf("the generator's config differs from gitleaks' shipped config/gitleaks.toml")
	}
	f, err := os.Open(exFile)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var exs []ruleExamples
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var e ruleExamples
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			tb.Fatal(err)
		}
		// GenerateSampleSecrets builds its cases from a map: sort them so
		// that reports list them in a stable order.
		slices.Sort(e.TPs)
		slices.Sort(e.FPs)
		exs = append(exs, e)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	slices.SortFunc(exs, func(a, b ruleExamples) int { return strings.Compare(a.Rule, b.Rule) })
	return exs
}
