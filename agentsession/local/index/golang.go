package index

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
)

// goSource is a Go file read (and parsed) by the walk.
type goSource struct {
	path string
	src  []byte
	file *ast.File
	err  string
}

// goPkg is a Go package of the checkout: the files of one folder with one
// package clause (in-package test files included).
type goPkg struct {
	dir, name string
	files     []*ast.File
	srcs      []goSource
	pkg       *types.Package
	info      *types.Info
	errs      []types.Error
	deps      []*goPkg
	done      bool
	out       []*File
}

// goChecker type-checks the checkout's packages from source.
type goChecker struct {
	fset    *token.FileSet
	byDir   map[string]*goPkg // the folder's main (non _test) package
	modules map[string]string // module path -> folder
	dirs    map[string]bool
	mu      sync.Mutex // guards goPkg.done across the workers
}

// parseGo parses one Go file into fset (safe for concurrent use).
func parseGo(fset *token.FileSet, p string, src []byte) goSource {
	g := goSource{path: p, src: src}
	af, err := parser.ParseFile(fset, p, src, parser.SkipObjectResolution|parser.ParseComments)
	g.file = af
	if err != nil {
		g.err = firstLine(err.Error())
	}
	return g
}

// checkGo type-checks the parsed Go files, tolerating errors, and returns
// their structure (method sets with their signatures included). The
// packages are checked on all cores, each after the packages it imports.
func checkGo(fset *token.FileSet, files []goSource, modules map[string]string) []*File {
	if len(files) == 0 {
		return nil
	}
	c := &goChecker{fset: fset, byDir: map[string]*goPkg{}, modules: modules, dirs: map[string]bool{}}
	slices.SortFunc(files, func(a, b goSource) int { return strings.Compare(a.path, b.path) })
	pkgs := map[string]*goPkg{}
	var order []*goPkg
	parseErrs := map[string]string{}
	for _, f := range files {
		af := f.file
		if af == nil {
			continue
		}
		if f.err != "" {
			parseErrs[f.path] = f.err
		}
		dir := path.Dir(f.path)
		name := af.Name.Name
		key := dir + "\x00" + name
		p := pkgs[key]
		if p == nil {
			p = &goPkg{dir: dir, name: name}
			pkgs[key] = p
			order = append(order, p)
		}
		p.files = append(p.files, af)
		p.srcs = append(p.srcs, f)
		c.dirs[dir] = true
		if !strings.HasSuffix(name, "_test") {
			if old := c.byDir[dir]; old == nil || len(p.files) > len(old.files) {
				c.byDir[dir] = p
			}
		}
	}
	clear(files) // the packages hold them now
	// The import graph, and waves of packages whose imports are checked.
	for _, p := range order {
		seen := map[*goPkg]bool{}
		for _, af := range p.files {
			for _, im := range af.Imports {
				ip := strings.Trim(im.Path.Value, `"`)
				if d := c.byDir[c.resolve(ip)]; d != nil && d != p && !seen[d] {
					seen[d] = true
					p.deps = append(p.deps, d)
				}
			}
		}
	}
	left := slices.Clone(order)
	for len(left) > 0 {
		var wave, rest []*goPkg
		for _, p := range left {
			ready := true
			for _, d := range p.deps {
				if !d.done && slices.Contains(left, d) {
					ready = false
					break
				}
			}
			if ready {
				wave = append(wave, p)
			} else {
				rest = append(rest, p)
			}
		}
		if len(wave) == 0 {
			// An import cycle: check the rest anyway, one at a time.
			wave, rest = rest[:1], rest[1:]
		}
		c.parallel(wave, func(p *goPkg) {
			defer func() {
				// go/types on broken code is not expected to panic; if
				// it does, the package keeps no structure.
				if r := recover(); r != nil {
					p.out = nil
				}
			}()
			c.check(p)
			p.out = c.extract(p, parseErrs)
			// What the other packages need is the types: the syntax,
			// sources and uses can go.
			p.info, p.files, p.srcs, p.errs = nil, nil, nil, nil
		})
		c.mu.Lock()
		for _, p := range wave {
			p.done = true
		}
		c.mu.Unlock()
		left = rest
	}
	var out []*File
	for _, p := range order {
		out = append(out, p.out...)
	}
	return out
}

// parallel runs fn on every package, on all cores.
func (c *goChecker) parallel(pkgs []*goPkg, fn func(*goPkg)) {
	work := make(chan *goPkg)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(pkgs)) {
		wg.Go(func() {
			for p := range work {
				fn(p)
			}
		})
	}
	for _, p := range pkgs {
		work <- p
	}
	close(work)
	wg.Wait()
}

// modulePath reads the module line of a go.mod file.
func modulePath(src []byte) string {
	for _, line := range strings.Split(string(src), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`)
		}
	}
	return ""
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// resolve maps an import path to a folder of the checkout: by the module
// path of a go.mod, or else by the longest tail of the import path that
// names a folder; "" when it is not in the checkout.
func (c *goChecker) resolve(ip string) string {
	for m, d := range c.modules {
		if ip == m || strings.HasPrefix(ip, m+"/") {
			return path.Join(d, strings.TrimPrefix(ip, m))
		}
	}
	parts := strings.Split(ip, "/")
	for i := range parts {
		if d := strings.Join(parts[i:], "/"); c.dirs[d] {
			return d
		}
	}
	return ""
}

// Import returns a package of the checkout that is checked already;
// anything else is not there (it stays unresolved).
func (c *goChecker) Import(ip string) (*types.Package, error) {
	p := c.byDir[c.resolve(ip)]
	if p == nil {
		return nil, errors.New("not in the checkout")
	}
	c.mu.Lock()
	done := p.done
	c.mu.Unlock()
	if !done || p.pkg == nil {
		return nil, errors.New("import cycle")
	}
	return p.pkg, nil
}

// check type-checks p once; errors are kept, not fatal.
func (c *goChecker) check(p *goPkg) {
	p.info = &types.Info{
		Defs: map[*ast.Ident]types.Object{},
		Uses: map[*ast.Ident]types.Object{},
	}
	conf := types.Config{
		Importer:    c,
		FakeImportC: true,
		Error: func(err error) {
			var te types.Error
			if errors.As(err, &te) {
				p.errs = append(p.errs, te)
			}
		},
	}
	files := p.files
	if c.byDir[p.dir] == p {
		// A package others import is checked without its test files, so
		// that its tests' imports cannot make a cycle; the test files
		// are checked with it again below.
		files = nil
		for i, f := range p.files {
			if !strings.HasSuffix(p.srcs[i].path, "_test.go") {
				files = append(files, f)
			}
		}
	}
	p.pkg, _ = conf.Check(p.dir, c.fset, files, p.info)
	if len(files) < len(p.files) {
		// Check the whole package, tests too, for its uses and errors;
		// both checks give the package the path p.dir, which is how
		// uses are told to be the checkout's own.
		p.info = &types.Info{Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{}}
		p.errs = nil
		_, _ = conf.Check(p.dir, c.fset, p.files, p.info)
	}
}

// extract turns a checked package into Files.
func (c *goChecker) extract(p *goPkg, parseErrs map[string]string) []*File {
	var out []*File
	undefined := map[string][]types.Error{}
	for _, e := range p.errs {
		if name, ok := strings.CutPrefix(e.Msg, "undefined: "); ok {
			pos := c.fset.Position(e.Pos)
			e.Msg = name
			undefined[pos.Filename] = append(undefined[pos.Filename], e)
		}
	}
	for i, af := range p.files {
		src := p.srcs[i]
		f := &File{Path: src.path, Lang: "go", Lines: countLines(src.src), Package: p.dir, ParseErr: parseErrs[src.path]}
		f.Test = strings.HasSuffix(src.path, "_test.go")
		ex := goExtract{c: c, p: p, f: f, src: src.src}
		ex.defs(af)
		ex.uses(af)
		ex.returns(af)
		for _, e := range undefined[src.path] {
			pos := c.fset.Position(e.Pos)
			name := e.Msg
			qual := ""
			if q, n, ok := strings.Cut(name, "."); ok {
				qual, name = q, n
			}
			f.Undefined = append(f.Undefined, Ref{Name: name, Qual: qual, Line: pos.Line, Def: f.Enclosing(pos.Line)})
		}
		out = append(out, f)
	}
	return out
}

type goExtract struct {
	c   *goChecker
	p   *goPkg
	f   *File
	src []byte
}

func (x *goExtract) line(pos token.Pos) int { return x.c.fset.Position(pos).Line }

func (x *goExtract) text(from, to token.Pos) string {
	a, b := x.c.fset.Position(from).Offset, x.c.fset.Position(to).Offset
	if a < 0 || b > len(x.src) || a > b {
		return ""
	}
	s := strings.Join(strings.Fields(string(x.src[a:b])), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func (x *goExtract) add(d Def) int {
	d.Signature = lineText(x.src, d.Line)
	x.f.Defs = append(x.f.Defs, d)
	return len(x.f.Defs) - 1
}

// defs records the file's top-level declarations and interface methods.
func (x *goExtract) defs(af *ast.File) {
	for _, decl := range af.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			def := Def{Name: d.Name.Name, Kind: KindFunc, Line: x.line(d.Name.Pos()), Start: x.line(d.Pos()), End: x.line(d.End()),
				Exported: d.Name.IsExported()}
			if d.Doc != nil {
				def.Start = x.line(d.Doc.Pos())
			}
			if d.Recv != nil && len(d.Recv.List) > 0 {
				def.Kind = KindMethod
				def.Parent = recvName(d.Recv.List[0].Type)
			} else if x.f.Test && isGoTest(d.Name.Name) {
				def.Kind = KindTest
			}
			x.add(def)
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				start, end := x.line(spec.Pos()), x.line(spec.End())
				if len(d.Specs) == 1 {
					start, end = x.line(d.Pos()), x.line(d.End())
					if d.Doc != nil {
						start = x.line(d.Doc.Pos())
					}
				}
				switch s := spec.(type) {
				case *ast.TypeSpec:
					def := Def{Name: s.Name.Name, Kind: KindType, Line: x.line(s.Name.Pos()), Start: start, End: end, Exported: s.Name.IsExported()}
					if it, ok := s.Type.(*ast.InterfaceType); ok {
						def.Kind = KindInterface
						for _, m := range it.Methods.List {
							for _, n := range m.Names {
								def.Methods = append(def.Methods, n.Name)
							}
							if len(m.Names) == 0 {
								def.Bases = append(def.Bases, x.text(m.Type.Pos(), m.Type.End()))
							}
						}
					}
					if st, ok := s.Type.(*ast.StructType); ok {
						for _, fl := range st.Fields.List {
							if len(fl.Names) == 0 {
								def.Bases = append(def.Bases, strings.TrimPrefix(x.text(fl.Type.Pos(), fl.Type.End()), "*"))
							}
						}
					}
					if obj, ok := x.p.info.Defs[s.Name].(*types.TypeName); ok {
						def.Methods = methodNames(obj.Type())
						def.Sigs, def.PtrSigs = methodSigs(obj.Type())
					}
					x.add(def)
					if it, ok := s.Type.(*ast.InterfaceType); ok {
						for _, m := range it.Methods.List {
							for _, n := range m.Names {
								x.add(Def{Name: n.Name, Kind: KindMethod, Parent: s.Name.Name, Line: x.line(n.Pos()),
									Start: x.line(m.Pos()), End: x.line(m.End()), Exported: n.IsExported()})
							}
						}
					}
				case *ast.ValueSpec:
					kind := KindVar
					if d.Tok == token.CONST {
						kind = KindConst
					}
					for _, n := range s.Names {
						if n.Name == "_" {
							continue
						}
						x.add(Def{Name: n.Name, Kind: kind, Line: x.line(n.Pos()), Start: start, End: end, Exported: n.IsExported()})
					}
				}
			}
		}
	}
}

func isGoTest(name string) bool {
	for _, p := range []string{"Test", "Benchmark", "Fuzz", "Example"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// recvName is the type name of a method's receiver.
func recvName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.ParenExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

// methodNames lists the methods of T and *T, sorted.
func methodNames(t types.Type) []string {
	var out []string
	seen := map[string]bool{}
	for _, tt := range []types.Type{t, types.NewPointer(t)} {
		if _, ok := t.Underlying().(*types.Interface); ok && tt != t {
			continue
		}
		ms := types.NewMethodSet(tt)
		for i := range ms.Len() {
			n := ms.At(i).Obj().Name()
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}

// methodSigs returns the methods of t as "Name signature" (the parameter
// and result types, package-qualified, without names): for an interface,
// its methods; for another type, the methods of T, and those *T adds.
func methodSigs(t types.Type) (value, ptr []string) {
	qual := func(p *types.Package) string { return p.Path() }
	sig := func(f *types.Func) string {
		st, ok := f.Type().(*types.Signature)
		if !ok {
			return f.Name()
		}
		var b strings.Builder
		b.WriteString(f.Name())
		b.WriteString(" (")
		for i := range st.Params().Len() {
			if i > 0 {
				b.WriteString(", ")
			}
			pt := st.Params().At(i).Type()
			if st.Variadic() && i == st.Params().Len()-1 {
				if sl, ok := pt.(*types.Slice); ok {
					b.WriteString("...")
					pt = sl.Elem()
				}
			}
			b.WriteString(types.TypeString(pt, qual))
		}
		b.WriteString(") (")
		for i := range st.Results().Len() {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(types.TypeString(st.Results().At(i).Type(), qual))
		}
		b.WriteString(")")
		return b.String()
	}
	if it, ok := t.Underlying().(*types.Interface); ok {
		for i := range it.NumMethods() {
			value = append(value, sig(it.Method(i)))
		}
		sort.Strings(value)
		return value, nil
	}
	seen := map[string]bool{}
	ms := types.NewMethodSet(t)
	for i := range ms.Len() {
		if f, ok := ms.At(i).Obj().(*types.Func); ok {
			s := sig(f)
			seen[s] = true
			value = append(value, s)
		}
	}
	ms = types.NewMethodSet(types.NewPointer(t))
	for i := range ms.Len() {
		if f, ok := ms.At(i).Obj().(*types.Func); ok {
			if s := sig(f); !seen[s] {
				ptr = append(ptr, s)
			}
		}
	}
	sort.Strings(value)
	sort.Strings(ptr)
	return value, ptr
}

// uses records the uses of the checkout's own objects.
func (x *goExtract) uses(af *ast.File) {
	calls := map[*ast.Ident]bool{}
	quals := map[*ast.Ident]string{}
	ast.Inspect(af, func(n ast.Node) bool {
		switch e := n.(type) {
		case *ast.CallExpr:
			switch fn := ast.Unparen(e.Fun).(type) {
			case *ast.Ident:
				calls[fn] = true
			case *ast.SelectorExpr:
				calls[fn.Sel] = true
			case *ast.IndexExpr:
				if id, ok := fn.X.(*ast.Ident); ok {
					calls[id] = true
				}
			}
		case *ast.SelectorExpr:
			if id, ok := e.X.(*ast.Ident); ok {
				quals[e.Sel] = id.Name
			}
		}
		return true
	})
	ast.Inspect(af, func(n ast.Node) bool {
		id, ok := n.(*ast.Ident)
		if !ok {
			return true
		}
		obj := x.p.info.Uses[id]
		if obj == nil || obj.Pkg() == nil || !x.local(obj.Pkg()) {
			return true
		}
		target := obj.Name()
		switch o := obj.(type) {
		case *types.Func:
			if sig, ok := o.Type().(*types.Signature); ok && sig.Recv() != nil {
				target = typeName(sig.Recv().Type()) + "." + o.Name()
			}
		case *types.Var:
			if o.IsField() {
				return true
			}
			if o.Parent() != o.Pkg().Scope() {
				return true // locals and parameters
			}
		case *types.PkgName:
			return true
		}
		line := x.line(id.Pos())
		def := x.f.Enclosing(line)
		if def < 0 {
			def = x.f.EnclosingAny(line)
		}
		x.f.Refs = append(x.f.Refs, Ref{Name: id.Name, Line: line, Call: calls[id], Qual: quals[id], Target: target, Def: def})
		return true
	})
}

// local reports whether pkg is one of the checkout's packages.
func (x *goExtract) local(pkg *types.Package) bool {
	return pkg.Path() == x.p.dir || x.c.byDir[pkg.Path()] != nil
}

// typeName is the name of a (pointer to a) named type.
func typeName(t types.Type) string {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	switch n := types.Unalias(t).(type) {
	case *types.Named:
		return n.Obj().Name()
	}
	return ""
}

// returns records the return statements (and panics) of every function
// with the conditions on their path.
func (x *goExtract) returns(af *ast.File) {
	for _, decl := range af.Decls {
		if fd, ok := decl.(*ast.FuncDecl); ok && fd.Body != nil {
			def := x.f.Enclosing(x.line(fd.Pos()))
			x.block(fd.Body.List, nil, def)
		}
	}
}

func (x *goExtract) block(list []ast.Stmt, guards []Guard, def int) {
	for _, s := range list {
		x.stmt(s, guards, def)
	}
}

func (x *goExtract) guard(cond ast.Expr, els bool) Guard {
	return Guard{Line: x.line(cond.Pos()), End: x.line(cond.End()), Cond: x.text(cond.Pos(), cond.End()), Names: identNames(cond), Else: els}
}

func push(guards []Guard, g Guard) []Guard {
	return append([]Guard{g}, guards...)
}

func (x *goExtract) stmt(s ast.Stmt, guards []Guard, def int) {
	switch s := s.(type) {
	case *ast.ReturnStmt:
		r := Return{Line: x.line(s.Pos()), End: x.line(s.End()), Def: def, Text: x.text(s.Pos(), s.End()), Guards: guards}
		for _, e := range s.Results {
			r.Names = append(r.Names, identNames(e)...)
		}
		x.f.Returns = append(x.f.Returns, r)
	case *ast.ExprStmt:
		if call, ok := s.X.(*ast.CallExpr); ok {
			if id, ok := call.Fun.(*ast.Ident); ok && (id.Name == "panic" || id.Name == "log.Fatal") {
				r := Return{Line: x.line(s.Pos()), End: x.line(s.End()), Def: def, Text: x.text(s.Pos(), s.End()), Guards: guards, Raise: true}
				for _, a := range call.Args {
					r.Names = append(r.Names, identNames(a)...)
				}
				x.f.Returns = append(x.f.Returns, r)
			}
		}
	case *ast.IfStmt:
		if s.Init != nil {
			x.stmt(s.Init, guards, def)
		}
		x.block(s.Body.List, push(guards, x.guard(s.Cond, false)), def)
		if s.Else != nil {
			x.stmt(s.Else, push(guards, x.guard(s.Cond, true)), def)
		}
	case *ast.BlockStmt:
		x.block(s.List, guards, def)
	case *ast.ForStmt:
		g := guards
		if s.Cond != nil {
			g = push(guards, x.guard(s.Cond, false))
		}
		x.block(s.Body.List, g, def)
	case *ast.RangeStmt:
		x.block(s.Body.List, guards, def)
	case *ast.SwitchStmt:
		for _, cc := range s.Body.List {
			cl := cc.(*ast.CaseClause)
			g := guards
			if len(cl.List) > 0 {
				cond := x.text(cl.List[0].Pos(), cl.List[len(cl.List)-1].End())
				if s.Tag != nil {
					cond = x.text(s.Tag.Pos(), s.Tag.End()) + " is " + cond
				}
				var names []string
				for _, e := range cl.List {
					names = append(names, identNames(e)...)
				}
				if s.Tag != nil {
					names = append(names, identNames(s.Tag)...)
				}
				g = push(guards, Guard{Line: x.line(cl.Pos()), End: x.line(cl.Colon), Cond: cond, Names: names})
			}
			x.block(cl.Body, g, def)
		}
	case *ast.TypeSwitchStmt:
		for _, cc := range s.Body.List {
			cl := cc.(*ast.CaseClause)
			x.block(cl.Body, guards, def)
		}
	case *ast.SelectStmt:
		for _, cc := range s.Body.List {
			x.block(cc.(*ast.CommClause).Body, guards, def)
		}
	case *ast.LabeledStmt:
		x.stmt(s.Stmt, guards, def)
	}
}

// identNames lists the identifiers in an expression, qualified ones as
// written (pkg.Name and Name both).
func identNames(e ast.Node) []string {
	var out []string
	ast.Inspect(e, func(n ast.Node) bool {
		switch v := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.Ident:
			out = append(out, v.Name)
		case *ast.BasicLit:
			if v.Kind == token.STRING && (v.Value == `""` || v.Value == "``") {
				out = append(out, `""`)
			}
		}
		return true
	})
	return out
}
