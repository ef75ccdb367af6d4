package local_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/local"
	"github.com/prchat/prchat/chat"
)

// What the evaluation set scores at least (the last measured figures):
// the test fails when a change makes the backend answer worse than this.
const (
	claimedAnswered  = 1.00
	claimedPrecision = 0.95
	claimedRecall    = 0.95
)

// shop is the evaluation fixture: a pull request over a Go module with an
// interface and implementations, a Python package with a decorator, a
// TypeScript module and a Lua script (testdata/shop/base and head).
type shop struct {
	repo agentsessiontest.Repo
	head map[string]string
}

// readTree reads the files under dir into a map of slash paths.
func readTree(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	return out, err
}

// shopFixture makes the fixture's repository: the base commit, then the
// head commit (files of the base that the head lacks are deleted).
func shopFixture(t *testing.T) shop {
	t.Helper()
	base, err := readTree(filepath.Join("testdata", "shop", "base"))
	if err != nil {
		t.Fatal(err)
	}
	head, err := readTree(filepath.Join("testdata", "shop", "head"))
	if err != nil {
		t.Fatal(err)
	}
	second := map[string]string{}
	for p, c := range head {
		second[p] = c
	}
	for p := range base {
		if _, ok := head[p]; !ok {
			second[p] = agentsessiontest.Delete
		}
	}
	return shop{repo: agentsessiontest.NewRepo(t, base, second), head: head}
}

// lineCount counts the lines of a file at the head as citation checks do.
func (s shop) lineCount(_ context.Context, p string) (int, error) {
	content, ok := s.head[p]
	if !ok {
		return 0, fmt.Errorf("%s: no such file", p)
	}
	n := strings.Count(content, "\n")
	if content != "" && !strings.HasSuffix(content, "\n") {
		n++
	}
	return n, nil
}

// loc is where an answer must cite: "path:text" is the first line of path
// at the head that holds text, "path:text#2" the second.
type loc string

func (s shop) line(t *testing.T, l loc) (string, int) {
	t.Helper()
	p, marker, ok := strings.Cut(string(l), ":")
	if !ok {
		t.Fatalf("bad location %q", l)
	}
	nth := 1
	if i := strings.LastIndex(marker, "#"); i >= 0 {
		if _, err := fmt.Sscan(marker[i+1:], &nth); err == nil {
			marker = marker[:i]
		}
	}
	content, ok := s.head[p]
	if !ok {
		t.Fatalf("location %q: no such file at the head", l)
	}
	for i, text := range strings.Split(content, "\n") {
		if strings.Contains(text, marker) {
			if nth--; nth == 0 {
				return p, i + 1
			}
		}
	}
	t.Fatalf("location %q: no such line", l)
	return "", 0
}

// evalCase is a question with the facts its answer must state and the
// lines it must cite (cite, counted in recall) or may cite (also).
type evalCase struct {
	q     string
	focus *chat.Focus
	facts []string
	cite  []loc
	also  []loc
}

func section(path string, start, end int) *chat.Focus {
	return &chat.Focus{Kind: chat.FocusSection, ID: "s1", Anchors: []chat.Anchor{{Path: path, StartLine: start, EndLine: end}}}
}

var evalCases = []evalCase{
	// Definitions, and names declared nowhere.
	{q: "Where is ErrNotFound declared?", facts: []string{"store/errors.go", "line 6"}, cite: []loc{"store/errors.go:var ErrNotFound"}},
	{q: "Where is errEmpty declared?", facts: []string{"declared nowhere in the head commit", "config/config.go", "does not compile"},
		cite: []loc{"config/config.go:return nil, errEmpty"}},
	{q: "Where is parseConfig defined?", facts: []string{"config/config.go", "line 11"}, cite: []loc{"config/config.go:func parseConfig"}},
	{q: "Where is the Store interface declared?", facts: []string{"store/store.go", "interface"}, cite: []loc{"store/store.go:type Store interface"}},
	{q: "Where is the retry decorator defined?", facts: []string{"app/retry.py", "line 8"}, cite: []loc{"app/retry.py:def retry"}},
	{q: "Where is fetchCart defined?", facts: []string{"web/src/api.ts", "line 11"}, cite: []loc{"web/src/api.ts:export async function fetchCart"}},
	{q: "Where is M.allow defined?", facts: []string{"scripts/rate.lua", "line 8"}, cite: []loc{"scripts/rate.lua:function M.allow"}},
	{q: "Is parseConfig exported?", facts: []string{"`parseConfig` is not exported", "lower-case"}, cite: []loc{"config/config.go:func parseConfig"}},
	{q: "Is emptyCart exported?", facts: []string{"not exported"}, cite: []loc{"web/src/api.ts:function emptyCart"}},
	{q: "Is Load exported?", facts: []string{"is exported"}, cite: []loc{"config/load.go:func Load"}},

	// Uses and callers, by file.
	{q: "Who calls parseConfig?", facts: []string{"config/load.go", "`Load`", "`MustLoad`"},
		cite: []loc{"config/load.go:return parseConfig(path)", "config/load.go:c, err := parseConfig(path)"}},
	{q: "Where is fetch_user called?", facts: []string{"app/report.py", "tests/test_client.py", "user_report"},
		cite: []loc{"app/report.py:user = fetch_user", "tests/test_client.py:assert fetch_user"}},
	{q: "Who uses the retry decorator?", facts: []string{"decorates `fetch_user`", "decorates `fetch_order`"},
		cite: []loc{"app/client.py:@retry", "app/client.py:@retry#2"}},
	{q: "What breaks if ErrNotFound changes?", facts: []string{"`MemStore.Get`", "`FileStore.Get`", "`ReadOnlyStore.Get`", "`TestMemStoreGet`"},
		cite: []loc{`store/mem.go:return "", ErrNotFound`, `store/file.go:return "", ErrNotFound`, `store/readonly.go:return "", ErrNotFound`, "store/mem_test.go:errors.Is(err, ErrNotFound)"}},
	{q: "Who calls fetchCart?", facts: []string{"`cartSize`", "web/src/cart.ts", "web/src/api.test.ts"},
		cite: []loc{"web/src/cart.ts:await fetchCart", "web/src/api.test.ts:await fetchCart"},
		also: []loc{"web/src/api.test.ts:import { fetchCart", "web/src/cart.ts:import { fetchCart"}},
	{q: "Where is bucket used?", facts: []string{"`M.allow`", "scripts/rate.lua"}, cite: []loc{"scripts/rate.lua:M.count(bucket(key))"}},
	{q: "Who calls fetch_order?", facts: []string{"`order_report`", "app/orders.py"}, cite: []loc{"app/orders.py:order = fetch_order"},
		also: []loc{"app/orders.py:import fetch_order"}},

	// Method sets and implementations.
	{q: "Which types implement Store?", facts: []string{"`*MemStore`", "`*FileStore`", "`ReadOnlyStore`", "lacks `Put`"},
		cite: []loc{"store/mem.go:type MemStore struct", "store/file.go:type FileStore struct", "store/readonly.go:type ReadOnlyStore struct"}},
	{q: "Which classes implement CartStore?", facts: []string{"`LocalCart`", "`RemoteCart`"},
		cite: []loc{"web/src/api.ts:export class LocalCart", "web/src/remote.ts:export class RemoteCart"}},
	{q: "What interfaces does MemStore implement?", facts: []string{"`Store`", "`*MemStore`"}, cite: []loc{"store/store.go:type Store interface"},
		also: []loc{"store/mem.go:type MemStore struct"}},
	{q: "Does ReadOnlyStore implement Store?", facts: []string{"No: `ReadOnlyStore` does not implement `Store`", "lacks `Put`"}, cite: []loc{"store/readonly.go:type ReadOnlyStore struct"},
		also: []loc{"store/store.go:type Store interface"}},
	{q: "What methods does FileStore have?", facts: []string{"`Get`", "`Put`"},
		cite: []loc{"store/file.go:func (f *FileStore) Get", "store/file.go:func (f *FileStore) Put"}},
	{q: "What does RemoteCart implement?", facts: []string{"`CartStore`"}, cite: []loc{"web/src/api.ts:export interface CartStore"},
		also: []loc{"web/src/remote.ts:export class RemoteCart"}},
	{q: "Which methods does LocalCart have?", facts: []string{"`load`", "`save`"},
		cite: []loc{"web/src/api.ts:async load", "web/src/api.ts:async save"}},

	// The PR's changes, by definition, with renames and moves.
	{q: "What changed in parseConfig?", facts: []string{"renamed from `loadConfig`", "lines 12-14 are new", "`path == \"\"`"}, cite: []loc{"config/config.go:func parseConfig"}},
	{q: "Was anything renamed in this PR?", facts: []string{"`loadConfig`", "`parseConfig`", "`order_report`"},
		cite: []loc{"config/config.go:func parseConfig", "app/orders.py:def order_report"}},
	{q: "What was parseConfig called before?", facts: []string{"`loadConfig`"}, cite: []loc{"config/config.go:func parseConfig"}},
	{q: "What changed in store/file.go?", facts: []string{"`FileStore.Put` is new", "`FileStore.Get` changed"},
		cite: []loc{"store/file.go:func (f *FileStore) Put", "store/file.go:b, err := os.ReadFile"}},
	{q: "What does this PR change?", facts: []string{"renamed from `loadConfig`", "`order_report` was moved", "`ReadOnlyStore`", "`RemoteCart`", "`fetch_order` changed"},
		cite: []loc{"config/config.go:func parseConfig", "app/orders.py:def order_report", "store/readonly.go:type ReadOnlyStore", "web/src/remote.ts:export class RemoteCart"},
		also: []loc{"store/file.go:func (f *FileStore) Put", "store/file.go:b, err := os.ReadFile", "app/client.py:if order_id is None", "store/readonly.go:func (r ReadOnlyStore) Get",
			"web/src/api.ts:function emptyCart", `web/src/api.ts:if (id === "")`, "scripts/rate.lua:if limit <= 0", "store/mem_test.go:func TestMemStoreGet",
			"web/src/api.test.ts:describe", "web/src/remote.ts:constructor", "web/src/remote.ts:async load", "web/src/remote.ts:async save", "config/config.go:if path", "store/file.go:type FileStore",
			"config/load.go:return parseConfig(path)", "config/load.go:c, err := parseConfig(path)"}},
	{q: "What changed in fetch_order?", facts: []string{"`fetch_order` changed", "order_id is None"}, cite: []loc{"app/client.py:if order_id is None"}},
	{q: "Where did order_report move?", facts: []string{"`app/report.py`", "app/orders.py"}, cite: []loc{"app/orders.py:def order_report"}},
	{q: "What changed in M.allow?", facts: []string{"`M.allow` changed", "limit <= 0"}, cite: []loc{"scripts/rate.lua:if limit <= 0"}},

	// Why a function returns what it returns: the guards on the path.
	{q: "Why does parseConfig return errEmpty?", facts: []string{"`path == \"\"`", "declared nowhere"},
		cite: []loc{`config/config.go:if path == ""`, "config/config.go:return nil, errEmpty"}},
	{q: "When does MemStore.Get return ErrNotFound?", facts: []string{"`!ok`"}, cite: []loc{"store/mem.go:if !ok", `store/mem.go:return "", ErrNotFound`}},
	{q: "When does fetchCart throw?", facts: []string{"`id === \"\"`"}, cite: []loc{`web/src/api.ts:if (id === "")`, "web/src/api.ts:throw new Error"}},
	{q: "Why does fetch_order raise ValueError?", facts: []string{"order_id is None"}, cite: []loc{"app/client.py:if order_id is None", "app/client.py:raise ValueError"}},
	{q: "When does MustLoad panic?", facts: []string{"`err != nil`"}, cite: []loc{"config/load.go:if err != nil", "config/load.go:panic(err)"}},
	{q: "When does M.allow return false?", facts: []string{"`limit <= 0`"}, cite: []loc{"scripts/rate.lua:if limit <= 0", "scripts/rate.lua:return false"}},
	{q: "What happens when path is empty?", facts: []string{"`path == \"\"`", "errEmpty", "`parseConfig`"},
		cite: []loc{`config/config.go:if path == ""`, "config/config.go:return nil, errEmpty"}},
	{q: "What happens when order_id is None?", facts: []string{"ValueError", "`fetch_order`"},
		cite: []loc{"app/client.py:if order_id is None", "app/client.py:raise ValueError"}},

	// A focus range.
	{q: "What does this code do?", focus: section("config/config.go", 12, 14), facts: []string{"`parseConfig`", "lines 12-14"},
		cite: []loc{`config/config.go:if path == ""`}},
	{q: "What does this do?", focus: section("web/src/api.ts", 12, 14), facts: []string{"`fetchCart`", "changed lines 12-14"},
		cite: []loc{`web/src/api.ts:if (id === "")`}},

	// Tests.
	{q: "Is fetch_user tested?", facts: []string{"`test_fetch_user`"}, cite: []loc{"tests/test_client.py:def test_fetch_user", "tests/test_client.py:assert fetch_user"}},
	{q: "Is fetchCart tested?", facts: []string{"loads a stored cart"}, cite: []loc{"web/src/api.test.ts:await fetchCart"},
		also: []loc{"web/src/api.test.ts:it(\"loads"}},
	{q: "Is MemStore.Get tested?", facts: []string{"`TestMemStoreGet`"}, cite: []loc{"store/mem_test.go:func TestMemStoreGet", `store/mem_test.go:m.Get("nope")`}},
	{q: "Is parseConfig tested?", facts: []string{"No"}, cite: []loc{"config/config.go:func parseConfig"}},
	{q: "Is FileStore tested?", facts: []string{"No test"}, cite: []loc{"store/file.go:type FileStore struct"}},

	// Other phrasings, and names only the base has.
	{q: "Where is loadConfig defined?", facts: []string{"not in the head commit", "renamed it to `parseConfig`"}, cite: []loc{"config/config.go:func parseConfig"}},
	{q: "What is errEmpty?", facts: []string{"declared nowhere in the head commit"}, cite: []loc{"config/config.go:return nil, errEmpty"}},
	{q: "Is RemoteCart a CartStore?", facts: []string{"Yes: `RemoteCart` implements `CartStore`"},
		cite: []loc{"web/src/remote.ts:export class RemoteCart"}, also: []loc{"web/src/api.ts:export interface CartStore"}},
	{q: "Is ErrNotFound used anywhere?", facts: []string{"4 places in 4 files"},
		cite: []loc{`store/mem.go:return "", ErrNotFound`, `store/file.go:return "", ErrNotFound`}, also: []loc{`store/readonly.go:return "", ErrNotFound`, "store/mem_test.go:errors.Is(err, ErrNotFound)"}},
	{q: "How can fetchCart fail?", facts: []string{"`id === \"\"`"}, cite: []loc{`web/src/api.ts:if (id === "")`}},
	{q: "Tell me about Client", facts: []string{"class", "app/client.py", "`__init__` and `get`"}, cite: []loc{"app/client.py:class Client"}},

	// Callees and what a function does.
	{q: "What does MustLoad call?", facts: []string{"`parseConfig`"}, cite: []loc{"config/load.go:c, err := parseConfig(path)"}},
	{q: "What does user_report do?", facts: []string{"`fetch_user`", "app/report.py"}, cite: []loc{"app/report.py:def user_report"}},
	{q: "What does cartSize call?", facts: []string{"`fetchCart`"}, cite: []loc{"web/src/cart.ts:await fetchCart"}},
}

// TestEvaluation asks the evaluation set's questions about the fixture PR
// and scores the answers: answered (every fact stated, from the
// structure), citation precision (citations that point at an expected or
// acceptable line) and recall (expected lines cited).
func TestEvaluation(t *testing.T) {
	s := shopFixture(t)
	b := local.New(local.Config{})
	review := chat.Review{HeadSHA: s.repo.Head(), BaseSHA: s.repo.Commits[0]}
	answered, cited, good, want, found := 0, 0, 0, 0, 0
	for _, c := range evalCases {
		res, err := b.Run(context.Background(), chat.RunRequest{Mode: chat.SessionNone, Dir: s.repo.Dir, Question: c.q, Focus: c.focus, Review: review},
			func(chat.Event) {})
		if err != nil {
			t.Fatalf("%q: %v", c.q, err)
		}
		a, err := agentsessiontest.ParseAnswer([]byte(res.Text))
		if err != nil {
			t.Fatalf("%q: %v", c.q, err)
		}
		var problems []string
		// The checks the daemon runs on every answer.
		if err := chat.CheckCitations(context.Background(), a, s.lineCount); err != nil {
			t.Errorf("%q: %v", c.q, err)
		}
		if strings.Contains(a.AnswerMarkdown, "I cannot answer this from the code's structure") {
			problems = append(problems, "fell back to a search")
		}
		for _, f := range c.facts {
			if !strings.Contains(strings.ToLower(a.AnswerMarkdown), strings.ToLower(f)) {
				problems = append(problems, fmt.Sprintf("lacks %q", f))
			}
		}
		if len(problems) == 0 {
			answered++
		}
		type pl struct {
			p string
			l int
		}
		var wants, oks []pl
		for _, l := range c.cite {
			p, n := s.line(t, l)
			wants = append(wants, pl{p, n})
		}
		oks = append(oks, wants...)
		for _, l := range c.also {
			p, n := s.line(t, l)
			oks = append(oks, pl{p, n})
		}
		covers := func(ci chat.Citation, x pl) bool { return ci.Path == x.p && ci.StartLine <= x.l && x.l <= ci.EndLine }
		for _, ci := range a.Citations {
			cited++
			ok := false
			for _, x := range oks {
				ok = ok || covers(ci, x)
			}
			if ok {
				good++
			} else {
				problems = append(problems, fmt.Sprintf("cites %s:%d-%d, not expected", ci.Path, ci.StartLine, ci.EndLine))
			}
		}
		for _, x := range wants {
			want++
			hit := false
			for _, ci := range a.Citations {
				hit = hit || covers(ci, x)
			}
			if hit {
				found++
			} else {
				problems = append(problems, fmt.Sprintf("does not cite %s:%d", x.p, x.l))
			}
		}
		if os.Getenv("PRCHAT_EVAL_SHOW") != "" {
			fmt.Printf("### %s\n%s\n%v\n\n", c.q, a.AnswerMarkdown, a.Citations)
		}
		if len(problems) > 0 {
			t.Logf("%q: %s\n%s\n%v", c.q, strings.Join(problems, "; "), a.AnswerMarkdown, a.Citations)
		}
	}
	ans := float64(answered) / float64(len(evalCases))
	prec := float64(good) / float64(max(cited, 1))
	rec := float64(found) / float64(max(want, 1))
	t.Logf("evaluation: %d questions, answered %.1f%% (%d), citation precision %.1f%% (%d of %d), recall %.1f%% (%d of %d)",
		len(evalCases), 100*ans, answered, 100*prec, good, cited, 100*rec, found, want)
	fmt.Printf("local backend evaluation: %d questions, answered %.1f%%, citation precision %.1f%%, recall %.1f%%\n",
		len(evalCases), 100*ans, 100*prec, 100*rec)
	if len(evalCases) < 40 {
		t.Errorf("the evaluation set has %d questions, want at least 40", len(evalCases))
	}
	if ans < claimedAnswered || prec < claimedPrecision || rec < claimedRecall {
		t.Errorf("scores fell below the claims: answered %.3f (claimed %.2f), precision %.3f (claimed %.2f), recall %.3f (claimed %.2f)",
			ans, claimedAnswered, prec, claimedPrecision, rec, claimedRecall)
	}
}
