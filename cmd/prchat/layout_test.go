package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// module is prchat's module path.
const module = "github.com/prchat/prchat"

// adapterLibraries are the import path prefixes of the libraries only an
// adapter may use (DESIGN.md §1: no echo, asynq, gorm, go-openai in chat).
var adapterLibraries = []string{
	"github.com/labstack/echo", "github.com/hibiken/asynq", "gorm.io/", "github.com/sashabaranov/go-openai",
	"github.com/redis/go-redis", "github.com/alicebob/miniredis", "github.com/jackc/pgx", "modernc.org/sqlite",
	"github.com/pressly/goose", "github.com/google/go-github", "gitlab.com/gitlab-org/api", "github.com/prometheus/",
}

// adapters are the top-level packages that implement or call chat's
// interfaces and do not import each other (forge: the code hosts, read by
// the API and posted to by the worker's outbox, so under neither).
var adapters = []string{"store", "worker", "agentsession", "api", "forge"}

// listedPackage is what `go list -json` says of a package.
type listedPackage struct {
	ImportPath string
	Deps       []string
}

// top is the top-level directory of a prchat package ("chat" for
// github.com/prchat/prchat/chat/mask), or "" for another module's.
func top(path string) string {
	rest, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		return ""
	}
	first, _, _ := strings.Cut(rest, "/")
	return first
}

// isFake reports whether a package is a bench, a fake or a test helper,
// none of which the production binary may link.
func isFake(path string) bool {
	if top(path) == "" {
		return false
	}
	last := path[strings.LastIndex(path, "/")+1:]
	return strings.HasPrefix(path, module+"/cmd/prchat-bench") || strings.HasSuffix(last, "test") ||
		last == "scripted" || strings.Contains(path, "/fakeapi") || strings.HasPrefix(last, "fake")
}

// layoutViolations returns what breaks the dependency rule of DESIGN.md
// §1 in pkgs (prchat's packages, each with its dependencies): chat imports
// no other prchat package and no adapter library; store, worker,
// agentsession, api and forge do not import each other; only cmd wires,
// and the prchat binary links no bench and no fake.
func layoutViolations(pkgs []listedPackage) []string {
	var bad []string
	for _, p := range pkgs {
		from := top(p.ImportPath)
		for _, dep := range p.Deps {
			to := top(dep)
			switch {
			case from == "chat" && to != "" && to != "chat":
				bad = append(bad, p.ImportPath+" imports "+dep+": chat imports no other prchat package")
			case from == "chat" && slices.ContainsFunc(adapterLibraries, func(lib string) bool { return strings.HasPrefix(dep, lib) }):
				bad = append(bad, p.ImportPath+" imports "+dep+": chat imports no adapter library")
			case slices.Contains(adapters, from) && slices.Contains(adapters, to) && from != to:
				bad = append(bad, p.ImportPath+" imports "+dep+": "+from+" and "+to+" do not import each other")
			case from != "cmd" && to == "cmd":
				bad = append(bad, p.ImportPath+" imports "+dep+": only cmd wires, nothing imports it")
			case p.ImportPath == module+"/cmd/prchat" && isFake(dep):
				bad = append(bad, "the prchat binary links "+dep+": no bench and no fake in production")
			}
		}
	}
	return bad
}

// TestDependencyRule checks the dependency rule of DESIGN.md §1 on the
// packages as `go list` finds them, so that a wrong import fails the tests.
func TestDependencyRule(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-json=ImportPath,Deps", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, &stderr)
	}
	var pkgs []listedPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	var seen []string
	for _, p := range pkgs {
		seen = append(seen, top(p.ImportPath))
	}
	for _, want := range append([]string{"chat", "cmd"}, adapters...) {
		if !slices.Contains(seen, want) {
			t.Fatalf("go list found no package under %s/: %v", want, seen)
		}
	}
	if bad := layoutViolations(pkgs); len(bad) > 0 {
		t.Errorf("the dependency rule is broken:\n%s", strings.Join(bad, "\n"))
	}
}

// TestLayoutViolations: each kind of wrong import is reported, and the
// right ones are not.
func TestLayoutViolations(t *testing.T) {
	t.Parallel()
	pkg := func(path string, deps ...string) listedPackage {
		for i, d := range deps {
			if !strings.Contains(d, ".") {
				deps[i] = module + "/" + d
			}
		}
		return listedPackage{ImportPath: module + "/" + path, Deps: deps}
	}
	got := layoutViolations([]listedPackage{
		pkg("chat", "chat/mask", "golang.org/x/text/language"),
		pkg("chat/mask", "store"),
		pkg("chat/x", "github.com/hibiken/asynq"),
		pkg("api", "chat", "worker"),
		pkg("worker", "chat", "github.com/hibiken/asynq"),
		pkg("forge/github", "chat", "forge", "api"),
		pkg("agentsession/claude", "cmd/prchat/client"),
		pkg("cmd/prchat", "chat", "store", "worker", "api", "agentsession", "cmd/prchat-bench/benchagent", "api/github/githubtest", "agentsession/scripted"),
		pkg("cmd/prchat-bench", "store", "worker", "chat"),
	})
	want := []string{
		module + "/chat/mask imports " + module + "/store: chat imports no other prchat package",
		module + "/chat/x imports github.com/hibiken/asynq: chat imports no adapter library",
		module + "/api imports " + module + "/worker: api and worker do not import each other",
		module + "/forge/github imports " + module + "/api: forge and api do not import each other",
		module + "/agentsession/claude imports " + module + "/cmd/prchat/client: only cmd wires, nothing imports it",
		"the prchat binary links " + module + "/cmd/prchat-bench/benchagent: no bench and no fake in production",
		"the prchat binary links " + module + "/api/github/githubtest: no bench and no fake in production",
		"the prchat binary links " + module + "/agentsession/scripted: no bench and no fake in production",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
}

// TestMainStaysSmall: package main wires the other packages and no more
// (DESIGN §1): at most 1,500 lines outside its tests, and main.go, the
// dispatcher of the commands, at most 160. What grows past them belongs
// in a package of its own (cmd/internal, or the adapter it is about).
func TestMainStaysSmall(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n := bytes.Count(b, []byte("\n"))
		total += n
		if f == "main.go" && n > 160 {
			t.Errorf("main.go has %d lines, want at most 160: it dispatches, the commands live beside it", n)
		}
	}
	t.Logf("package main: %d lines outside its tests", total)
	if total > 1500 {
		t.Errorf("package main has %d lines outside its tests, want at most 1,500", total)
	}
}
