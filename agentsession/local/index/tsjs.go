package index

import (
	"strings"
	"unicode/utf8"
)

var tsOps = []string{">>>=", "...", "===", "!==", "**=", "<<=", ">>=", "&&=", "||=", "??=", "=>", "==", "!=", "<=", ">=",
	"&&", "||", "??", "?.", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "**", "<<"}

// regexAfter are keywords after which a slash starts a regular expression.
var regexAfter = toSet(`return typeof case do else in of new delete void throw instanceof yield await`)

// tsTokens tokenizes TypeScript or JavaScript: names, operators, strings,
// template literals (their ${} parts as tokens), regular expression
// literals, numbers; comments are dropped and a token records whether a
// line break came before it.
func tsTokens(src []byte) []tok {
	s := string(src)
	var out []tok
	line := 1
	nl := false
	// templates holds, for each template literal being read, the brace
	// depth at which its ${ opened.
	var templates []int
	depth := 0
	emit := func(t tok) {
		t.nl = nl
		nl = false
		if t.endLine == 0 {
			t.endLine = t.line
		}
		out = append(out, t)
	}
	// readTemplate reads template text from s[i] (after ` or }) to its end
	// or to ${, and returns the new offset.
	readTemplate := func(i int) int {
		start, startLine := i, line
		for i < len(s) {
			switch s[i] {
			case '\\':
				i++
			case '\n':
				line++
			case '`':
				emit(tok{kind: tString, text: s[start : i+1], line: startLine, endLine: line})
				return i + 1
			case '$':
				if i+1 < len(s) && s[i+1] == '{' {
					emit(tok{kind: tString, text: s[start:i], line: startLine, endLine: line})
					depth++
					templates = append(templates, depth)
					return i + 2
				}
			}
			i++
		}
		emit(tok{kind: tString, text: s[start:], line: startLine, endLine: line})
		return len(s)
	}
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\n':
			line++
			nl = true
			i++
			continue
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case c == '/' && i+1 < len(s) && s[i+1] == '/':
			for i < len(s) && s[i] != '\n' {
				i++
			}
			continue
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			j := strings.Index(s[i+2:], "*/")
			end := len(s)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			if n := strings.Count(s[i:end], "\n"); n > 0 {
				line += n
				nl = true
			}
			i = end
			continue
		case c == '\'' || c == '"':
			start := i
			i++
			for i < len(s) && s[i] != c && s[i] != '\n' {
				if s[i] == '\\' {
					i++
				}
				i++
			}
			i = min(i+1, len(s))
			emit(tok{kind: tString, text: s[start:i], line: line})
			continue
		case c == '`':
			i = readTemplate(i + 1)
			continue
		case c == '}' && len(templates) > 0 && templates[len(templates)-1] == depth:
			templates = templates[:len(templates)-1]
			depth--
			i = readTemplate(i + 1)
			continue
		case c == '/' && slashStartsRegex(out):
			start := i
			i++
			inClass := false
			for i < len(s) && s[i] != '\n' {
				if s[i] == '\\' {
					i += 2
					continue
				}
				if s[i] == '[' {
					inClass = true
				} else if s[i] == ']' {
					inClass = false
				} else if s[i] == '/' && !inClass {
					break
				}
				i++
			}
			i = min(i+1, len(s))
			for i < len(s) && isIdentPart(s, i) {
				i++
			}
			emit(tok{kind: tString, text: s[start:i], line: line})
			continue
		}
		start := i
		if c == '#' && i+1 < len(s) && isIdentStart(s, i+1) {
			i++
		}
		if isIdentStart(s, i) {
			for i < len(s) && isIdentPart(s, i) {
				_, w := utf8.DecodeRuneInString(s[i:])
				i += w
			}
			emit(tok{kind: tName, text: s[start:i], line: line})
			continue
		}
		if c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' {
			for i < len(s) && (isIdentPart(s, i) || s[i] == '.') {
				i++
			}
			emit(tok{kind: tNumber, text: s[start:i], line: line})
			continue
		}
		n := opLen(s[i:], tsOps)
		op := s[i : i+n]
		i += n
		switch op {
		case "{":
			depth++
		case "}":
			depth--
		}
		emit(tok{kind: tOp, text: op, line: line})
	}
	return append(out, tok{kind: tEOF, line: line, nl: true})
}

// slashStartsRegex reports whether a slash after out starts a regular
// expression rather than dividing.
func slashStartsRegex(out []tok) bool {
	if len(out) == 0 {
		return true
	}
	prev := out[len(out)-1]
	switch prev.kind {
	case tNumber, tString:
		return false
	case tName:
		return regexAfter[prev.text]
	}
	return prev.text != ")" && prev.text != "]" && prev.text != "}" && prev.text != "++" && prev.text != "--"
}

var tsKeywords = toSet(`break case catch class const continue debugger default delete do else enum export extends false finally for
	function if import in instanceof new null return super switch this throw true try typeof var void while with yield let static
	implements interface package private protected public await async as of type from get set readonly declare abstract keyof infer
	is unique never any unknown string number boolean symbol object bigint undefined namespace module require console
	override accessor satisfies`)

var tsModifiers = toSet(`export default declare async abstract public private protected static readonly override accessor get set`)

// tsParser is a recursive-descent parser of TypeScript and JavaScript
// statements and declarations; expressions and types are read as token
// sequences, their brackets matched.
type tsParser struct {
	t    []tok
	i    int
	f    *File
	last int
	// pending is a definition the next function body belongs to (a
	// variable or property initialized with a function, a test's
	// callback), or -1.
	pending int
	// exported are names an export list exports.
	exported map[string]bool
}

func parseTS(f *File, src []byte) {
	p := &tsParser{t: tsTokens(src), f: f, pending: -1, exported: map[string]bool{}}
	for !p.is("") {
		p.stmt(nil, -1)
	}
	for i := range f.Defs {
		if p.exported[f.Defs[i].Name] && f.Defs[i].Parent == "" {
			f.Defs[i].Exported = true
		}
	}
}

func (p *tsParser) peek() tok        { return p.t[p.i] }
func (p *tsParser) peekAt(n int) tok { return p.t[min(p.i+n, len(p.t)-1)] }

func (p *tsParser) next() tok {
	t := p.t[p.i]
	if t.kind != tEOF {
		p.i++
		p.last = t.endLine
	}
	return t
}

// is reports whether the next token is text ("" for the end).
func (p *tsParser) is(text string) bool {
	t := p.t[p.i]
	if text == "" {
		return t.kind == tEOF
	}
	return t.text == text && (t.kind == tOp || t.kind == tName)
}

func (p *tsParser) accept(text string) bool {
	if p.is(text) {
		p.next()
		return true
	}
	return false
}

func (p *tsParser) addDef(d Def) int {
	p.f.Defs = append(p.f.Defs, d)
	return len(p.f.Defs) - 1
}

// stmt parses one statement.
func (p *tsParser) stmt(guards []Guard, def int) {
	t := p.peek()
	if t.kind == tEOF {
		return
	}
	if t.kind == tOp {
		switch t.text {
		case ";":
			p.next()
			return
		case "{":
			p.next()
			p.block(guards, def)
			return
		case "@":
			p.decorator(def)
			return
		}
	}
	start := t.line
	exported := false
	if t.kind == tName {
		// Modifiers before a declaration.
		for p.peek().kind == tName && (p.is("export") || p.is("declare") || p.is("default") ||
			p.is("abstract") || p.is("async") && p.peekAt(1).text == "function") {
			if p.is("export") {
				exported = true
				if n := p.peekAt(1); n.text == "{" || n.text == "*" || n.text == "=" {
					p.next()
					p.exportList(def)
					return
				}
				if n := p.peekAt(1); n.text == "default" && n.kind == tName {
					if a := p.peekAt(2); a.kind == tName && a.text != "function" && a.text != "class" && a.text != "async" && a.text != "abstract" && !a.nl {
						p.exported[a.text] = true
					}
				}
			}
			p.next()
		}
		switch p.peek().text {
		case "function":
			if p.peek().kind == tName {
				p.funcDecl(def, start, exported)
				return
			}
		case "class":
			p.classDecl(def, start, exported)
			return
		case "interface":
			if p.peekAt(1).kind == tName {
				p.ifaceDecl(def, start, exported)
				return
			}
		case "type":
			if n := p.peekAt(1); n.kind == tName && !n.nl && (p.peekAt(2).text == "=" || p.peekAt(2).text == "<") {
				p.next()
				name := p.next()
				idx := p.addDef(Def{Name: name.text, Kind: KindType, Line: name.line, Start: start, Exported: exported})
				p.expr(idx, false)
				p.accept(";")
				p.f.Defs[idx].End = p.last
				return
			}
		case "enum":
			p.next()
			name := p.next()
			idx := p.addDef(Def{Name: name.text, Kind: KindType, Line: name.line, Start: start, Exported: exported})
			if p.accept("{") {
				p.group(idx, "}")
			}
			p.f.Defs[idx].End = p.last
			return
		case "namespace", "module":
			if n := p.peekAt(1); (n.kind == tName || n.kind == tString) && p.peekAt(2).text == "{" {
				p.next()
				p.next()
				p.next()
				p.block(guards, def)
				return
			}
		case "const", "let", "var":
			if p.is("const") && p.peekAt(1).text == "enum" {
				p.next()
				p.stmt(guards, def)
				return
			}
			p.next()
			p.varDecl(def, start, exported, guards)
			return
		case "import":
			if n := p.peekAt(1); n.text != "(" && n.text != "." {
				p.skipStatement()
				return
			}
		case "if":
			p.next()
			var cond []tok
			if p.accept("(") {
				from := p.i
				p.group(def, ")")
				cond = p.t[from : p.i-1]
			}
			g := guards
			var cur Guard
			if len(cond) > 0 {
				cur = tsGuard(cond)
				g = push(guards, cur)
			}
			p.stmt(g, def)
			if p.is("else") {
				p.next()
				g := guards
				if len(cond) > 0 {
					cur.Else = true
					g = push(guards, cur)
				}
				p.stmt(g, def)
			}
			return
		case "for", "while", "with", "catch":
			kw := p.next()
			p.accept("await")
			g := guards
			if p.accept("(") {
				from := p.i
				p.group(def, ")")
				if kw.text == "while" && p.i-1 > from {
					g = push(guards, tsGuard(p.t[from:p.i-1]))
				}
			}
			p.stmt(g, def)
			return
		case "switch":
			p.next()
			var subject []tok
			if p.accept("(") {
				from := p.i
				p.group(def, ")")
				subject = p.t[from : p.i-1]
			}
			if p.accept("{") {
				p.switchBody(subject, guards, def)
			}
			return
		case "do", "try", "finally", "else":
			p.next()
			p.stmt(guards, def)
			return
		case "return", "throw":
			kw := p.next()
			from := p.i
			if !p.peek().nl && !p.is(";") && !p.is("}") && !p.is("") {
				p.expr(def, false)
			}
			e := p.t[from:p.i]
			p.accept(";")
			r := Return{Line: kw.line, End: max(p.last, kw.line), Def: def, Raise: kw.text == "throw", Guards: guards,
				Text: strings.TrimSpace(kw.text + " " + joinToks(e))}
			for _, x := range e {
				if x.kind == tName && (!tsKeywords[x.text] || x.text == "null" || x.text == "undefined") {
					r.Names = append(r.Names, x.text)
				}
			}
			p.f.Returns = append(p.f.Returns, r)
			return
		}
	}
	// An expression statement.
	if p.peek().kind == tName && p.is("module") && p.peekAt(1).text == "." && p.peekAt(2).text == "exports" {
		p.commonJSExports()
	}
	if p.peek().kind == tName && p.is("exports") && p.peekAt(1).text == "." {
		p.exported[p.peekAt(2).text] = true
	}
	before := p.i
	p.expr(def, false)
	if !p.accept(";") && p.i == before {
		p.next() // a token no statement starts with
	}
}

func (p *tsParser) skipStatement() {
	p.next()
	p.expr(-2, false)
	p.accept(";")
}

// exportList reads export { a, b as c } [from "m"], export * from "m" and
// export = x.
func (p *tsParser) exportList(def int) {
	if p.accept("{") {
		for !p.is("}") && !p.is("") {
			t := p.next()
			if t.kind == tName && t.text != "type" && t.text != "as" {
				p.exported[t.text] = true
				if p.is("as") {
					p.next()
					p.next()
				}
			}
		}
		p.accept("}")
	}
	if p.accept("=") {
		if t := p.peek(); t.kind == tName {
			p.exported[t.text] = true
		}
	}
	p.expr(def, false)
	p.accept(";")
}

// commonJSExports reads module.exports = { a, b: c }.
func (p *tsParser) commonJSExports() {
	if p.peekAt(3).text != "=" {
		return
	}
	if t := p.peekAt(4); t.kind == tName {
		p.exported[t.text] = true
		return
	}
	if p.peekAt(4).text != "{" {
		return
	}
	depth := 0
	for j := p.i + 4; j < len(p.t); j++ {
		t := p.t[j]
		switch t.text {
		case "{", "(", "[":
			depth++
		case "}", ")", "]":
			depth--
		}
		if depth == 0 {
			return
		}
		if depth == 1 && t.kind == tName {
			prev, nxt := p.t[j-1].text, p.t[j+1].text
			if (prev == "{" || prev == ",") && (nxt == "," || nxt == "}" || nxt == ":") {
				p.exported[t.text] = true
			}
		}
	}
}

func (p *tsParser) decorator(def int) {
	p.next() // @
	p.next()
	for p.is(".") {
		p.next()
		p.next()
	}
	if p.accept("(") {
		p.group(def, ")")
	}
}

// block parses statements up to the closing brace (consumed).
func (p *tsParser) block(guards []Guard, def int) {
	for !p.is("}") && !p.is("") {
		p.stmt(guards, def)
	}
	p.accept("}")
}

// switchBody parses a switch's cases; each statement depends on its case.
func (p *tsParser) switchBody(subject []tok, guards []Guard, def int) {
	g := guards
	for !p.is("}") && !p.is("") {
		if p.is("case") || p.is("default") {
			kw := p.next()
			from := p.i
			if kw.text == "case" {
				p.expr(def, false)
			}
			label := p.t[from:p.i]
			p.accept(":")
			g = guards
			if kw.text == "case" && len(label) > 0 {
				cur := tsGuard(label)
				if len(subject) > 0 {
					cur.Cond = joinToks(subject) + " is " + cur.Cond
					cur.Names = append(cur.Names, tsGuard(subject).Names...)
				}
				g = push(guards, cur)
			}
			continue
		}
		p.stmt(g, def)
	}
	p.accept("}")
}

func tsGuard(cond []tok) Guard {
	g := Guard{Line: cond[0].line, End: cond[len(cond)-1].endLine, Cond: joinToks(cond)}
	for i, t := range cond {
		if t.kind == tName && !tsKeywords[t.text] {
			g.Names = append(g.Names, t.text)
		}
		if t.kind == tString && (t.text == `""` || t.text == "''" || t.text == "``") {
			g.Names = append(g.Names, `""`)
		}
		if t.text == "!" && i+1 < len(cond) && cond[i+1].kind == tName {
			g.Names = append(g.Names, `""`)
		}
	}
	return g
}

// funcDecl parses function name<T>(params): type { body }.
func (p *tsParser) funcDecl(outer, start int, exported bool) {
	p.next() // function
	p.accept("*")
	name := p.peek()
	if name.kind != tName {
		p.expr(outer, false)
		return
	}
	p.next()
	idx := p.addDef(Def{Name: name.text, Kind: KindFunc, Line: name.line, Start: start, Exported: exported})
	p.signatureAndBody(idx)
}

// signatureAndBody reads <T>(params): type and then a body or the end of
// an overload, for the definition idx.
func (p *tsParser) signatureAndBody(idx int) {
	if p.accept("<") {
		p.angle(idx)
	}
	if p.accept("(") {
		p.group(idx, ")")
	}
	if p.accept(":") {
		p.typeUntil(idx, "{", ";")
	}
	if p.accept("{") {
		p.block(nil, idx)
	} else {
		p.accept(";")
	}
	p.f.Defs[idx].End = p.last
}

// angle skips a type parameter list after its <, recording names used.
func (p *tsParser) angle(def int) {
	depth := 1
	for depth > 0 && !p.is("") {
		t := p.next()
		switch t.text {
		case "<":
			depth++
		case ">":
			depth--
		case ">>":
			depth -= 2
		case "(", "[", "{":
			p.group(def, closer(t.text))
		default:
			p.ref(t, def)
		}
	}
}

// typeUntil reads a type annotation up to one of the stop tokens at depth
// 0 (not consumed), recording the names it uses.
func (p *tsParser) typeUntil(def int, stops ...string) {
	for !p.is("") {
		t := p.peek()
		for _, s := range stops {
			if t.text == s && t.kind == tOp {
				return
			}
		}
		if t.kind == tOp && (t.text == ")" || t.text == "]" || t.text == "}") {
			return
		}
		if t.nl && t.kind == tName && tsStatementStart(t.text) {
			return
		}
		p.next()
		switch t.text {
		case "(", "[", "{":
			p.group(def, closer(t.text))
		case "<":
			p.angle(def)
		default:
			p.ref(t, def)
		}
	}
}

func tsStatementStart(s string) bool {
	switch s {
	case "export", "function", "class", "interface", "const", "let", "var", "type", "import", "return", "if", "for", "while":
		return true
	}
	return false
}

func closer(open string) string {
	switch open {
	case "(":
		return ")"
	case "[":
		return "]"
	}
	return "}"
}

// classDecl parses class Name<T> extends B implements I, J { members }.
func (p *tsParser) classDecl(outer, start int, exported bool) {
	p.next() // class
	name := p.peek()
	cls := "(anonymous class)"
	if name.kind == tName && name.text != "extends" && name.text != "implements" {
		p.next()
		cls = name.text
	}
	idx := p.addDef(Def{Name: cls, Kind: KindClass, Line: name.line, Start: start, Exported: exported})
	if p.accept("<") {
		p.angle(idx)
	}
	list := func() []string {
		var out []string
		for !p.is("{") && !p.is("") && !p.is("implements") {
			t := p.next()
			switch {
			case t.text == "<":
				p.angle(idx)
			case t.text == "(":
				p.group(idx, ")")
			case t.kind == tName:
				p.ref(t, idx)
				if p.peek().text != "." {
					out = append(out, t.text)
				}
			}
		}
		return out
	}
	if p.accept("extends") {
		p.f.Defs[idx].Bases = list()
	}
	if p.accept("implements") {
		p.f.Defs[idx].Implements = list()
	}
	if !p.accept("{") {
		p.f.Defs[idx].End = p.last
		return
	}
	for !p.is("}") && !p.is("") {
		p.member(idx, cls, false)
	}
	p.accept("}")
	p.f.Defs[idx].End = p.last
}

// member parses one member of a class (or, with iface, an interface).
func (p *tsParser) member(owner int, cls string, iface bool) {
	if p.accept(";") || p.accept(",") {
		return
	}
	if p.is("@") {
		p.decorator(owner)
		return
	}
	start := p.peek().line
	private := false
	for p.peek().kind == tName && tsModifiers[p.peek().text] {
		n := p.peekAt(1)
		if n.kind != tName && n.text != "[" && n.text != "#" && n.kind != tString && n.text != "*" || n.nl {
			break // the modifier is the member's name
		}
		if p.is("private") || p.is("protected") {
			private = true
		}
		p.next()
	}
	p.accept("*")
	name := p.peek()
	switch {
	case name.text == "[" && name.kind == tOp:
		p.next()
		p.group(owner, "]")
		name.text = "[computed]"
	case name.kind == tName || name.kind == tString || name.kind == tNumber:
		p.next()
	case name.text == "(" && iface:
		// A call signature.
		name.text = "(call)"
	case name.text == "{" && !iface:
		// A static block.
		p.next()
		p.block(nil, owner)
		return
	default:
		p.next()
		return
	}
	text := strings.Trim(name.text, `"'`)
	private = private || strings.HasPrefix(text, "#")
	p.accept("?")
	p.accept("!")
	if p.is("(") || p.is("<") {
		kind := KindMethod
		idx := p.addDef(Def{Name: text, Kind: kind, Parent: cls, Line: name.line, Start: start, Exported: !private})
		p.signatureAndBody(idx)
		p.f.Defs[owner].Methods = append(p.f.Defs[owner].Methods, text)
		return
	}
	idx := p.addDef(Def{Name: text, Kind: KindField, Parent: cls, Line: name.line, Start: start, Exported: !private})
	fn := false
	if p.accept(":") {
		from := p.i
		p.typeUntil(idx, "=", ";", ",")
		for _, t := range p.t[from:p.i] {
			if t.text == "=>" {
				fn = true
			}
		}
	}
	if p.accept("=") {
		p.pending = idx
		p.expr(idx, iface)
		if p.pending < 0 {
			fn = true
		}
		p.pending = -1
	}
	p.accept(";")
	p.f.Defs[idx].End = p.last
	if fn {
		p.f.Defs[idx].Kind = KindMethod
		p.f.Defs[owner].Methods = append(p.f.Defs[owner].Methods, text)
	}
}

// ifaceDecl parses interface Name<T> extends A, B { members }.
func (p *tsParser) ifaceDecl(outer, start int, exported bool) {
	p.next() // interface
	name := p.next()
	idx := p.addDef(Def{Name: name.text, Kind: KindInterface, Line: name.line, Start: start, Exported: exported})
	if p.accept("<") {
		p.angle(idx)
	}
	if p.accept("extends") {
		for !p.is("{") && !p.is("") {
			t := p.next()
			if t.text == "<" {
				p.angle(idx)
			} else if t.kind == tName {
				p.ref(t, idx)
				p.f.Defs[idx].Bases = append(p.f.Defs[idx].Bases, t.text)
			}
		}
	}
	if p.accept("{") {
		for !p.is("}") && !p.is("") {
			before := p.i
			p.member(idx, name.text, true)
			if p.i == before {
				p.next()
			}
		}
		p.accept("}")
	}
	p.f.Defs[idx].End = p.last
}

// varDecl parses the declarators of const, let or var.
func (p *tsParser) varDecl(outer, start int, exported bool, guards []Guard) {
	kind := KindVar
	if p.t[p.i-1].text == "const" {
		kind = KindConst
	}
	for {
		name := p.peek()
		idx := -1
		switch {
		case name.kind == tName:
			p.next()
			idx = p.addDef(Def{Name: name.text, Kind: kind, Line: name.line, Start: start, Exported: exported})
		case name.text == "{" || name.text == "[":
			p.next()
			p.group(outer, closer(name.text))
		default:
			p.expr(outer, false)
			p.accept(";")
			return
		}
		owner := outer
		if idx >= 0 {
			owner = idx
		}
		if p.accept(":") {
			p.typeUntil(owner, "=", ";", ",")
		}
		fn := false
		if p.accept("=") {
			if idx >= 0 {
				p.pending = idx
			}
			p.expr(owner, true)
			if idx >= 0 && p.pending < 0 {
				fn = true
			}
			p.pending = -1
		}
		if idx >= 0 {
			p.f.Defs[idx].End = p.last
			if fn {
				p.f.Defs[idx].Kind = KindFunc
			} else if outer >= 0 && isCode(p.f.Defs[outer].Kind) {
				// Locals are not definitions worth asking about.
				p.f.Defs = p.f.Defs[:idx]
				p.fixRefs(idx, outer)
			}
		}
		if !p.accept(",") {
			break
		}
		start = p.peek().line
	}
	p.accept(";")
}

// fixRefs points the uses recorded for a dropped definition idx at outer.
func (p *tsParser) fixRefs(idx, outer int) {
	for i := range p.f.Refs {
		if p.f.Refs[i].Def >= idx {
			p.f.Refs[i].Def = outer
		}
	}
	for i := range p.f.Returns {
		if p.f.Returns[i].Def >= idx {
			p.f.Returns[i].Def = outer
		}
	}
}

// expr reads an expression up to its end: a ; or , (with stopComma) or a
// closing bracket at depth 0 (not consumed), or a line break where a
// statement ends. It records uses, function bodies and tests.
func (p *tsParser) expr(def int, stopComma bool) {
	first := true
	for {
		t := p.peek()
		if t.kind == tEOF {
			return
		}
		if t.kind == tOp {
			switch t.text {
			case ";", ")", "]", "}":
				return
			case ",":
				if stopComma {
					return
				}
			}
		}
		if !first && t.nl && p.endsAt(t) {
			return
		}
		first = false
		p.step(def)
	}
}

// endsAt reports whether a line break before t ends the statement.
func (p *tsParser) endsAt(t tok) bool {
	prev := p.t[p.i-1]
	prevEnds := prev.kind == tName && !tsKeywords[prev.text] || prev.kind == tNumber || prev.kind == tString ||
		prev.kind == tName && (prev.text == "this" || prev.text == "null" || prev.text == "true" || prev.text == "false" || prev.text == "undefined") ||
		prev.text == ")" || prev.text == "]" || prev.text == "}" || prev.text == "++" || prev.text == "--"
	nextStarts := t.kind == tName && t.text != "as" && t.text != "satisfies" && t.text != "instanceof" && t.text != "in" ||
		t.kind == tString || t.kind == tNumber || t.text == "@" || t.text == "!" || t.text == "++" || t.text == "--"
	return prevEnds && nextStarts
}

// group reads tokens up to the closing bracket (consumed).
func (p *tsParser) group(def int, close string) {
	for !p.is("") {
		t := p.peek()
		if t.kind == tOp && t.text == close {
			p.next()
			return
		}
		if t.kind == tOp && (t.text == ")" || t.text == "]" || t.text == "}") {
			p.next() // unbalanced: tolerate
			continue
		}
		p.step(def)
	}
}

// step reads one token of an expression, and what it opens.
func (p *tsParser) step(def int) {
	t := p.next()
	switch {
	case t.kind == tName && t.text == "function":
		p.accept("*")
		name := ""
		line := t.line
		if n := p.peek(); n.kind == tName {
			p.next()
			name = n.text
		}
		idx := p.funcExpr(def, name, line)
		p.signatureAndBody(idx)
	case t.kind == tName && t.text == "class":
		p.i--
		p.classDecl(def, t.line, false)
	case t.kind == tOp && t.text == "=>":
		line := t.line
		if p.is("{") {
			p.next()
			idx := p.funcExpr(def, "", line)
			p.block(nil, idx)
			p.f.Defs[idx].End = p.last
		} else if p.pending >= 0 {
			idx := p.funcExpr(def, "", line)
			from := p.i
			p.expr(idx, true)
			e := p.t[from:p.i]
			if len(e) > 0 {
				r := Return{Line: e[0].line, End: p.last, Def: idx, Text: joinToks(e)}
				for _, x := range e {
					if x.kind == tName && !tsKeywords[x.text] {
						r.Names = append(r.Names, x.text)
					}
				}
				p.f.Returns = append(p.f.Returns, r)
			}
			p.f.Defs[idx].End = p.last
		}
	case t.kind == tOp && t.text == "{":
		if p.i >= 2 && p.t[p.i-2].text == ")" && p.t[p.i-2].kind == tOp {
			// A method body in an object literal: name(...) { ... }.
			idx := p.funcExpr(def, "", t.line)
			p.block(nil, idx)
			p.f.Defs[idx].End = p.last
			return
		}
		p.group(def, "}")
	case t.kind == tOp && (t.text == "(" || t.text == "["):
		p.group(def, closer(t.text))
	case t.kind == tName && p.is("<") && p.genericAhead():
		p.ref(t, def)
		p.next()
		p.angle(def)
	case t.kind == tName:
		if p.f.Test && (t.text == "it" || t.text == "test" || t.text == "describe") && p.is("(") && p.peekAt(1).kind == tString {
			label := strings.Trim(p.peekAt(1).text, "'\"`")
			idx := p.addDef(Def{Name: label, Kind: KindTest, Line: t.line, Start: t.line})
			p.ref(t, def)
			p.next()
			saved := p.pending
			p.pending = idx
			p.group(idx, ")")
			p.pending = saved
			p.f.Defs[idx].End = p.last
			return
		}
		p.ref(t, def)
	}
}

// genericAhead reports whether the < ahead opens type arguments: it is
// closed by a > (followed by a call's parenthesis or after new) with only
// names, dots, commas, brackets and spaces between.
func (p *tsParser) genericAhead() bool {
	isNew := p.i >= 2 && p.t[p.i-2].text == "new"
	depth := 0
	for j := p.i; j < len(p.t) && j < p.i+40; j++ {
		t := p.t[j]
		switch {
		case t.text == "<":
			depth++
		case t.text == ">":
			depth--
			if depth == 0 {
				return isNew || j+1 < len(p.t) && p.t[j+1].text == "("
			}
		case t.kind == tName, t.text == ",", t.text == ".", t.text == "[", t.text == "]", t.text == "|", t.text == "&":
		default:
			return false
		}
	}
	return false
}

// funcExpr starts the definition of a function expression or arrow
// function: the pending one if there is one, else an anonymous one.
func (p *tsParser) funcExpr(def int, name string, line int) int {
	if p.pending >= 0 {
		idx := p.pending
		p.pending = -1
		return idx
	}
	if name == "" {
		name = "(anonymous function)"
	}
	return p.addDef(Def{Name: name, Kind: KindFunc, Line: line, Start: line})
}

// ref records a use of a name.
func (p *tsParser) ref(t tok, def int) {
	if t.kind != tName || tsKeywords[t.text] || def == -2 {
		return
	}
	r := Ref{Name: t.text, Line: t.line, Def: def}
	j := p.i - 1 // t is the token just read
	if j > 0 && (p.t[j-1].text == "." || p.t[j-1].text == "?.") {
		r.Qual = "?"
		if j > 1 && p.t[j-2].kind == tName {
			r.Qual = p.t[j-2].text
		}
	}
	if j+1 < len(p.t) && p.t[j+1].text == "(" && p.t[j+1].kind == tOp {
		r.Call = true
	}
	if j > 0 && p.t[j-1].text == "new" {
		r.Call = true
	}
	p.f.Refs = append(p.f.Refs, r)
}
