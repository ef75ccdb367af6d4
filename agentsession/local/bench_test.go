package local_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/local"
	"github.com/prchat/prchat/agentsession/local/index"
	"github.com/prchat/prchat/chat"
)

// genRepo makes a repository of n source files (about 60% Go in packages of
// 20 files that import each other, 20% Python, 15% TypeScript, 5% Lua) and
// a head commit that changes every 100th file.
func genRepo(tb testing.TB, n int) agentsessiontest.Repo {
	tb.Helper()
	base := map[string]string{"go.mod": "module example.com/big\n\ngo 1.22\n"}
	head := map[string]string{}
	for i := range n {
		p, content := genFile(i, false)
		base[p] = content
		if i%100 == 7 {
			_, head[p] = genFile(i, true)
		}
	}
	return agentsessiontest.NewRepo(tb, base, head)
}

// genFile returns the path and content of the i-th generated file, as the
// base or the head has it.
func genFile(i int, changed bool) (string, string) {
	var b strings.Builder
	guard := ""
	if changed {
		guard = "limit"
	}
	switch {
	case i%20 < 12:
		pkg := i / 20
		fmt.Fprintf(&b, "package p%d\n\nimport (\n\t\"errors\"\n", pkg)
		if pkg > 0 {
			fmt.Fprintf(&b, "\n\t\"example.com/big/p%d\"\n", pkg-1)
		}
		b.WriteString(")\n\n")
		fmt.Fprintf(&b, "// ErrNotFound%d says a key is missing.\nvar ErrNotFound%d = errors.New(\"not found\")\n\n", i, i)
		fmt.Fprintf(&b, "// Store%d keeps values.\ntype Store%d interface {\n\tGet(key string) (string, error)\n\tPut(key, value string) error\n}\n\n", i, i)
		fmt.Fprintf(&b, "type mem%d struct{ data map[string]string }\n\n", i)
		fmt.Fprintf(&b, "func (m *mem%d) Get(key string) (string, error) {\n\tv, ok := m.data[key]\n\tif !ok {\n\t\treturn \"\", ErrNotFound%d\n\t}\n\treturn v, nil\n}\n\n", i, i)
		fmt.Fprintf(&b, "func (m *mem%d) Put(key, value string) error {\n\tm.data[key] = value\n\treturn nil\n}\n\n", i)
		for f := range 8 {
			fmt.Fprintf(&b, "// work%d_%d does some work.\nfunc work%d_%d(path string, n int) (int, error) {\n", i, f, i, f)
			fmt.Fprintf(&b, "\tif path == \"\" {\n\t\treturn 0, ErrNotFound%d\n\t}\n", i)
			if guard != "" {
				fmt.Fprintf(&b, "\tif n > 100 {\n\t\treturn 0, errors.New(\"%s\")\n\t}\n", guard)
			}
			fmt.Fprintf(&b, "\ttotal := 0\n\tfor k := 0; k < n; k++ {\n\t\ttotal += k * %d\n\t}\n", f+1)
			if f > 0 {
				fmt.Fprintf(&b, "\tif v, err := work%d_%d(path, n-1); err == nil {\n\t\ttotal += v\n\t}\n", i, f-1)
			}
			if pkg > 0 && f == 0 {
				fmt.Fprintf(&b, "\t_ = p%d.ErrNotFound%d\n", pkg-1, (pkg-1)*20)
			}
			b.WriteString("\treturn total, nil\n}\n\n")
		}
		return fmt.Sprintf("p%d/file%d.go", pkg, i), b.String()
	case i%20 < 16:
		fmt.Fprintf(&b, "\"\"\"Module %d.\"\"\"\nimport functools\n\n\ndef retry%d(fn):\n    @functools.wraps(fn)\n    def wrapper(*args):\n        return fn(*args)\n    return wrapper\n\n\n", i, i)
		fmt.Fprintf(&b, "class Client%d:\n    def __init__(self, url):\n        self.url = url\n\n    def get(self, path):\n        if not path:\n            raise ValueError(\"empty path\")\n        return {\"url\": f\"{self.url}/{path}\"}\n\n\n", i)
		for f := range 8 {
			fmt.Fprintf(&b, "@retry%d\ndef fetch%d_%d(client, key):\n", i, i, f)
			if changed {
				b.WriteString("    if key is None:\n        raise KeyError(key)\n")
			}
			fmt.Fprintf(&b, "    data = client.get(\"/items/\" + str(key))\n    return data[\"url\"] * %d\n\n\n", f+1)
		}
		return fmt.Sprintf("py/mod%d/file%d.py", i/20, i), b.String()
	case i%20 < 19:
		fmt.Fprintf(&b, "export interface Repo%d {\n  load(id: string): Promise<string>;\n  save(id: string, v: string): Promise<void>;\n}\n\n", i)
		fmt.Fprintf(&b, "export class MemRepo%d implements Repo%d {\n  private items = new Map<string, string>();\n\n  async load(id: string): Promise<string> {\n    if (id === \"\") {\n      throw new Error(\"empty id\");\n    }\n    return this.items.get(id) ?? \"\";\n  }\n\n  async save(id: string, v: string): Promise<void> {\n    this.items.set(id, v);\n  }\n}\n\n", i, i)
		for f := range 8 {
			fmt.Fprintf(&b, "export async function fetch%d_%d(repo: Repo%d, id: string): Promise<number> {\n", i, f, i)
			if changed {
				b.WriteString("  if (id.length > 64) {\n    throw new Error(\"long id\");\n  }\n")
			}
			fmt.Fprintf(&b, "  const v = await repo.load(`${id}-%d`);\n  return v.length * %d;\n}\n\n", f, f+1)
		}
		return fmt.Sprintf("web/m%d/file%d.ts", i/20, i), b.String()
	default:
		fmt.Fprintf(&b, "local M = {}\n\nlocal function key%d(k)\n  return \"k:\" .. k\nend\n\n", i)
		for f := range 6 {
			fmt.Fprintf(&b, "function M.allow%d(k, limit)\n  if limit <= 0 then\n    return false\n  end\n  return #key%d(k) < limit + %d\nend\n\n", f, i, f)
		}
		b.WriteString("return M\n")
		return fmt.Sprintf("lua/file%d.lua", i), b.String()
	}
}

// benchQuestions are questions of every kind about the generated code.
var benchQuestions = []string{
	"Where is ErrNotFound4027 declared?",
	"Who calls work5001_3?",
	"Which types implement Store2040?",
	"What changed in work1007_2?",
	"What does this PR change?",
	"Why does work3002_4 return ErrNotFound3002?",
	"When does MemRepo4016.load throw?",
	"What happens when path is empty?",
	"Is fetch4012_3 tested?",
	"What does work8004_5 call?",
	"Is retry2013 exported?",
	"Who uses the retry6012 decorator?",
	"Where is M.allow3 defined?",
	"What interfaces does mem9001 implement?",
	"How do the frobnicators spin?",
}

// BenchmarkIndex10000Files times building the structural index of a
// generated 10,000-file repository, with the PR's diff (MB/s: source
// parsed and type-checked a second of wall time; MB/cpu-s: per second of
// the process's CPU time).
func BenchmarkIndex10000Files(b *testing.B) {
	repo := genRepo(b, 10_000)
	opt := index.Options{Head: repo.Head(), Base: repo.Commits[0]}
	var bytes int64
	var cpu time.Duration
	for b.Loop() {
		before := cpuTime()
		ix, err := index.Build(context.Background(), repo.Dir, opt)
		if err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - before
		bytes = ix.Bytes
	}
	b.SetBytes(bytes)
	// On a shared machine the wall time says more about the neighbours;
	// the CPU time the build spent (both cores; git diff runs in a child
	// process, not counted) does not.
	if cpu > 0 {
		b.ReportMetric(float64(bytes)*float64(b.N)/1e6/cpu.Seconds(), "MB/cpu-s")
	}
	b.ReportMetric(float64(bytes)/1e6, "source-MB")
}

// BenchmarkAnswer10000Files times the questions of benchQuestions on a
// generated 10,000-file repository once its index is built, and reports
// the answers' p50 and p99.
func BenchmarkAnswer10000Files(b *testing.B) {
	repo := genRepo(b, 10_000)
	be := local.New(local.Config{})
	req := chat.RunRequest{Mode: chat.SessionNone, Dir: repo.Dir, Review: chat.Review{HeadSHA: repo.Head(), BaseSHA: repo.Commits[0]}}
	start := time.Now()
	req.Question = benchQuestions[0]
	if _, err := be.Run(context.Background(), req, func(chat.Event) {}); err != nil {
		b.Fatal(err)
	}
	first := time.Since(start)
	var took []time.Duration
	slowest := map[string]time.Duration{}
	b.ResetTimer()
	for b.Loop() {
		for _, q := range benchQuestions {
			req.Question = q
			t0 := time.Now()
			if _, err := be.Run(context.Background(), req, func(chat.Event) {}); err != nil {
				b.Fatal(err)
			}
			d := time.Since(t0)
			took = append(took, d)
			slowest[q] = max(slowest[q], d)
		}
	}
	for _, q := range benchQuestions {
		b.Logf("%8.1f ms  %s", float64(slowest[q].Microseconds())/1000, q)
	}
	b.ReportMetric(first.Seconds(), "first-answer-s")
	slices.Sort(took)
	pct := func(p float64) float64 { return float64(took[int(p*float64(len(took)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}
