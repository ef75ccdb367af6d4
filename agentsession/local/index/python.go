package index

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Token kinds of the Python and TypeScript tokenizers.
const (
	tName = iota
	tOp
	tString
	tNumber
	tNewline
	tIndent
	tDedent
	tEOF
)

type tok struct {
	kind int
	text string
	line int
	// endLine is the last line of a multi-line token (strings).
	endLine int
	// nl says a line break came before the token (TypeScript).
	nl bool
}

// pyTokens tokenizes Python source: names, operators, strings (every
// prefix, triple quotes), numbers, and NEWLINE, INDENT and DEDENT as the
// language defines them (no newlines inside brackets or after a
// backslash).
func pyTokens(src []byte) []tok {
	var out []tok
	s := string(src)
	line := 1
	depth := 0
	indents := []int{0}
	atLineStart := true
	i := 0
	for i < len(s) {
		if atLineStart && depth == 0 {
			// Measure the indentation; blank and comment lines do not
			// count.
			col, j := 0, i
			for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\f') {
				if s[j] == '\t' {
					col = (col/8 + 1) * 8
				} else {
					col++
				}
				j++
			}
			if j >= len(s) {
				i = j
				break
			}
			if s[j] == '\n' || s[j] == '#' || s[j] == '\r' {
				for j < len(s) && s[j] != '\n' {
					j++
				}
				if j < len(s) {
					j++
					line++
				}
				i = j
				continue
			}
			i = j
			atLineStart = false
			if col > indents[len(indents)-1] {
				indents = append(indents, col)
				out = append(out, tok{kind: tIndent, line: line})
			}
			for col < indents[len(indents)-1] {
				indents = indents[:len(indents)-1]
				out = append(out, tok{kind: tDedent, line: line})
			}
		}
		c := s[i]
		switch {
		case c == '\n':
			if depth == 0 && len(out) > 0 && out[len(out)-1].kind != tNewline {
				out = append(out, tok{kind: tNewline, line: line})
			}
			line++
			i++
			atLineStart = true
			continue
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			i++
			continue
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
			continue
		case c == '\\' && i+1 < len(s) && (s[i+1] == '\n' || s[i+1] == '\r'):
			i += 2
			if i < len(s) && s[i-1] == '\r' && s[i] == '\n' {
				i++
			}
			line++
			continue
		}
		start, startLine := i, line
		if q, n := pyStringStart(s[i:]); n > 0 {
			i += n - 1
			triple := strings.Repeat(string(q), 3)
			if strings.HasPrefix(s[i:], triple) {
				i += 3
				for i < len(s) && !strings.HasPrefix(s[i:], triple) {
					if s[i] == '\\' {
						i++
					}
					if i < len(s) && s[i] == '\n' {
						line++
					}
					i++
				}
				i = min(i+3, len(s))
			} else {
				i++
				for i < len(s) && s[i] != q && s[i] != '\n' {
					if s[i] == '\\' && i+1 < len(s) {
						if s[i+1] == '\n' {
							line++
						}
						i++
					}
					i++
				}
				if i < len(s) && s[i] == q {
					i++
				}
			}
			out = append(out, tok{kind: tString, text: s[start:i], line: startLine, endLine: line})
			continue
		}
		if isIdentStart(s, i) {
			for i < len(s) && isIdentPart(s, i) {
				_, w := utf8.DecodeRuneInString(s[i:])
				i += w
			}
			out = append(out, tok{kind: tName, text: s[start:i], line: line})
			continue
		}
		if c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' {
			for i < len(s) && (isIdentPart(s, i) || s[i] == '.') {
				i++
			}
			out = append(out, tok{kind: tNumber, text: s[start:i], line: line})
			continue
		}
		n := opLen(s[i:], pyOps)
		op := s[i : i+n]
		i += n
		switch op {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth = max(0, depth-1)
		}
		out = append(out, tok{kind: tOp, text: op, line: line})
	}
	if len(out) > 0 && out[len(out)-1].kind != tNewline {
		out = append(out, tok{kind: tNewline, line: line})
	}
	for len(indents) > 1 {
		indents = indents[:len(indents)-1]
		out = append(out, tok{kind: tDedent, line: line})
	}
	return append(out, tok{kind: tEOF, line: line})
}

// pyStringStart reports whether s starts a string literal: its quote and
// the length of its prefix (r, b, f, u, rb, ...) plus one; 0 when not.
func pyStringStart(s string) (byte, int) {
	for n := 0; n <= 2 && n < len(s); n++ {
		c := s[n]
		if c == '\'' || c == '"' {
			return c, n + 1
		}
		if !strings.ContainsRune("rRbBuUfF", rune(c)) {
			return 0, 0
		}
	}
	return 0, 0
}

var pyOps = []string{"**=", "//=", ">>=", "<<=", "...", "->", ":=", "**", "//", "<<", ">>", "<=", ">=", "==", "!=",
	"+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "@="}

// opLen is the length of the operator at the start of s: the longest of
// ops, or one character.
func opLen(s string, ops []string) int {
	for _, op := range ops {
		if strings.HasPrefix(s, op) {
			return len(op)
		}
	}
	_, w := utf8.DecodeRuneInString(s)
	return max(w, 1)
}

func isIdentStart(s string, i int) bool {
	c := s[i]
	if c == '_' || c == '$' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' {
		return true
	}
	if c < utf8.RuneSelf {
		return false
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return unicode.IsLetter(r)
}

func isIdentPart(s string, i int) bool {
	c := s[i]
	if c >= '0' && c <= '9' {
		return true
	}
	return isIdentStart(s, i)
}

var pyKeywords = toSet(`False None True and as assert async await break class continue def del elif else except finally for from global
	if import in is lambda nonlocal not or pass raise return try while with yield self cls print len str int float bool list dict set tuple
	isinstance super object type range enumerate zip open`)

func toSet(words string) map[string]bool {
	set := map[string]bool{}
	for _, w := range strings.Fields(words) {
		set[w] = true
	}
	return set
}

// pyParser is a recursive-descent parser of Python statements.
type pyParser struct {
	t    []tok
	i    int
	f    *File
	last int // the line of the last token consumed
}

func parsePython(f *File, src []byte) {
	p := &pyParser{t: pyTokens(src), f: f}
	p.block("", nil, -1, false)
}

func (p *pyParser) peek() tok { return p.t[p.i] }

func (p *pyParser) next() tok {
	t := p.t[p.i]
	if t.kind != tEOF {
		p.i++
	}
	if t.kind != tNewline && t.kind != tIndent && t.kind != tDedent && t.kind != tEOF {
		p.last = max(t.line, t.endLine)
	}
	return t
}

func (p *pyParser) is(kind int, text string) bool {
	t := p.t[p.i]
	return t.kind == kind && (text == "" || t.text == text)
}

// block parses statements until a DEDENT (consumed) or the end.
func (p *pyParser) block(class string, guards []Guard, def int, nested bool) {
	for {
		switch p.peek().kind {
		case tEOF:
			return
		case tDedent:
			p.next()
			if nested {
				return
			}
			continue
		case tNewline, tIndent:
			p.next()
			continue
		}
		p.stmt(class, guards, def, nil)
	}
}

// suite parses what follows a compound statement's colon.
func (p *pyParser) suite(class string, guards []Guard, def int) {
	if p.is(tNewline, "") {
		p.next()
		if p.is(tIndent, "") {
			p.next()
			p.block(class, guards, def, true)
		}
		return
	}
	// Simple statements on the header's line.
	for !p.is(tNewline, "") && !p.is(tEOF, "") {
		p.simple(class, guards, def)
		if p.is(tOp, ";") {
			p.next()
		}
	}
	if p.is(tNewline, "") {
		p.next()
	}
}

// header consumes tokens up to the colon that ends a compound statement's
// header (at bracket depth 0) and returns them.
func (p *pyParser) header() []tok {
	start := p.i
	depth := 0
	for {
		t := p.peek()
		if t.kind == tEOF || t.kind == tNewline && depth == 0 {
			return p.t[start:p.i]
		}
		if t.kind == tOp {
			switch t.text {
			case "(", "[", "{":
				depth++
			case ")", "]", "}":
				depth--
			case ":":
				if depth == 0 {
					toks := p.t[start:p.i]
					p.next()
					return toks
				}
			}
		}
		if t.kind == tName && t.text == "lambda" && depth == 0 {
			// lambda's own colon: skip to it.
			p.next()
			for !p.is(tOp, ":") && !p.is(tNewline, "") && !p.is(tEOF, "") {
				p.next()
			}
		}
		p.next()
	}
}

// rest consumes a simple statement's tokens up to its end.
func (p *pyParser) rest() []tok {
	start := p.i
	for !p.is(tNewline, "") && !p.is(tEOF, "") && !p.is(tOp, ";") && !p.is(tDedent, "") {
		p.next()
	}
	return p.t[start:p.i]
}

func (p *pyParser) stmt(class string, guards []Guard, def int, decorators []tok) {
	t := p.peek()
	if t.kind == tOp && t.text == "@" {
		p.next()
		d := p.rest()
		p.refs(d, def)
		if p.is(tNewline, "") {
			p.next()
		}
		for p.is(tNewline, "") {
			p.next()
		}
		if len(d) > 0 {
			decorators = append(decorators, tok{kind: tName, text: dottedName(d), line: t.line})
		}
		p.stmt(class, guards, def, decorators)
		return
	}
	if t.kind != tName {
		p.simple(class, guards, def)
		p.endSimple()
		return
	}
	switch t.text {
	case "async":
		if p.t[p.i+1].kind == tName && (p.t[p.i+1].text == "def" || p.t[p.i+1].text == "for" || p.t[p.i+1].text == "with") {
			p.next()
			p.stmt(class, guards, def, decorators)
			return
		}
	case "def":
		p.funcDef(class, def, decorators, t.line)
		return
	case "class":
		p.classDef(def, decorators, t.line)
		return
	case "if":
		p.ifStmt(class, guards, def)
		return
	case "while", "for", "with", "try", "except", "finally", "else":
		p.next()
		h := p.header()
		p.refs(h, def)
		g := guards
		if t.text == "while" && len(h) > 0 {
			g = push(guards, pyGuard(h, false))
		}
		p.suite(class, g, def)
		return
	case "match", "case":
		// Soft keywords: a compound statement when the line ends in a
		// colon.
		if p.endsInColon() {
			p.next()
			h := p.header()
			p.refs(h, def)
			g := guards
			if t.text == "case" && len(h) > 0 {
				g = push(guards, pyGuard(h, false))
				g[0].Cond = "case " + g[0].Cond
			}
			p.suite(class, g, def)
			return
		}
	}
	p.simple(class, guards, def)
	p.endSimple()
}

func (p *pyParser) endSimple() {
	for p.is(tOp, ";") {
		p.next()
	}
	if p.is(tNewline, "") {
		p.next()
	}
}

// endsInColon reports whether the logical line from here ends with a colon.
func (p *pyParser) endsInColon() bool {
	depth := 0
	for j := p.i; j < len(p.t); j++ {
		t := p.t[j]
		if t.kind == tNewline || t.kind == tEOF {
			return j > p.i && p.t[j-1].kind == tOp && p.t[j-1].text == ":"
		}
		if t.kind == tOp {
			switch t.text {
			case "(", "[", "{":
				depth++
			case ")", "]", "}":
				depth--
			case ":":
				if depth == 0 && j+1 < len(p.t) && p.t[j+1].kind != tNewline {
					return true
				}
			}
		}
	}
	return false
}

func (p *pyParser) ifStmt(class string, guards []Guard, def int) {
	var prev []Guard
	for first := true; ; first = false {
		kw := p.peek()
		if !first && !(kw.kind == tName && (kw.text == "elif" || kw.text == "else")) {
			return
		}
		p.next()
		h := p.header()
		p.refs(h, def)
		g := guards
		for _, pg := range prev {
			pg.Else = true
			g = push(g, pg)
		}
		if kw.text != "else" && len(h) > 0 {
			cur := pyGuard(h, false)
			g = push(g, cur)
			prev = append(prev, cur)
		}
		p.suite(class, g, def)
		if kw.text == "else" {
			return
		}
		for p.is(tNewline, "") {
			p.next()
		}
	}
}

func pyGuard(h []tok, els bool) Guard {
	g := Guard{Line: h[0].line, End: h[len(h)-1].line, Cond: joinToks(h), Else: els}
	for i, t := range h {
		if t.kind == tName && !pyKeywords[t.text] {
			g.Names = append(g.Names, t.text)
		}
		if t.kind == tName && t.text == "not" && i+1 < len(h) && h[i+1].kind == tName {
			g.Names = append(g.Names, `""`) // not x: x is empty
		}
		if t.kind == tString && (t.text == `""` || t.text == "''") {
			g.Names = append(g.Names, `""`)
		}
	}
	return g
}

func (p *pyParser) funcDef(class string, outer int, decorators []tok, start int) {
	p.next() // def
	name := p.next()
	if name.kind != tName {
		p.rest()
		return
	}
	if len(decorators) > 0 {
		start = decorators[0].line
	}
	d := Def{Name: name.text, Kind: KindFunc, Parent: class, Line: name.line, Start: start, Exported: !strings.HasPrefix(name.text, "_") || strings.HasPrefix(name.text, "__") && strings.HasSuffix(name.text, "__")}
	if class != "" {
		d.Kind = KindMethod
	}
	if strings.HasPrefix(name.text, "test") && (p.f.Test || isTestPath(p.f.Path) || strings.HasPrefix(class, "Test")) {
		d.Kind = KindTest
	}
	for _, dt := range decorators {
		d.Decorators = append(d.Decorators, dt.text)
	}
	p.f.Defs = append(p.f.Defs, d)
	idx := len(p.f.Defs) - 1
	h := p.header()
	p.refs(h, idx)
	p.suite("", nil, idx)
	p.f.Defs[idx].End = max(p.last, name.line)
	if class != "" && outer >= 0 {
		p.f.Defs[outer].Methods = append(p.f.Defs[outer].Methods, name.text)
	}
}

func (p *pyParser) classDef(outer int, decorators []tok, start int) {
	p.next() // class
	name := p.next()
	if name.kind != tName {
		p.rest()
		return
	}
	if len(decorators) > 0 {
		start = decorators[0].line
	}
	d := Def{Name: name.text, Kind: KindClass, Line: name.line, Start: start, Exported: !strings.HasPrefix(name.text, "_")}
	for _, dt := range decorators {
		d.Decorators = append(d.Decorators, dt.text)
	}
	p.f.Defs = append(p.f.Defs, d)
	idx := len(p.f.Defs) - 1
	h := p.header()
	p.refs(h, idx)
	// Bases: the names at depth 1 of the parentheses, not keywords.
	depth := 0
	for j, t := range h {
		if t.kind == tOp {
			switch t.text {
			case "(", "[":
				depth++
			case ")", "]":
				depth--
			}
			continue
		}
		if t.kind == tName && depth == 1 && (j+1 >= len(h) || h[j+1].text != "=" && h[j+1].text != ".") && (j == 0 || h[j-1].text != "=") {
			p.f.Defs[idx].Bases = append(p.f.Defs[idx].Bases, t.text)
		}
	}
	for _, b := range p.f.Defs[idx].Bases {
		if b == "Protocol" || b == "ABC" {
			p.f.Defs[idx].Kind = KindInterface
		}
	}
	p.suite(name.text, nil, idx)
	p.f.Defs[idx].End = max(p.last, name.line)
}

// simple parses a simple statement: return, raise, an assignment (a
// definition at module or class level) or an expression.
func (p *pyParser) simple(class string, guards []Guard, def int) {
	t := p.peek()
	if t.kind == tName && (t.text == "return" || t.text == "raise") {
		p.next()
		e := p.rest()
		p.refs(e, def)
		r := Return{Line: t.line, End: max(p.last, t.line), Def: def, Text: t.text + " " + joinToks(e), Raise: t.text == "raise", Guards: guards}
		for _, x := range e {
			if x.kind == tName && !pyKeywords[x.text] {
				r.Names = append(r.Names, x.text)
			}
			if x.kind == tName && x.text == "None" {
				r.Names = append(r.Names, "None")
			}
		}
		r.Text = strings.TrimSpace(r.Text)
		p.f.Returns = append(p.f.Returns, r)
		return
	}
	if t.kind == tName && (t.text == "import" || t.text == "from") {
		p.rest()
		return
	}
	e := p.rest()
	if len(e) == 0 {
		if !p.is(tNewline, "") && !p.is(tEOF, "") {
			p.next()
		}
		return
	}
	// NAME = ... or NAME: type = ... at module or class level defines NAME.
	if e[0].kind == tName && len(e) > 1 && (e[1].text == "=" || e[1].text == ":") && !pyKeywords[e[0].text] {
		topLevel := def < 0
		inClass := class != "" && def >= 0 && p.f.Defs[def].Kind != KindFunc && p.f.Defs[def].Kind != KindMethod
		if topLevel || inClass {
			kind := KindVar
			if strings.ToUpper(e[0].text) == e[0].text {
				kind = KindConst
			}
			d := Def{Name: e[0].text, Kind: kind, Line: e[0].line, Start: e[0].line, End: max(p.last, e[0].line), Exported: !strings.HasPrefix(e[0].text, "_")}
			if inClass {
				d.Kind, d.Parent = KindField, class
			}
			p.f.Defs = append(p.f.Defs, d)
			p.refs(e[1:], def)
			return
		}
	}
	p.refs(e, def)
}

// refs records the names used in toks.
func (p *pyParser) refs(toks []tok, def int) {
	for j, t := range toks {
		if t.kind != tName || pyKeywords[t.text] {
			continue
		}
		r := Ref{Name: t.text, Line: t.line, Def: def}
		if j > 0 && toks[j-1].text == "." {
			if j > 1 && toks[j-2].kind == tName {
				r.Qual = toks[j-2].text
			} else {
				r.Qual = "?"
			}
		}
		if j+1 < len(toks) && toks[j+1].text == "(" {
			r.Call = true
		}
		p.f.Refs = append(p.f.Refs, r)
	}
}

// dottedName is the name a decorator or callee starts with (a.b.c).
func dottedName(toks []tok) string {
	var b strings.Builder
	for j, t := range toks {
		if t.kind == tName && (j == 0 || toks[j-1].text == ".") {
			if j > 0 {
				b.WriteByte('.')
			}
			b.WriteString(t.text)
			continue
		}
		if t.text != "." {
			break
		}
	}
	return b.String()
}

// joinToks writes tokens back as text, cut at 200 bytes.
func joinToks(toks []tok) string {
	var b strings.Builder
	for j, t := range toks {
		if j > 0 && needSpace(toks[j-1], t) {
			b.WriteByte(' ')
		}
		b.WriteString(t.text)
		if b.Len() > 200 {
			return b.String()[:200] + "..."
		}
	}
	return b.String()
}

func needSpace(a, b tok) bool {
	if a.kind == tOp && (a.text == "(" || a.text == "[" || a.text == "." || a.text == "!") {
		return false
	}
	if b.kind == tOp && (b.text == ")" || b.text == "]" || b.text == "," || b.text == "." || b.text == "(" || b.text == ":" || b.text == ";" || b.text == "[") {
		return false
	}
	return true
}
