package index

import (
	"bytes"
	"strings"

	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

// luaReader reads a Lua file's AST (gopher-lua's parser).
type luaReader struct {
	f   *File
	src []byte
}

func parseLua(f *File, src []byte) {
	chunk, err := parse.Parse(bytes.NewReader(src), f.Path)
	if err != nil {
		f.ParseErr = firstLine(err.Error())
		return
	}
	r := &luaReader{f: f, src: src}
	r.stmts(chunk, nil, -1, true)
}

func (r *luaReader) add(d Def) int {
	r.f.Defs = append(r.f.Defs, d)
	return len(r.f.Defs) - 1
}

func (r *luaReader) stmts(list []ast.Stmt, guards []Guard, def int, top bool) {
	for _, s := range list {
		r.stmt(s, guards, def, top)
	}
}

func (r *luaReader) function(fn *ast.FunctionExpr, name, parent string, start int, exported bool) {
	idx := r.add(Def{Name: name, Kind: KindFunc, Parent: parent, Line: start, Start: start, End: max(fn.LastLine(), start), Exported: exported})
	if parent != "" {
		r.f.Defs[idx].Kind = KindMethod
	}
	r.stmts(fn.Stmts, nil, idx, false)
}

func (r *luaReader) stmt(s ast.Stmt, guards []Guard, def int, top bool) {
	switch s := s.(type) {
	case *ast.FuncDefStmt:
		name, parent := "", ""
		switch {
		case s.Name.Receiver != nil:
			name, parent = s.Name.Method, luaName(s.Name.Receiver)
		default:
			switch f := s.Name.Func.(type) {
			case *ast.IdentExpr:
				name = f.Value
			case *ast.AttrGetExpr:
				name, parent = luaName(f.Key), luaName(f.Object)
			}
		}
		if name != "" {
			r.function(s.Func, name, parent, s.Line(), true)
		}
	case *ast.LocalAssignStmt:
		for i, e := range s.Exprs {
			if fn, ok := e.(*ast.FunctionExpr); ok && i < len(s.Names) {
				r.function(fn, s.Names[i], "", s.Line(), false)
				continue
			}
			r.expr(e, def)
		}
		if top {
			for i, n := range s.Names {
				if i < len(s.Exprs) {
					if _, ok := s.Exprs[i].(*ast.FunctionExpr); ok {
						continue
					}
				}
				r.add(Def{Name: n, Kind: KindVar, Line: s.Line(), Start: s.Line(), End: max(s.LastLine(), s.Line())})
			}
		}
	case *ast.AssignStmt:
		for i, e := range s.Rhs {
			if fn, ok := e.(*ast.FunctionExpr); ok && i < len(s.Lhs) {
				switch l := s.Lhs[i].(type) {
				case *ast.IdentExpr:
					r.function(fn, l.Value, "", s.Line(), true)
					continue
				case *ast.AttrGetExpr:
					r.function(fn, luaName(l.Key), luaName(l.Object), s.Line(), true)
					continue
				}
			}
			r.expr(e, def)
		}
		for _, e := range s.Lhs {
			r.expr(e, def)
		}
	case *ast.FuncCallStmt:
		r.expr(s.Expr, def)
		if call, ok := s.Expr.(*ast.FuncCallExpr); ok {
			if id, ok := call.Func.(*ast.IdentExpr); ok && id.Value == "error" {
				r.ret(s.Line(), call.Args, guards, def, true)
			}
		}
	case *ast.ReturnStmt:
		for _, e := range s.Exprs {
			r.expr(e, def)
		}
		r.ret(s.Line(), s.Exprs, guards, def, false)
	case *ast.IfStmt:
		r.expr(s.Condition, def)
		g := Guard{Line: s.Line(), End: s.Line(), Cond: r.cond(s), Names: luaNames(s.Condition)}
		r.stmts(s.Then, push(guards, g), def, false)
		g.Else = true
		r.stmts(s.Else, push(guards, g), def, false)
	case *ast.WhileStmt:
		r.expr(s.Condition, def)
		r.stmts(s.Stmts, guards, def, false)
	case *ast.RepeatStmt:
		r.expr(s.Condition, def)
		r.stmts(s.Stmts, guards, def, false)
	case *ast.DoBlockStmt:
		r.stmts(s.Stmts, guards, def, false)
	case *ast.NumberForStmt:
		r.expr(s.Init, def)
		r.expr(s.Limit, def)
		if s.Step != nil {
			r.expr(s.Step, def)
		}
		r.stmts(s.Stmts, guards, def, false)
	case *ast.GenericForStmt:
		for _, e := range s.Exprs {
			r.expr(e, def)
		}
		r.stmts(s.Stmts, guards, def, false)
	}
}

// cond is the text of an if statement's condition: its first line
// between if and then.
func (r *luaReader) cond(s *ast.IfStmt) string {
	t := lineText(r.src, s.Line())
	t = strings.TrimPrefix(strings.TrimPrefix(t, "elseif "), "if ")
	if i := strings.LastIndex(t, " then"); i >= 0 {
		t = t[:i]
	}
	return t
}

func (r *luaReader) ret(line int, exprs []ast.Expr, guards []Guard, def int, raise bool) {
	rt := Return{Line: line, End: line, Def: def, Raise: raise, Guards: guards, Text: lineText(r.src, line)}
	for _, e := range exprs {
		rt.Names = append(rt.Names, luaNames(e)...)
	}
	r.f.Returns = append(r.f.Returns, rt)
}

// expr records the uses in e, and the functions defined in it.
func (r *luaReader) expr(e ast.Expr, def int) {
	switch e := e.(type) {
	case nil:
	case *ast.IdentExpr:
		r.f.Refs = append(r.f.Refs, Ref{Name: e.Value, Line: e.Line(), Def: def})
	case *ast.AttrGetExpr:
		r.expr(e.Object, def)
		if k, ok := e.Key.(*ast.StringExpr); ok {
			r.f.Refs = append(r.f.Refs, Ref{Name: k.Value, Line: e.Line(), Qual: luaName(e.Object), Def: def})
		} else {
			r.expr(e.Key, def)
		}
	case *ast.FuncCallExpr:
		if e.Receiver != nil {
			r.expr(e.Receiver, def)
			r.f.Refs = append(r.f.Refs, Ref{Name: e.Method, Line: e.Line(), Qual: luaName(e.Receiver), Call: true, Def: def})
		} else {
			n := len(r.f.Refs)
			r.expr(e.Func, def)
			if len(r.f.Refs) > n {
				r.f.Refs[len(r.f.Refs)-1].Call = true
			}
		}
		if r.f.Test && len(e.Args) >= 2 {
			if id, ok := e.Func.(*ast.IdentExpr); ok && (id.Value == "it" || id.Value == "test") {
				if s, ok := e.Args[0].(*ast.StringExpr); ok {
					if fn, ok := e.Args[1].(*ast.FunctionExpr); ok {
						idx := r.add(Def{Name: s.Value, Kind: KindTest, Line: e.Line(), Start: e.Line(), End: max(fn.LastLine(), e.Line())})
						r.stmts(fn.Stmts, nil, idx, false)
						return
					}
				}
			}
		}
		for _, a := range e.Args {
			r.expr(a, def)
		}
	case *ast.FunctionExpr:
		r.function(e, "(anonymous function)", "", e.Line(), false)
	case *ast.TableExpr:
		for _, f := range e.Fields {
			r.expr(f.Key, def)
			r.expr(f.Value, def)
		}
	case *ast.LogicalOpExpr:
		r.expr(e.Lhs, def)
		r.expr(e.Rhs, def)
	case *ast.RelationalOpExpr:
		r.expr(e.Lhs, def)
		r.expr(e.Rhs, def)
	case *ast.StringConcatOpExpr:
		r.expr(e.Lhs, def)
		r.expr(e.Rhs, def)
	case *ast.ArithmeticOpExpr:
		r.expr(e.Lhs, def)
		r.expr(e.Rhs, def)
	case *ast.UnaryMinusOpExpr:
		r.expr(e.Expr, def)
	case *ast.UnaryNotOpExpr:
		r.expr(e.Expr, def)
	case *ast.UnaryLenOpExpr:
		r.expr(e.Expr, def)
	}
}

// luaName is the name an expression stands for: an identifier, a string
// key, or the last part of a.b.
func luaName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.IdentExpr:
		return e.Value
	case *ast.StringExpr:
		return e.Value
	case *ast.AttrGetExpr:
		return luaName(e.Key)
	}
	return ""
}

// luaNames lists the names an expression mentions; nil and empty strings
// count as names too.
func luaNames(e ast.Expr) []string {
	var out []string
	var walk func(ast.Expr)
	walk = func(e ast.Expr) {
		switch e := e.(type) {
		case *ast.IdentExpr:
			out = append(out, e.Value)
		case *ast.NilExpr:
			out = append(out, "nil")
		case *ast.StringExpr:
			if e.Value == "" {
				out = append(out, `""`)
			}
		case *ast.AttrGetExpr:
			walk(e.Object)
			if k, ok := e.Key.(*ast.StringExpr); ok {
				out = append(out, k.Value)
			}
		case *ast.FuncCallExpr:
			if e.Receiver != nil {
				walk(e.Receiver)
				out = append(out, e.Method)
			} else {
				walk(e.Func)
			}
			for _, a := range e.Args {
				walk(a)
			}
		case *ast.LogicalOpExpr:
			walk(e.Lhs)
			walk(e.Rhs)
		case *ast.RelationalOpExpr:
			walk(e.Lhs)
			walk(e.Rhs)
		case *ast.StringConcatOpExpr:
			walk(e.Lhs)
			walk(e.Rhs)
		case *ast.ArithmeticOpExpr:
			walk(e.Lhs)
			walk(e.Rhs)
		case *ast.UnaryNotOpExpr:
			out = append(out, `""`)
			walk(e.Expr)
		case *ast.UnaryMinusOpExpr:
			walk(e.Expr)
		case *ast.UnaryLenOpExpr:
			walk(e.Expr)
		}
	}
	walk(e)
	return out
}
