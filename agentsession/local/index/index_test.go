package index

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
)

// def finds the definition named name (Parent.Name for members) in f.
func def(t *testing.T, f *File, name string) Def {
	t.Helper()
	for _, d := range f.Defs {
		if d.QualName() == name {
			return d
		}
	}
	var names []string
	for _, d := range f.Defs {
		names = append(names, d.QualName())
	}
	t.Fatalf("%s: no definition %s in %v", f.Path, name, names)
	return Def{}
}

// returnOf finds the return statement of f on line.
func returnOf(t *testing.T, f *File, line int) Return {
	t.Helper()
	for _, r := range f.Returns {
		if r.Line == line {
			return r
		}
	}
	t.Fatalf("%s: no return on line %d in %+v", f.Path, line, f.Returns)
	return Return{}
}

func TestPython(t *testing.T) {
	src := `import functools

TEMPLATE = """
def not_a_function():
    pass
"""


class Store(Protocol):
    def get(self, key): ...
    def put(self, key, value): ...


@functools.lru_cache(maxsize=None)
@retry
async def load(client, key: str) -> dict:
    label = f"{key!r} {{not code}} {client.name}"
    if not key:
        raise ValueError("empty key")
    elif key.startswith("_"):
        return None
    else:
        value = client.get(key,
                           default=None)
    match value:
        case {"kind": kind}:
            return kind
    return value


class _Cache(Store):
    size = 3

    def get(self, key):
        return self.items[key] \
            if key in self.items else None
`
	f := &File{Path: "app/store.py", Lang: "python", Lines: countLines([]byte(src))}
	parsePython(f, []byte(src))
	if slices.ContainsFunc(f.Defs, func(d Def) bool { return d.Name == "not_a_function" }) {
		t.Error("a function inside a string was taken for a definition")
	}
	if d := def(t, f, "Store"); d.Kind != KindInterface || !slices.Equal(d.Methods, []string{"get", "put"}) || d.Start != 9 || d.End != 11 {
		t.Errorf("Store = %+v", d)
	}
	d := def(t, f, "load")
	if d.Kind != KindFunc || d.Start != 14 || d.Line != 16 || d.End != 28 || !slices.Equal(d.Decorators, []string{"functools.lru_cache", "retry"}) {
		t.Errorf("load = %+v", d)
	}
	if r := returnOf(t, f, 19); !r.Raise || len(r.Guards) != 1 || r.Guards[0].Cond != "not key" || r.Guards[0].Line != 18 {
		t.Errorf("raise = %+v", r)
	}
	// elif: its own condition, the one before it false.
	if r := returnOf(t, f, 21); len(r.Guards) != 2 || r.Guards[0].Cond != `key.startswith("_")` || !r.Guards[1].Else {
		t.Errorf("elif return = %+v", r)
	}
	if r := returnOf(t, f, 27); len(r.Guards) != 1 || !strings.HasPrefix(r.Guards[0].Cond, "case ") {
		t.Errorf("case return = %+v", r)
	}
	if c := def(t, f, "_Cache"); c.Exported || !slices.Equal(c.Bases, []string{"Store"}) || !slices.Equal(c.Methods, []string{"get"}) {
		t.Errorf("_Cache = %+v", c)
	}
	if g := def(t, f, "_Cache.get"); g.Kind != KindMethod || g.End != 36 {
		t.Errorf("_Cache.get = %+v", g)
	}
	if def(t, f, "_Cache.size").Kind != KindField || def(t, f, "TEMPLATE").Kind != KindConst {
		t.Error("class attribute or constant misread")
	}
	var calls []string
	for _, r := range f.Refs {
		if r.Call {
			calls = append(calls, r.Qual+"."+r.Name)
		}
	}
	if !slices.Contains(calls, "client.get") || !slices.Contains(calls, "key.startswith") {
		t.Errorf("calls = %v", calls)
	}
}

func TestTypeScript(t *testing.T) {
	src := "import { a } from \"./a\";\n" + // 1
		"const re = /\\/\\/ {not a block}/g;\n" + // 2
		"const tpl = `x ${ {a: 1}.a } ${fn(`inner ${b}`)} }`;\n" + // 3
		"export interface Repo<T> {\n" + // 4
		"  find(id: string): Promise<T>;\n" + // 5
		"  readonly size: number;\n" + // 6
		"  save: (item: T) => void;\n" + // 7
		"}\n" + // 8
		"export class MemRepo<T> extends Base implements Repo<T> {\n" + // 9
		"  private items = new Map<string, T>();\n" + // 10
		"  get size() { return this.items.size }\n" + // 11
		"  async find(id: string): Promise<T> {\n" + // 12
		"    if (!id) {\n" + // 13
		"      throw new Error(`no id`);\n" + // 14
		"    }\n" + // 15
		"    return this.items.get(id) as T;\n" + // 16
		"  }\n" + // 17
		"  save = (item: T): void => { this.items.set(item.id, item) };\n" + // 18
		"}\n" + // 19
		"const helper = (x: number) => x * 2\n" + // 20
		"function local(a: number, b: number): number {\n" + // 21
		"  return a / b / 2\n" + // 22
		"}\n" + // 23
		"export { helper as twice };\n" + // 24
		"module.exports = { local, other: 1 };\n" // 25
	f := &File{Path: "src/repo.ts", Lang: "typescript", Lines: countLines([]byte(src))}
	parseTS(f, []byte(src))
	if d := def(t, f, "Repo"); d.Kind != KindInterface || !d.Exported || d.Start != 4 || d.End != 8 || !slices.Equal(d.Methods, []string{"find", "save"}) {
		t.Errorf("Repo = %+v", d)
	}
	c := def(t, f, "MemRepo")
	if c.Kind != KindClass || c.Start != 9 || c.End != 19 || !slices.Equal(c.Bases, []string{"Base"}) || !slices.Equal(c.Implements, []string{"Repo"}) {
		t.Errorf("MemRepo = %+v", c)
	}
	if !slices.Equal(c.Methods, []string{"size", "find", "save"}) {
		t.Errorf("MemRepo methods = %v", c.Methods)
	}
	if d := def(t, f, "MemRepo.items"); d.Kind != KindField || d.Exported {
		t.Errorf("items = %+v", d)
	}
	if d := def(t, f, "MemRepo.find"); d.Start != 12 || d.End != 17 {
		t.Errorf("find = %+v", d)
	}
	if r := returnOf(t, f, 14); !r.Raise || len(r.Guards) != 1 || r.Guards[0].Cond != "!id" {
		t.Errorf("throw = %+v", r)
	}
	if d := def(t, f, "helper"); d.Kind != KindFunc || !d.Exported {
		t.Errorf("helper = %+v (exported by the export list)", d)
	}
	if d := def(t, f, "local"); d.Kind != KindFunc || !d.Exported || d.End != 23 {
		t.Errorf("local = %+v (exported by module.exports)", d)
	}
	if r := returnOf(t, f, 22); r.Text != "return a / b / 2" {
		t.Errorf("division read as a regular expression: %+v", r)
	}
	for _, d := range f.Defs {
		if d.Name == "T" || d.Name == "not" || d.Name == "inner" {
			t.Errorf("a type argument, regular expression or template was taken for a definition: %+v", d)
		}
	}
	if !slices.ContainsFunc(f.Refs, func(r Ref) bool { return r.Name == "fn" && r.Call && r.Line == 3 }) {
		t.Error("the call inside a template literal is missing")
	}
}

func TestTypeScriptTests(t *testing.T) {
	src := "describe(\"cart\", () => {\n  it('adds', async () => {\n    expect(add(1)).toBe(2);\n  });\n});\n"
	f := parseFile("src/cart.test.ts", "typescript", []byte(src))
	if !f.Test {
		t.Fatal("a .test.ts file is not a test file")
	}
	d := def(t, f, "adds")
	if d.Kind != KindTest || d.Start != 2 || d.End != 4 {
		t.Errorf("test = %+v", d)
	}
	i := slices.IndexFunc(f.Refs, func(r Ref) bool { return r.Name == "add" })
	if i < 0 || f.Defs[f.Refs[i].Def].Name != "adds" {
		t.Errorf("the use of add is not inside the test: %+v", f.Refs)
	}
}

func TestLua(t *testing.T) {
	src := "local M = {}\n\nlocal function key(k)\n  return 'k:' .. k\nend\n\nfunction M.get(k)\n  if k == nil then\n    error('no key')\n  end\n  return M.store[key(k)]\nend\n\nfunction M:close()\nend\n\nreturn M\n"
	f := parseFile("lib/cache.lua", "lua", []byte(src))
	if f.ParseErr != "" {
		t.Fatal(f.ParseErr)
	}
	if d := def(t, f, "key"); d.Exported || d.Start != 3 || d.End != 5 {
		t.Errorf("key = %+v", d)
	}
	if d := def(t, f, "M.get"); d.Kind != KindMethod || !d.Exported || d.End != 12 {
		t.Errorf("M.get = %+v", d)
	}
	def(t, f, "M.close")
	if r := returnOf(t, f, 9); !r.Raise || len(r.Guards) != 1 || r.Guards[0].Cond != "k == nil" {
		t.Errorf("error = %+v", r)
	}
	if !slices.ContainsFunc(f.Refs, func(r Ref) bool { return r.Name == "key" && r.Call && r.Line == 11 }) {
		t.Errorf("the call of key is missing: %+v", f.Refs)
	}

	bad := parseFile("lib/bad.lua", "lua", []byte("function broken(\n"))
	if bad.ParseErr == "" || len(bad.Defs) != 0 {
		t.Errorf("a file that does not parse = %+v", bad)
	}
}

// tree writes files under a new folder.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestGoTypes(t *testing.T) {
	dir := tree(t, map[string]string{
		"go.mod":            "module example.com/m\n\ngo 1.22\n",
		"api/api.go":        "package api\n\nimport \"fmt\"\n\ntype Getter interface {\n\tGet(k string) (string, error)\n}\n\nfunc Show(g Getter) { fmt.Println(g.Get(\"x\")) }\n",
		"impl/impl.go":      "package impl\n\nimport \"example.com/m/api\"\n\ntype T struct{}\n\nfunc (t *T) Get(k string) (string, error) { return \"\", errMissing }\n\ntype V struct{}\n\nfunc (V) Get(k int) (string, error) { return \"\", nil }\n\nvar _ api.Getter = (*T)(nil)\n\nfunc Use() { api.Show(&T{}) }\n",
		"impl/impl_test.go": "package impl\n\nimport \"testing\"\n\nfunc TestGet(t *testing.T) { new(T).Get(\"k\") }\n",
	})
	ix, err := Build(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	impl := ix.File("impl/impl.go")
	if impl == nil || len(impl.Undefined) != 1 || impl.Undefined[0].Name != "errMissing" || impl.Undefined[0].Line != 7 {
		t.Fatalf("undefined = %+v", impl)
	}
	var got []string
	for _, s := range ix.Implementations("Getter") {
		got = append(got, s.Type+" "+s.Interface+" "+strings.Join(s.Missing, ","))
		if s.Type == "T" && !s.Pointer {
			t.Errorf("T implements Getter only as *T: %+v", s)
		}
	}
	if !slices.Contains(got, "T Getter ") || !slices.Contains(got, "V Getter Get (with its signature)") {
		t.Errorf("satisfactions = %v", got)
	}
	// Uses across packages resolve through the module path.
	uses := ix.Refs("Show")
	if len(uses) != 1 || uses[0].File.Path != "impl/impl.go" || !uses[0].Ref().Call || uses[0].Ref().Target != "Show" {
		t.Errorf("uses of Show = %+v", uses)
	}
	var tested bool
	for _, u := range ix.Refs("Get") {
		if u.File.Path == "impl/impl_test.go" && u.Ref().Target == "T.Get" && u.File.Defs[u.Ref().Def].Kind == KindTest {
			tested = true
		}
	}
	if !tested {
		t.Errorf("the test's call of T.Get is missing: %+v", ix.Refs("Get"))
	}
}

func TestDiffAndSave(t *testing.T) {
	base := map[string]string{
		"a.go":  "package a\n\nfunc oldName(x int) int {\n\ty := x * 2\n\treturn y + 1\n}\n\nfunc Gone() {}\n",
		"b.py":  "def moved(x):\n    return x + 1\n",
		"c.lua": "local function same()\n  return 1\nend\n",
	}
	head := map[string]string{
		"a.go":  "package a\n\nfunc newName(x int) int {\n\ty := x * 2\n\treturn y + 1\n}\n\nfunc Added() int { return newName(1) }\n",
		"b.py":  agentsessiontest.Delete,
		"d.py":  "def moved(x):\n    return x + 1\n",
		"c.lua": "local function same()\n  return 2\nend\n",
	}
	repo := agentsessiontest.NewRepo(t, base, head)
	ix, err := Build(context.Background(), repo.Dir, Options{Head: repo.Head(), Base: repo.Commits[0]})
	if err != nil {
		t.Fatal(err)
	}
	if ix.DiffErr != "" {
		t.Fatal(ix.DiffErr)
	}
	var got []string
	for _, c := range ix.Changes {
		got = append(got, strings.Join(strings.Fields(c.Kind+" "+c.Name+" "+c.OldName+" "+c.Path+" "+c.OldPath), " "))
	}
	want := []string{"renamed newName oldName a.go a.go", "added Added a.go", "removed Gone a.go", "changed same c.lua c.lua", "moved moved moved d.py b.py"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("changes:\n got %q\nwant %q", got, want)
	}

	file := filepath.Join(t.TempDir(), "ix.gob")
	if err := ix.Save(file); err != nil {
		t.Fatal(err)
	}
	back, err := Load(file, repo.Head(), repo.Commits[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Files) != len(ix.Files) || len(back.Changes) != len(ix.Changes) || len(back.Defs("newName")) != 1 {
		t.Errorf("loaded index differs: %d files, %d changes", len(back.Files), len(back.Changes))
	}
	if _, err := Load(file, repo.Commits[0], repo.Commits[0]); err == nil {
		t.Error("an index loaded for other commits")
	}
}

// TestParsersTolerateAnything feeds the hand-written parsers every prefix
// of real files and some noise: each returns, keeps its lines in range,
// and records nothing past the end.
func TestParsersTolerateAnything(t *testing.T) {
	srcs := map[string]string{}
	for _, dir := range []string{"base", "head"} {
		root := filepath.Join("..", "testdata", "shop", dir)
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && Lang(p) != "" && Lang(p) != "go" {
				b, _ := os.ReadFile(p)
				srcs[p] = string(b)
			}
			return nil
		})
	}
	srcs["noise.ts"] = "}}} ) ] class { interface < > => `${ /re/ ' \" \n function ( { export {"
	srcs["noise.py"] = "\t  def (:\n@@\nclass:\n  \"\"\"unterminated\n  )))\n if if:\nelse\n"
	for p, src := range srcs {
		lang := Lang(p)
		for n := 0; n <= len(src); n += max(1, len(src)/60) {
			f := parseFile(p, lang, []byte(src[:n]))
			if strings.HasPrefix(f.ParseErr, "parser failure") {
				t.Fatalf("%s cut at %d: %s", p, n, f.ParseErr)
			}
			for _, d := range f.Defs {
				if d.Start < 1 || d.End < d.Start || d.End > max(f.Lines, 1) {
					t.Fatalf("%s cut at %d: definition %+v outside the file's %d lines", p, n, d, f.Lines)
				}
			}
		}
	}
}
