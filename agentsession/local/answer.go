package local

import (
	"fmt"
	"slices"
	"strings"

	"github.com/prchat/prchat/agentsession/local/index"
	"github.com/prchat/prchat/chat"
)

// structureNote ends every answer: where it comes from.
const structureNote = "This backend reads the code's structure; no model read it, so check the cited lines yourself."

// reply is a structural answer being written: the finding, then the
// evidence, each point with its citations.
type reply struct {
	finding  strings.Builder
	evidence []string
	cites    []chat.Citation
	max      int
}

// say adds to the finding.
func (r *reply) say(format string, args ...any) {
	if r.finding.Len() > 0 {
		r.finding.WriteByte(' ')
	}
	fmt.Fprintf(&r.finding, format, args...)
}

// point adds a point of evidence.
func (r *reply) point(format string, args ...any) {
	r.evidence = append(r.evidence, fmt.Sprintf(format, args...))
}

// cite cites lines start..end of f (clamped to the file), unless the
// answer has its citations already or cites them.
func (r *reply) cite(f *index.File, start, end int) {
	if f == nil || f.Lines == 0 || len(r.cites) >= r.max {
		return
	}
	start = max(1, min(start, f.Lines))
	end = max(start, min(end, f.Lines))
	for i, c := range r.cites {
		if c.Path != f.Path {
			continue
		}
		if start >= c.StartLine && end <= c.EndLine {
			return
		}
		if start <= c.EndLine+1 && end >= c.StartLine-1 && max(end, c.EndLine)-min(start, c.StartLine) < 12 {
			r.cites[i].StartLine, r.cites[i].EndLine = min(start, c.StartLine), max(end, c.EndLine)
			return
		}
	}
	r.cites = append(r.cites, chat.Citation{Path: f.Path, StartLine: start, EndLine: end})
}

// citeDef cites a definition: all of it when short, else its first lines.
func (r *reply) citeDef(d index.DefRef) {
	def := d.Def()
	r.cite(d.File, def.Start, min(def.End, def.Start+14))
}

func (r *reply) markdown() string {
	var b strings.Builder
	b.WriteString(r.finding.String())
	if len(r.evidence) > 0 {
		b.WriteString("\n\n")
		for _, e := range r.evidence {
			b.WriteString("- ")
			b.WriteString(e)
			b.WriteByte('\n')
		}
	} else {
		b.WriteString("\n")
	}
	b.WriteString("\n")
	b.WriteString(structureNote)
	return b.String()
}

// at says where a line is: `path` line n.
func at(path string, line int) string { return fmt.Sprintf("`%s` line %d", path, line) }

// lines says where a range is: `path` lines a-b (or line a).
func lines(path string, a, b int) string {
	if a == b {
		return at(path, a)
	}
	return fmt.Sprintf("`%s` lines %d-%d", path, a, b)
}

// code quotes source text for markdown.
func code(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if strings.Contains(s, "`") {
		return "``" + strings.ReplaceAll(s, "``", "` `") + "``"
	}
	return "`" + s + "`"
}

// what names a definition for a sentence: the method `T.Get`.
func what(d *index.Def) string {
	kind := d.Kind
	switch kind {
	case index.KindTest:
		return "the test " + code(d.QualName())
	case index.KindFunc:
		kind = "function"
	}
	return "the " + kind + " " + code(d.QualName())
}

// enclosingName names the definition a use or return is in.
func enclosingName(f *index.File, def int) string {
	if def < 0 || def >= len(f.Defs) {
		return "top-level code"
	}
	return code(f.Defs[def].QualName())
}

// answerer answers one question from an index.
type answerer struct {
	ix *index.Index
	q  *question
	// focus are the question's anchors.
	focus []chat.Anchor
	r     *reply
}

// answer answers q, or reports that the structure cannot (with why).
func (a *answerer) answer() (ok bool, why string) {
	switch a.q.kind {
	case askDefine:
		return a.define()
	case askExported:
		return a.exported()
	case askCallers:
		return a.callers()
	case askCallees:
		return a.callees()
	case askImplements:
		return a.implements()
	case askMethods:
		return a.methods()
	case askChanges:
		return a.changes()
	case askRenamed:
		return a.renamed()
	case askWhyReturn:
		return a.whyReturn()
	case askWhen:
		return a.when()
	case askFocus:
		return a.focused()
	case askTested:
		return a.tested()
	case askDescribe:
		return a.describe()
	}
	if len(a.focus) > 0 && len(a.q.targets) == 0 {
		return a.focused()
	}
	if a.implementsPair() {
		return true, ""
	}
	return false, "the question is not of a kind the structure answers (definitions, uses, implementations, changes, returns, tests)"
}

// defsOf returns the definitions of the i-th target, honouring its
// qualifier, tests last.
func (a *answerer) defsOf(i int) []index.DefRef {
	name, qual := a.q.targets[i], a.q.quals[i]
	var out, tests []index.DefRef
	for _, d := range a.ix.Defs(name) {
		def := d.Def()
		if qual != "" && def.Parent != "" && !strings.EqualFold(def.Parent, qual) {
			continue
		}
		if strings.HasPrefix(def.Name, "(") {
			continue
		}
		if d.File.Test {
			tests = append(tests, d)
		} else {
			out = append(out, d)
		}
	}
	out = append(out, tests...)
	// Definitions in the files the focus points at come first.
	slices.SortStableFunc(out, func(x, y index.DefRef) int { return a.focusRank(y.File.Path) - a.focusRank(x.File.Path) })
	return out
}

// focusRank is 1 for a file the focus points at, else 0.
func (a *answerer) focusRank(path string) int {
	for _, f := range a.focus {
		if f.Path == path {
			return 1
		}
	}
	return 0
}

// primary returns the definition of name a reader means: not in a test
// file, not anonymous, if there is one.
func (a *answerer) primary(name string) (index.DefRef, bool) {
	defs := a.ix.Defs(name)
	for _, d := range defs {
		if !d.File.Test && !strings.HasPrefix(d.Def().Name, "(") {
			return d, true
		}
	}
	if len(defs) > 0 {
		return defs[0], true
	}
	return index.DefRef{}, false
}

// label is the i-th target as the question qualifies it.
func (a *answerer) label(i int) string {
	if a.q.quals[i] != "" {
		return code(a.q.quals[i] + "." + a.q.targets[i])
	}
	return code(a.q.targets[i])
}

// firstDefined returns the first target with definitions (of a kind in
// kinds, if any are given), or -1.
func (a *answerer) firstDefined(kinds ...string) int {
	for i := range a.q.targets {
		for _, d := range a.defsOf(i) {
			if len(kinds) == 0 || slices.Contains(kinds, d.Def().Kind) {
				return i
			}
		}
	}
	return -1
}

func (a *answerer) define() (bool, string) {
	if len(a.q.targets) == 0 {
		return false, "the question names nothing the code defines or uses"
	}
	// The target that matters most: one declared nowhere is the finding.
	for i, name := range a.q.targets {
		if len(a.defsOf(i)) == 0 && len(a.ix.Undefined(name)) > 0 {
			a.undeclared(name)
			return true, ""
		}
	}
	i := a.firstDefined()
	if i < 0 {
		if a.gone() {
			return true, ""
		}
		return false, fmt.Sprintf("nothing in the head commit declares %s", code(a.q.targets[0]))
	}
	defs := a.defsOf(i)
	name := a.q.targets[i]
	if !defs[0].File.Test {
		defs = slices.DeleteFunc(defs, func(d index.DefRef) bool { return d.File.Test })
	}
	if len(defs) == 1 {
		d := defs[0].Def()
		a.r.say("%s is declared in %s: %s.", code(d.QualName()), at(defs[0].File.Path, d.Line), what(d))
		a.r.say("%s", exportSentence(defs[0]))
		if uses := a.usesOf(i); len(uses) > 0 && len(uses) <= 3 {
			var where []string
			for _, u := range uses {
				where = append(where, at(u.File.Path, u.Ref().Line))
			}
			a.r.say("The head commit uses it in %s: %s.", plural(len(uses), "place", "places"), joinAnd(where))
		} else if len(uses) > 3 {
			a.r.say("The head commit uses it in %s.", plural(len(uses), "place", "places"))
		}
	} else {
		a.r.say("%s has %d declarations in the head commit.", code(name), len(defs))
	}
	for j, d := range defs {
		if j >= 6 {
			a.r.point("and %d more", len(defs)-j)
			break
		}
		def := d.Def()
		a.r.point("%s: %s, %s", lines(d.File.Path, def.Start, def.End), what(def), code(def.Signature))
		a.r.citeDef(d)
	}
	return true, ""
}

// gone answers about a target that only the base has: the PR renamed,
// moved or removed it.
func (a *answerer) gone() bool {
	for _, name := range a.q.targets {
		if len(a.ix.Defs(name)) > 0 {
			continue
		}
		for _, c := range a.ix.Changes {
			if c.OldName == name && c.Name != name {
				a.r.say("%s is not in the head commit: the PR renamed it to %s.", code(name), code(c.Name))
				a.r.point("the %s", a.describeChange(c))
				a.callersOfRename([]index.Change{c})
				return true
			}
			if c.Kind == "removed" && c.Name == name {
				a.r.say("%s is not in the head commit: the PR removed it (it was at %s in the base).", code(name), lines(c.OldPath, c.OldStart, c.OldEnd))
				if u := a.ix.Undefined(name); len(u) > 0 {
					a.r.say("It is still used at %s, where it is now undefined.", at(u[0].File.Path, u[0].Ref().Line))
					a.r.cite(u[0].File, u[0].Ref().Line, u[0].Ref().Line)
				}
				return true
			}
		}
	}
	return false
}

// undeclared answers that name is declared nowhere.
func (a *answerer) undeclared(name string) {
	uses := a.ix.Undefined(name)
	a.r.say("%s is declared nowhere in the head commit.", code(name))
	first := uses[0]
	a.r.say("Type checking finds it undefined where %s uses it (%s), so the package does not compile as the PR stands.",
		enclosingName(first.File, first.Ref().Def), at(first.File.Path, first.Ref().Line))
	for _, c := range a.ix.Changes {
		if c.Kind == "removed" && c.Name == name {
			a.r.say("The base commit declared it in %s; the PR removed it.", lines(c.OldPath, c.OldStart, c.OldEnd))
		}
	}
	for j, u := range uses {
		if j >= 6 {
			a.r.point("and %d more uses", len(uses)-j)
			break
		}
		a.r.point("%s, in %s: undefined: %s", at(u.File.Path, u.Ref().Line), enclosingName(u.File, u.Ref().Def), code(name))
		a.r.cite(u.File, u.Ref().Line, u.Ref().Line)
	}
}

// exportSentence says whether a definition is exported, and why, as a
// sentence about "it".
func exportSentence(d index.DefRef) string { return "It " + exportClause(d) }

// exportClause says whether a definition is exported, and why: "is
// exported: ...".
func exportClause(d index.DefRef) string {
	def := d.Def()
	name := code(def.Name)
	switch d.File.Lang {
	case "go":
		if def.Exported {
			return fmt.Sprintf("is exported: %s starts with an upper-case letter.", name)
		}
		return fmt.Sprintf("is not exported: %s starts with a lower-case letter, so only package %s sees it.", name, code(d.File.Package))
	case "typescript", "javascript":
		if def.Parent != "" {
			if def.Exported {
				return fmt.Sprintf("is a public member of %s.", code(def.Parent))
			}
			return fmt.Sprintf("is a private member of %s.", code(def.Parent))
		}
		if def.Exported {
			return "is exported from its module."
		}
		return "is not exported from its module."
	case "python":
		if def.Exported {
			return fmt.Sprintf("is public: %s has no leading underscore.", name)
		}
		return fmt.Sprintf("is private by convention: %s starts with an underscore.", name)
	case "lua":
		if def.Exported {
			return "is reachable from outside its file (a global or a field of a module table)."
		}
		return "is local to its file."
	}
	return ""
}

func (a *answerer) exported() (bool, string) {
	i := a.firstDefined()
	if i < 0 {
		if len(a.q.targets) > 0 && len(a.ix.Undefined(a.q.targets[0])) > 0 {
			a.undeclared(a.q.targets[0])
			return true, ""
		}
		return false, "the question names nothing the head commit declares"
	}
	for j, d := range a.defsOf(i) {
		if j >= 4 {
			break
		}
		def := d.Def()
		if j == 0 {
			a.r.say("%s %s", code(def.QualName()), exportClause(d))
		}
		a.r.point("%s: %s, %s", at(d.File.Path, def.Line), what(def), code(def.Signature))
		a.r.cite(d.File, def.Line, def.Line)
	}
	return true, ""
}

// usesOf returns the uses of the i-th target that resolve to it (Go) or
// are spelled like it, outside its own declaration lines.
func (a *answerer) usesOf(i int) []index.RefRef {
	name, qual := a.q.targets[i], a.q.quals[i]
	var out []index.RefRef
	for _, u := range a.ix.Refs(name) {
		ref := u.Ref()
		if qual != "" && ref.Target != "" && ref.Target != qual+"."+name && !strings.HasSuffix(ref.Target, "."+name) {
			continue
		}
		if qual != "" && ref.Target != "" && !strings.EqualFold(strings.TrimSuffix(ref.Target, "."+name), qual) && ref.Target != name {
			continue
		}
		out = append(out, u)
	}
	return out
}

func (a *answerer) callers() (bool, string) {
	i := -1
	for j := range a.q.targets {
		if len(a.usesOf(j)) > 0 || len(a.defsOf(j)) > 0 {
			i = j
			break
		}
	}
	if i < 0 {
		for _, name := range a.q.targets {
			if len(a.ix.Undefined(name)) > 0 {
				a.undeclared(name)
				return true, ""
			}
		}
		if a.gone() {
			return true, ""
		}
		return false, "the question names nothing the code defines"
	}
	name := a.q.targets[i]
	uses := a.usesOf(i)
	defs := a.defsOf(i)
	if len(uses) == 0 {
		a.r.say("Nothing in the head commit uses %s", code(name))
		if len(defs) > 0 {
			a.r.say("besides its declaration in %s.", at(defs[0].File.Path, defs[0].Def().Line))
			a.r.citeDef(defs[0])
		} else {
			a.r.say(".")
		}
		return true, ""
	}
	type group struct {
		f    *index.File
		uses []index.RefRef
	}
	var groups []group
	for _, u := range uses {
		if n := len(groups); n > 0 && groups[n-1].f == u.File {
			groups[n-1].uses = append(groups[n-1].uses, u)
			continue
		}
		groups = append(groups, group{u.File, []index.RefRef{u}})
	}
	calls := 0
	for _, u := range uses {
		if u.Ref().Call {
			calls++
		}
	}
	verb := "used"
	if calls == len(uses) {
		verb = "called"
	}
	breaks := a.q.has("break*", "affect*", "impact*", "depend*")
	if breaks {
		a.r.say("Changing %s affects %s in %s:", a.label(i), plural(len(uses), "use", "uses"), plural(len(groups), "file", "files"))
	} else {
		a.r.say("%s is %s in %s in %s:", a.label(i), verb, plural(len(uses), "place", "places"), plural(len(groups), "file", "files"))
	}
	var by []string
	for j, g := range groups {
		if j >= 4 {
			by = append(by, fmt.Sprintf("and %s more", plural(len(groups)-j, "file", "files")))
			break
		}
		by = append(by, fmt.Sprintf("%s (%s)", code(g.f.Path), usersOf(g.f, g.uses)))
	}
	a.r.say("%s.", strings.Join(by, ", "))
	for _, g := range groups {
		for _, u := range g.uses {
			ref := u.Ref()
			how := "uses it"
			if ref.Call {
				how = "calls it"
			}
			who := enclosingName(g.f, ref.Def)
			if d := decorated(u); d != "" {
				who, how = code("@"+ref.Name), "decorates "+code(d)
			}
			a.r.point("%s: %s %s", at(g.f.Path, ref.Line), who, how)
			a.r.cite(g.f, ref.Line, ref.Line)
		}
	}
	if len(defs) > 0 {
		a.r.point("declared in %s", at(defs[0].File.Path, defs[0].Def().Line))
	}
	return true, ""
}

// decorated returns the definition a use decorates (Python), or "".
func decorated(u index.RefRef) string {
	ref := u.Ref()
	for _, d := range u.File.Defs {
		if d.Start == ref.Line && d.Line > ref.Line {
			for _, dec := range d.Decorators {
				if dec == ref.Name || strings.HasSuffix(dec, "."+ref.Name) {
					return d.Name
				}
			}
		}
	}
	return ""
}

// usersOf names the definitions that hold the uses, with their lines.
func usersOf(f *index.File, uses []index.RefRef) string {
	var parts []string
	seen := map[string]int{}
	var order []string
	linesOf := map[string][]string{}
	for _, u := range uses {
		who := enclosingName(f, u.Ref().Def)
		if d := decorated(u); d != "" {
			who = "decorating " + code(d)
		}
		if _, ok := seen[who]; !ok {
			seen[who] = len(order)
			order = append(order, who)
		}
		linesOf[who] = append(linesOf[who], fmt.Sprint(u.Ref().Line))
	}
	for _, who := range order {
		l := linesOf[who]
		word := "line"
		if len(l) > 1 {
			word = "lines"
		}
		parts = append(parts, fmt.Sprintf("%s, %s %s", who, word, strings.Join(l, ", ")))
	}
	return strings.Join(parts, "; ")
}

func (a *answerer) callees() (bool, string) {
	i := a.firstDefined(index.KindFunc, index.KindMethod, index.KindTest)
	if i < 0 {
		return false, "the question names no function of the head commit"
	}
	d := a.defsOf(i)[0]
	def := d.Def()
	var names []string
	seen := map[string]bool{}
	for _, ref := range d.File.Refs {
		if ref.Call && ref.Def == d.I && !seen[ref.Name] {
			seen[ref.Name] = true
			names = append(names, ref.Name)
			where := ""
			if pd, ok := a.primary(ref.Name); ok {
				where = ", declared in " + at(pd.File.Path, pd.Def().Line)
			}
			a.r.point("%s: calls %s%s", at(d.File.Path, ref.Line), code(ref.Name), where)
			a.r.cite(d.File, ref.Line, ref.Line)
		}
	}
	if len(names) == 0 {
		a.r.say("%s (%s) calls nothing declared in the head commit.", code(def.QualName()), lines(d.File.Path, def.Start, def.End))
		a.r.citeDef(d)
		return true, ""
	}
	quoted := make([]string, len(names))
	for j, n := range names {
		quoted[j] = code(n)
	}
	a.r.say("%s calls %s.", code(def.QualName()), joinAnd(quoted))
	return true, ""
}

// typeTarget returns the first target that names a type, class or
// interface, with its definitions.
func (a *answerer) typeTarget() (int, []index.DefRef) {
	for i := range a.q.targets {
		var out []index.DefRef
		for _, d := range a.defsOf(i) {
			switch d.Def().Kind {
			case index.KindType, index.KindInterface, index.KindClass:
				out = append(out, d)
			}
		}
		if len(out) > 0 {
			return i, out
		}
	}
	return -1, nil
}

func (a *answerer) implements() (bool, string) {
	i, defs := a.typeTarget()
	if i < 0 {
		return false, "the question names no type, class or interface of the head commit"
	}
	name := a.q.targets[i]
	if ok := a.implementsPair(); ok {
		return true, ""
	}
	asIface, asType := a.ix.Implementations(name), a.ix.Satisfied(name)
	isIface := defs[0].Def().Kind == index.KindInterface || len(asIface) > 0 && !a.q.has("does "+strings.ToLower(name)+" ", "what does", "which interfaces")
	if isIface {
		var yes, no []string
		for j, s := range asIface {
			var t index.DefRef
			if j < 12 {
				t = a.typeDef(s.Type, s.TypePath) // the rest are counted, not shown
			}
			if len(s.Missing) > 0 {
				no = append(no, fmt.Sprintf("%s (lacks %s)", code(s.Type), codeList(s.Missing)))
				if t.File != nil {
					a.r.point("%s: %s does not implement %s: it lacks %s", at(t.File.Path, t.Def().Line), code(s.Type), code(name), codeList(s.Missing))
					a.r.cite(t.File, t.Def().Line, t.Def().Line)
				}
				continue
			}
			label := code(s.Type)
			how := "has all its methods"
			if s.Pointer {
				label = code("*" + s.Type)
				how = "its methods have pointer receivers, so only the pointer type implements it"
			}
			if s.Declared {
				how = "declares it"
			}
			yes = append(yes, label)
			if t.File != nil {
				a.r.point("%s: %s implements %s: %s", at(t.File.Path, t.Def().Line), label, code(name), how)
				a.r.cite(t.File, t.Def().Line, t.Def().Line)
			}
		}
		if len(yes) == 0 {
			a.r.say("No type in the head commit implements %s.", code(name))
		} else {
			a.r.say("%s %s %s.", joinAnd(capList(yes, 8)), pluralVerb(len(yes), "implements", "implement"), code(name))
		}
		if len(no) > 0 {
			a.r.say("%s some of its methods but not all: %s.", plural(len(no), "type has", "types have"), strings.Join(capList(no, 8), ", "))
		}
		a.r.capPoints(12)
		def := defs[0].Def()
		if len(def.Methods) > 0 {
			a.r.point("%s: %s declares %s", at(defs[0].File.Path, def.Line), code(name), codeList(def.Methods))
		}
		return true, ""
	}
	var yes, no []string
	for j, s := range asType {
		var in index.DefRef
		if j < 12 {
			in = a.typeDef(s.Interface, s.InterfacePath) // the rest are counted, not shown
		}
		if len(s.Missing) > 0 {
			no = append(no, fmt.Sprintf("%s (lacks %s)", code(s.Interface), codeList(s.Missing)))
			if in.File != nil {
				a.r.point("%s: %s has not all of %s's methods: it lacks %s", at(in.File.Path, in.Def().Line), code(name), code(s.Interface), codeList(s.Missing))
				a.r.cite(in.File, in.Def().Line, in.Def().Line)
			}
			continue
		}
		label := code(s.Interface)
		if s.Pointer {
			label += fmt.Sprintf(" (as %s)", code("*"+name))
		}
		yes = append(yes, label)
		if in.File != nil {
			a.r.point("%s: %s declares %s", at(in.File.Path, in.Def().Line), code(s.Interface), codeList(in.Def().Methods))
			a.r.cite(in.File, in.Def().Line, in.Def().Line)
		}
	}
	def := defs[0].Def()
	if len(yes) == 0 {
		a.r.say("%s implements no interface of the head commit.", code(name))
	} else {
		a.r.say("%s implements %s.", code(name), joinAnd(capList(yes, 8)))
	}
	if len(no) > 0 {
		a.r.say("It does not implement %s.", strings.Join(capList(no, 8), ", "))
	}
	a.r.capPoints(12)
	if len(def.Bases) > 0 {
		a.r.say("It extends %s.", codeList(def.Bases))
	}
	a.r.point("%s: %s has the methods %s", at(defs[0].File.Path, def.Line), code(name), codeList(def.Methods))
	a.r.cite(defs[0].File, def.Line, def.Line)
	return true, ""
}

// implementsPair answers "does T implement I" when the question names a
// type and an interface.
func (a *answerer) implementsPair() bool {
	var types, ifaces []string
	for i := range a.q.targets {
		if defs := a.defsOf(i); len(defs) > 0 {
			switch d := defs[0].Def(); d.Kind {
			case index.KindInterface:
				ifaces = append(ifaces, d.Name)
			case index.KindType, index.KindClass:
				types = append(types, d.Name)
			}
		}
	}
	if len(types) == 0 || len(ifaces) == 0 {
		return false
	}
	t, in := types[0], ifaces[0]
	for _, s := range a.ix.Satisfied(t) {
		if s.Interface != in {
			continue
		}
		td, id := a.typeDef(s.Type, s.TypePath), a.typeDef(s.Interface, s.InterfacePath)
		switch {
		case len(s.Missing) > 0:
			a.r.say("No: %s does not implement %s: it lacks %s.", code(t), code(in), codeList(s.Missing))
		case s.Pointer:
			a.r.say("Yes, as a pointer: %s implements %s, %s does not (its methods have pointer receivers).", code("*"+t), code(in), code(t))
		default:
			a.r.say("Yes: %s implements %s.", code(t), code(in))
		}
		if td.File != nil {
			a.r.point("%s: %s has the methods %s", at(td.File.Path, td.Def().Line), code(t), codeList(td.Def().Methods))
			a.r.cite(td.File, td.Def().Line, td.Def().Line)
		}
		if id.File != nil {
			a.r.point("%s: %s declares %s", at(id.File.Path, id.Def().Line), code(in), codeList(id.Def().Methods))
			a.r.cite(id.File, id.Def().Line, id.Def().Line)
		}
		return true
	}
	a.r.say("No: %s does not implement %s; it has not even most of its methods.", code(t), code(in))
	for _, n := range []string{t, in} {
		if d, ok := a.primary(n); ok {
			a.r.point("%s: %s has the methods %s", at(d.File.Path, d.Def().Line), code(n), codeList(d.Def().Methods))
			a.r.cite(d.File, d.Def().Line, d.Def().Line)
		}
	}
	return true
}

// typeDef finds the definition of a type by name in a file.
func (a *answerer) typeDef(name, path string) index.DefRef {
	for _, d := range a.ix.Defs(name) {
		if d.File.Path == path {
			switch d.Def().Kind {
			case index.KindType, index.KindInterface, index.KindClass:
				return d
			}
		}
	}
	return index.DefRef{}
}

func (a *answerer) methods() (bool, string) {
	i, defs := a.typeTarget()
	if i < 0 {
		return false, "the question names no type, class or interface of the head commit"
	}
	d := defs[0]
	def := d.Def()
	if len(def.Methods) == 0 {
		a.r.say("%s (%s) has no methods.", code(def.Name), at(d.File.Path, def.Line))
		a.r.cite(d.File, def.Line, def.Line)
		return true, ""
	}
	a.r.say("%s has %s: %s.", code(def.Name), plural(len(def.Methods), "method", "methods"), codeList(def.Methods))
	for _, m := range def.Methods {
		for _, md := range a.ix.Defs(m) {
			if md.Def().Parent == def.Name {
				a.r.point("%s: %s", at(md.File.Path, md.Def().Line), code(md.Def().Signature))
				a.r.cite(md.File, md.Def().Line, md.Def().Line)
				break
			}
		}
	}
	return true, ""
}

// changeLines groups line numbers into ranges: 12-14, 20.
func changeLines(ls []int) [][2]int {
	var out [][2]int
	for _, l := range ls {
		if n := len(out); n > 0 && out[n-1][1]+1 == l {
			out[n-1][1] = l
			continue
		}
		out = append(out, [2]int{l, l})
	}
	return out
}

func rangesText(rs [][2]int) string {
	var parts []string
	for _, r := range rs {
		if r[0] == r[1] {
			parts = append(parts, fmt.Sprint(r[0]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", r[0], r[1]))
		}
	}
	return strings.Join(parts, ", ")
}

// describeChange says what the PR did to one definition, and cites it.
func (a *answerer) describeChange(c index.Change) string {
	name := code(c.Name)
	if c.Parent != "" {
		name = code(c.Parent + "." + c.Name)
	}
	f := a.ix.File(c.Path)
	switch c.Kind {
	case "added":
		if f != nil {
			a.r.cite(f, c.Start, min(c.End, c.Start+14))
		}
		return fmt.Sprintf("%s %s is new (%s)", c.Def, name, lines(c.Path, c.Start, c.End))
	case "removed":
		return fmt.Sprintf("%s %s was removed (it was at %s in the base)", c.Def, name, lines(c.OldPath, c.OldStart, c.OldEnd))
	case "renamed":
		if f != nil {
			a.r.cite(f, c.Start, min(c.End, c.Start+14))
		}
		s := fmt.Sprintf("%s %s was renamed from %s (%s)", c.Def, name, code(c.OldName), lines(c.Path, c.Start, c.End))
		if c.OldPath != c.Path {
			s += fmt.Sprintf(", moved from %s", code(c.OldPath))
		}
		return s + changedLinesText(c)
	case "moved":
		if f != nil {
			a.r.cite(f, c.Start, min(c.End, c.Start+14))
		}
		return fmt.Sprintf("%s %s was moved from %s to %s", c.Def, name, code(c.OldPath), lines(c.Path, c.Start, c.End)) + changedLinesText(c)
	}
	rs := changeLines(c.Lines)
	if f != nil {
		for _, r := range rs {
			a.r.cite(f, r[0], r[1])
		}
		if len(rs) == 0 {
			a.r.cite(f, c.Start, c.Start)
		}
	}
	return fmt.Sprintf("%s %s changed (%s)", c.Def, name, lines(c.Path, c.Start, c.End)) + changedLinesText(c)
}

// changedLinesText says which lines of a changed definition are new.
func changedLinesText(c index.Change) string {
	rs := changeLines(c.Lines)
	s := ""
	if len(rs) == 1 && rs[0][0] == rs[0][1] {
		s = fmt.Sprintf(": line %d is new or changed", rs[0][0])
	} else if len(rs) > 0 {
		s = fmt.Sprintf(": lines %s are new or changed", rangesText(rs))
	}
	if c.Removed > 0 {
		if s == "" {
			s = ":"
		} else {
			s += ","
		}
		s += fmt.Sprintf(" %s of the base removed", plural(c.Removed, "line", "lines"))
	}
	return s
}

func (a *answerer) changes() (bool, string) {
	if a.ix.DiffErr != "" && len(a.ix.ChangedFiles) == 0 {
		return false, "I cannot read the PR's diff: " + a.ix.DiffErr
	}
	// One definition, or one file, or the whole PR.
	for i, name := range a.q.targets {
		var mine []index.Change
		for _, c := range a.ix.Changes {
			if c.Name == name || c.OldName == name {
				if a.q.quals[i] == "" || strings.EqualFold(c.Parent, a.q.quals[i]) {
					mine = append(mine, c)
				}
			}
		}
		if len(mine) == 0 && len(a.defsOf(i)) == 0 {
			continue
		}
		if len(mine) == 0 {
			d := a.defsOf(i)[0]
			a.r.say("The PR did not change %s (%s).", code(name), lines(d.File.Path, d.Def().Start, d.Def().End))
			a.r.cite(d.File, d.Def().Line, d.Def().Line)
			return true, ""
		}
		var parts []string
		for _, c := range mine {
			parts = append(parts, a.describeChange(c))
		}
		a.r.say("In this PR, the %s.", strings.Join(parts, "; the "))
		a.returnsInChange(mine)
		return true, ""
	}
	if len(a.q.files) > 0 {
		p := a.q.files[0]
		var cf *index.ChangedFile
		for k := range a.ix.ChangedFiles {
			if a.ix.ChangedFiles[k].Path == p || a.ix.ChangedFiles[k].OldPath == p {
				cf = &a.ix.ChangedFiles[k]
			}
		}
		if cf == nil {
			a.r.say("The PR did not change %s.", code(p))
			return true, ""
		}
		a.r.say("The PR %s %s (%s added or changed, %s removed).", statusVerb(cf.Status), code(p),
			plural(len(cf.Added), "line", "lines"), plural(cf.Removed, "line", "lines"))
		for _, c := range a.ix.Changes {
			if c.Path == cf.Path || c.Path == "" && c.OldPath == cf.OldPath {
				a.r.point("the %s", a.describeChange(c))
			}
		}
		if f := a.ix.File(cf.Path); f != nil && len(a.r.cites) == 0 {
			for _, r := range changeLines(cf.Added) {
				a.r.cite(f, r[0], r[1])
			}
		}
		return true, ""
	}
	if len(a.ix.ChangedFiles) == 0 {
		a.r.say("The PR changes nothing between its base and head commits.")
		return true, ""
	}
	count := map[string]int{}
	for _, c := range a.ix.Changes {
		count[c.Kind]++
	}
	var kinds []string
	for _, k := range []string{"changed", "added", "removed", "renamed", "moved"} {
		if count[k] > 0 {
			kinds = append(kinds, fmt.Sprintf("%d %s", count[k], k))
		}
	}
	a.r.say("The PR touches %s", plural(len(a.ix.ChangedFiles), "file", "files"))
	if len(kinds) > 0 {
		a.r.say("and, by definition, %s.", strings.Join(kinds, ", "))
	} else {
		a.r.say("and no definition.")
	}
	// Renames first: they are what a reviewer misses most.
	// Members of an added class or type are told with it.
	addedTypes := map[string]bool{}
	for _, c := range a.ix.Changes {
		if c.Kind == "added" && c.Parent == "" {
			addedTypes[c.Path+"\x00"+c.Name] = true
		}
	}
	var order []index.Change
	for _, c := range a.ix.Changes {
		if !(c.Kind == "added" && c.Parent != "" && addedTypes[c.Path+"\x00"+c.Parent]) {
			order = append(order, c)
		}
	}
	rank := map[string]int{"renamed": 0, "moved": 1, "removed": 2, "changed": 3, "added": 4}
	slices.SortStableFunc(order, func(x, y index.Change) int {
		rx, ry := rank[x.Kind], rank[y.Kind]
		if x.Def == index.KindTest {
			rx += 10
		}
		if y.Def == index.KindTest {
			ry += 10
		}
		return rx - ry
	})
	for j, c := range order {
		if j >= 16 {
			a.r.point("and %d more", len(order)-j)
			break
		}
		a.r.point("the %s", a.describeChange(c))
	}
	var added, deleted []string
	for _, cf := range a.ix.ChangedFiles {
		switch cf.Status {
		case "added":
			added = append(added, code(cf.Path))
		case "deleted":
			deleted = append(deleted, code(cf.OldPath))
		case "renamed":
			a.r.point("%s is renamed from %s", code(cf.Path), code(cf.OldPath))
		}
	}
	if len(added) > 0 {
		a.r.point("new files: %s", strings.Join(added, ", "))
	}
	if len(deleted) > 0 {
		a.r.point("deleted files: %s", strings.Join(deleted, ", "))
	}
	return true, ""
}

// returnsInChange adds the new guards and returns inside changed lines.
func (a *answerer) returnsInChange(cs []index.Change) {
	for _, c := range cs {
		f := a.ix.File(c.Path)
		if f == nil || len(c.Lines) == 0 {
			continue
		}
		for _, r := range f.Returns {
			if slices.Contains(c.Lines, r.Line) && len(r.Guards) > 0 && slices.Contains(c.Lines, r.Guards[0].Line) {
				a.r.point("new: %s %s when %s (%s)", code(r.Text), returnsVerb(r), code(r.Guards[0].Cond), lines(f.Path, r.Guards[0].Line, r.End))
			}
		}
	}
}

func statusVerb(s string) string {
	switch s {
	case "added":
		return "adds"
	case "deleted":
		return "deletes"
	case "renamed":
		return "renames"
	}
	return "modifies"
}

func (a *answerer) renamed() (bool, string) {
	if a.ix.DiffErr != "" && len(a.ix.ChangedFiles) == 0 {
		return false, "I cannot read the PR's diff: " + a.ix.DiffErr
	}
	var moves []index.Change
	for _, c := range a.ix.Changes {
		if c.Kind == "renamed" || c.Kind == "moved" {
			moves = append(moves, c)
		}
	}
	for i, name := range a.q.targets {
		var mine []index.Change
		for _, c := range moves {
			if c.Name == name || c.OldName == name {
				mine = append(mine, c)
			}
		}
		if len(mine) == 0 {
			if defs := a.defsOf(i); len(defs) > 0 {
				a.r.say("%s was not renamed or moved in this PR; it is declared in %s.", code(name), at(defs[0].File.Path, defs[0].Def().Line))
				a.r.cite(defs[0].File, defs[0].Def().Line, defs[0].Def().Line)
				return true, ""
			}
			continue
		}
		var parts []string
		for _, c := range mine {
			parts = append(parts, a.describeChange(c))
		}
		a.r.say("In this PR, the %s.", strings.Join(parts, "; the "))
		a.callersOfRename(mine)
		return true, ""
	}
	if len(moves) == 0 {
		a.r.say("The PR renames and moves no definition.")
		return true, ""
	}
	var parts []string
	for _, c := range moves {
		parts = append(parts, a.describeChange(c))
	}
	a.r.say("In this PR, the %s.", strings.Join(parts, "; the "))
	a.callersOfRename(moves)
	return true, ""
}

// callersOfRename says where a renamed definition is used under its new
// name, and whether the old name lingers.
func (a *answerer) callersOfRename(cs []index.Change) {
	for _, c := range cs {
		if c.Kind != "renamed" {
			continue
		}
		for _, u := range a.ix.Refs(c.Name) {
			a.r.point("%s: %s uses the new name %s", at(u.File.Path, u.Ref().Line), enclosingName(u.File, u.Ref().Def), code(c.Name))
		}
		if old := a.ix.Undefined(c.OldName); len(old) > 0 {
			a.r.point("the old name %s is still used at %s, where it is now undefined", code(c.OldName), at(old[0].File.Path, old[0].Ref().Line))
			a.r.cite(old[0].File, old[0].Ref().Line, old[0].Ref().Line)
		}
	}
}

func returnsVerb(r index.Return) string {
	if r.Raise {
		return "is raised"
	}
	return "is returned"
}

// failing reports whether a return yields a failure: it raises, or returns
// an error-looking name or a false/nil result under a guard.
func failing(r index.Return, lang string) bool {
	if r.Raise {
		return true
	}
	for _, n := range r.Names {
		l := strings.ToLower(n)
		if strings.HasPrefix(l, "err") || strings.HasSuffix(l, "error") || strings.HasSuffix(l, "exception") {
			return true
		}
	}
	if lang == "lua" && len(r.Guards) > 0 && (strings.HasPrefix(r.Text, "return false") || strings.HasPrefix(r.Text, "return nil")) {
		return true
	}
	return false
}

// guardText says on what path a return runs.
func guardText(r index.Return) string {
	if len(r.Guards) == 0 {
		return "unconditionally"
	}
	var parts []string
	for _, g := range r.Guards {
		if g.Else {
			parts = append(parts, code(g.Cond)+" is false")
		} else {
			parts = append(parts, code(g.Cond))
		}
	}
	return "when " + strings.Join(parts, " and ")
}

// citeReturn cites a return with its innermost guard.
func (a *answerer) citeReturn(f *index.File, r index.Return) {
	start := r.Line
	if len(r.Guards) > 0 && r.Guards[0].Line < r.Line && r.Line-r.Guards[0].Line <= 10 {
		start = r.Guards[0].Line
	} else if len(r.Guards) > 0 {
		a.r.cite(f, r.Guards[0].Line, r.Guards[0].End)
	}
	a.r.cite(f, start, r.End)
}

// literals are values a question may ask a function returns.
var literals = map[string]bool{"false": true, "true": true, "nil": true, "none": true, "null": true, "undefined": true}

// failVerb says "fails" as the question does: throws, raises, panics.
func failVerb(q *question) string {
	switch {
	case q.hasWord("throw", "throws"):
		return "throws"
	case q.hasWord("raise", "raises"):
		return "raises"
	case q.hasWord("panic", "panics"):
		return "panics"
	case q.hasWord("error", "errors"):
		return "returns an error"
	}
	return "fails"
}

func (a *answerer) whyReturn() (bool, string) {
	fi := a.firstDefined(index.KindFunc, index.KindMethod)
	// The value asked about: another target, else a failure.
	value := ""
	for j, t := range a.q.targets {
		if j != fi {
			value = t
			break
		}
	}
	type hit struct {
		f *index.File
		r index.Return
	}
	var hits, all []hit
	if value == "" {
		// A literal the question names: return false, return None.
		for j, w := range a.q.words {
			if (w == "return" || w == "returns") && j+1 < len(a.q.words) && literals[a.q.words[j+1]] {
				value = a.q.words[j+1]
				if value == "none" {
					value = "None"
				}
			}
		}
	}
	unknown := false
	if value == "" {
		// An identifier the question names that the code does not know:
		// no return yields it, and the answer must not pretend otherwise.
		for _, tok := range tokenRE.FindAllString(a.q.text, -1) {
			if identLike(tok) && !slices.Contains(a.q.targets, tok) && !a.ix.Known(tok) {
				value, unknown = tok, true
				break
			}
		}
	}
	match := func(f *index.File, r index.Return) bool {
		if value != "" {
			return slices.Contains(r.Names, value) || strings.Contains(r.Text, value)
		}
		return failing(r, f.Lang)
	}
	var fn index.DefRef
	if fi >= 0 {
		for _, d := range a.defsOf(fi) {
			if k := d.Def().Kind; k == index.KindFunc || k == index.KindMethod {
				fn = d
				break
			}
		}
		for _, r := range fn.File.Returns {
			if r.Def != fn.I {
				continue
			}
			all = append(all, hit{fn.File, r})
			if match(fn.File, r) {
				hits = append(hits, hit{fn.File, r})
			}
		}
	} else if value != "" {
		for _, f := range a.ix.Files {
			for _, r := range f.Returns {
				if match(f, r) {
					hits = append(hits, hit{f, r})
				}
			}
		}
	} else {
		return false, "the question names no function of the head commit"
	}
	subject := "it"
	if fn.File != nil {
		subject = code(fn.Def().QualName())
	}
	what := failVerb(a.q)
	if value != "" {
		what = "returns " + code(value)
	}
	if len(hits) == 0 {
		if fn.File == nil {
			return false, fmt.Sprintf("no return statement of the head commit yields %s", code(value))
		}
		if value != "" {
			a.r.say("No return statement of %s yields %s.", subject, code(value))
			if unknown {
				a.r.say("Nothing in the head commit declares or uses %s.", code(value))
			}
		} else {
			a.r.say("%s has no return that raises or returns an error.", subject)
		}
		if len(all) > 0 {
			a.r.say("Its returns are:")
		}
		for j, h := range all {
			if j >= 6 {
				break
			}
			a.r.point("%s: %s %s", at(h.f.Path, h.r.Line), code(h.r.Text), guardText(h.r))
			a.citeReturn(h.f, h.r)
		}
		if len(all) == 0 {
			a.r.citeDef(fn)
		}
		return true, ""
	}
	first := hits[0]
	in := subject
	if fn.File == nil {
		in = enclosingName(first.f, first.r.Def)
	}
	verb := what
	if value != "" && first.r.Raise {
		verb = "raises " + code(value)
	}
	who := subject
	if fn.File == nil {
		who = in
	}
	if len(first.r.Guards) > 0 {
		a.r.say("%s %s %s: the guard on %s leads to %s on %s.", who, verb, guardText(first.r), at(first.f.Path, first.r.Guards[0].Line),
			code(first.r.Text), lineWord(first.f.Path, first.r.Line, first.r.Guards[0].Line))
	} else {
		a.r.say("%s %s %s (%s).", who, verb, guardText(first.r), at(first.f.Path, first.r.Line))
	}
	if len(hits) > 1 {
		a.r.say("It does so in %s in all.", plural(len(hits), "place", "places"))
	}
	for j, h := range hits {
		if j >= 6 {
			a.r.point("and %d more", len(hits)-j)
			break
		}
		who := ""
		if fn.File == nil {
			who = " in " + enclosingName(h.f, h.r.Def)
		}
		a.r.point("%s%s: %s %s", lines(h.f.Path, guardStart(h.r), h.r.End), who, code(h.r.Text), guardText(h.r))
		a.citeReturn(h.f, h.r)
	}
	if value != "" && len(a.ix.Defs(value)) == 0 {
		if u := a.ix.Undefined(value); len(u) > 0 {
			a.r.say("Note that %s is declared nowhere in the head commit: type checking finds it undefined, so the package does not compile as the PR stands.", code(value))
		}
	} else if d, ok := a.primary(value); ok && value != "" {
		a.r.point("%s is declared in %s: %s", code(value), at(d.File.Path, d.Def().Line), code(d.Def().Signature))
	}
	return true, ""
}

func guardStart(r index.Return) int {
	if len(r.Guards) > 0 && r.Guards[0].Line < r.Line {
		return r.Guards[0].Line
	}
	return r.Line
}

// lineWord says "line n", or "the next line" when n follows the guard.
func lineWord(path string, n, guard int) string {
	if n == guard+1 {
		return fmt.Sprintf("the next line (%d)", n)
	}
	return fmt.Sprintf("line %d", n)
}

// emptyWords say the question asks about an empty value.
var emptyWords = []string{"empty", "blank", "nil", "none", "null", "missing", "zero", "unset"}

func (a *answerer) when() (bool, string) {
	// The names the question's condition is about: the words after
	// "when" or "if" that some guard mentions.
	words := a.q.words
	for j, w := range words {
		if w == "when" || w == "if" {
			words = words[j+1:]
			break
		}
	}
	empty := a.q.hasWord(emptyWords...)
	type hit struct {
		f *index.File
		r index.Return
	}
	// Only the best-scoring guards are kept: on a large checkout many
	// may test the same name.
	var top []hit
	best := 0
	for _, f := range a.ix.Files {
		for _, r := range f.Returns {
			if len(r.Guards) == 0 {
				continue
			}
			g := r.Guards[0]
			score := 0
			for _, w := range words {
				for _, n := range g.Names {
					if strings.EqualFold(n, w) {
						score += 2
					}
				}
			}
			if score == 0 {
				continue
			}
			if empty && slices.Contains(g.Names, `""`) || empty && (strings.Contains(g.Cond, "nil") || strings.Contains(g.Cond, "None") || strings.Contains(g.Cond, "len(")) {
				score += 2
			}
			if g.Else {
				score--
			}
			switch {
			case score > best:
				best, top = score, []hit{{f, r}}
			case score == best:
				top = append(top, hit{f, r})
			}
		}
	}
	if len(top) == 0 {
		return false, "no condition in the head commit tests what the question names"
	}
	h := top[0]
	g := h.r.Guards[0]
	cond := code(g.Cond)
	if g.Else {
		cond += " is false"
	}
	a.r.say("When %s, %s %s %s: the guard on %s leads to %s.", cond, enclosingName(h.f, h.r.Def), returnsWord(h.r), code(returnedValue(h.r)),
		at(h.f.Path, g.Line), code(h.r.Text))
	if len(top) > 1 {
		a.r.say("%s test the same condition.", plural(len(top)-1, "other place", "other places"))
	}
	for j, h := range top {
		if j >= 5 {
			break
		}
		a.r.point("%s, in %s: %s %s", lines(h.f.Path, guardStart(h.r), h.r.End), enclosingName(h.f, h.r.Def), code(h.r.Text), guardText(h.r))
		a.citeReturn(h.f, h.r)
	}
	return true, ""
}

func returnsWord(r index.Return) string {
	if r.Raise {
		return "raises"
	}
	return "returns"
}

// returnedValue is what a return statement yields, without its keyword.
func returnedValue(r index.Return) string {
	t := r.Text
	for _, kw := range []string{"return ", "raise ", "throw ", "panic"} {
		if strings.HasPrefix(t, kw) {
			return strings.TrimSpace(strings.TrimPrefix(t, kw))
		}
	}
	return t
}

func (a *answerer) focused() (bool, string) {
	if len(a.focus) == 0 {
		return false, "the question has no focus to read"
	}
	anc := a.focus[0]
	f := a.ix.File(anc.Path)
	if f == nil {
		return false, fmt.Sprintf("%s is not a source file the structure reads", code(anc.Path))
	}
	start, end := anc.StartLine, max(anc.EndLine, anc.StartLine)
	if start == 0 {
		// A whole file: what it declares.
		var names []string
		for _, d := range f.Defs {
			if d.Parent == "" && !strings.HasPrefix(d.Name, "(") {
				names = append(names, code(d.Name))
			}
		}
		a.r.say("%s declares %s.", code(f.Path), joinAnd(names))
		a.r.cite(f, 1, min(f.Lines, 10))
		return true, ""
	}
	di := f.Enclosing(start)
	if di < 0 {
		di = f.EnclosingAny(start)
	}
	a.r.cite(f, start, end)
	if di < 0 {
		a.r.say("Lines %d-%d of %s are outside any function.", start, end, code(f.Path))
	} else {
		d := &f.Defs[di]
		a.r.say("Lines %d-%d of %s are in %s (%s).", start, end, code(f.Path), what(d), lines(f.Path, d.Start, d.End))
	}
	var calls []string
	seen := map[string]bool{}
	for _, r := range f.Refs {
		if r.Line >= start && r.Line <= end && r.Call && !seen[r.Name] {
			seen[r.Name] = true
			calls = append(calls, code(r.Name))
		}
	}
	if len(calls) > 0 {
		a.r.say("The range calls %s.", joinAnd(calls))
	}
	for _, r := range f.Returns {
		if r.Line >= start && r.Line <= end {
			a.r.point("%s: %s %s", at(f.Path, r.Line), code(r.Text), guardText(r))
		}
	}
	for _, cf := range a.ix.ChangedFiles {
		if cf.Path != f.Path {
			continue
		}
		var in []int
		for _, l := range cf.Added {
			if l >= start && l <= end {
				in = append(in, l)
			}
		}
		if len(in) > 0 {
			a.r.say("The PR added or changed lines %s of the range.", rangesText(changeLines(in)))
		} else {
			a.r.say("The PR did not change these lines.")
		}
	}
	return true, ""
}

func (a *answerer) tested() (bool, string) {
	i := -1
	for j := range a.q.targets {
		if len(a.defsOf(j)) > 0 {
			i = j
			break
		}
	}
	if i < 0 {
		return false, "the question names nothing the head commit declares"
	}
	name := a.q.targets[i]
	type hit struct {
		f    *index.File
		test int
		line int
	}
	var direct []hit
	seen := map[string]bool{}
	for _, u := range a.usesOf(i) {
		if !u.File.Test {
			continue
		}
		t := testOf(u.File, u.Ref().Def)
		key := fmt.Sprintf("%s:%d", u.File.Path, t)
		if seen[key] {
			continue
		}
		seen[key] = true
		direct = append(direct, hit{u.File, t, u.Ref().Line})
	}
	if len(direct) > 0 {
		var names []string
		for _, h := range direct {
			label := "a test file"
			if h.test >= 0 {
				label = code(h.f.Defs[h.test].Name)
			}
			names = append(names, fmt.Sprintf("%s (%s)", label, code(h.f.Path)))
		}
		a.r.say("Yes: %s is tested by %s.", a.label(i), joinAnd(names))
		for _, h := range direct {
			if h.test >= 0 {
				d := h.f.Defs[h.test]
				a.r.point("%s: %s uses %s on line %d", lines(h.f.Path, d.Start, d.End), what(&d), code(name), h.line)
				if h.line-d.Start <= 12 {
					a.r.cite(h.f, d.Start, h.line)
				} else {
					a.r.cite(h.f, d.Start, d.Start)
					a.r.cite(h.f, h.line, h.line)
				}
			} else {
				a.r.point("%s uses %s", at(h.f.Path, h.line), code(name))
				a.r.cite(h.f, h.line, h.line)
			}
		}
		return true, ""
	}
	// Not directly: tests of its callers.
	var via []string
	for _, u := range a.usesOf(i) {
		if u.File.Test || u.Ref().Def < 0 {
			continue
		}
		caller := u.File.Defs[u.Ref().Def]
		if caller.Parent == name {
			continue // its own method
		}
		for _, cu := range a.ix.Refs(caller.Name) {
			if t := cu.Ref().Target; t != "" && t != caller.QualName() {
				continue
			}
			if cu.File.Test {
				t := testOf(cu.File, cu.Ref().Def)
				label := code(cu.File.Path)
				if t >= 0 {
					label = code(cu.File.Defs[t].Name)
				}
				via = append(via, fmt.Sprintf("%s calls %s, which uses it", label, code(caller.Name)))
				a.r.cite(cu.File, cu.Ref().Line, cu.Ref().Line)
				break
			}
		}
	}
	d := a.defsOf(i)[0]
	if len(via) > 0 {
		a.r.say("No test uses %s directly, but tests reach it through its callers: %s.", code(name), strings.Join(via, "; "))
		return true, ""
	}
	a.r.say("No: no test in the head commit uses %s, directly or through its callers.", code(name))
	a.r.point("%s is declared in %s", code(name), at(d.File.Path, d.Def().Line))
	a.r.cite(d.File, d.Def().Line, d.Def().Line)
	return true, ""
}

// testOf returns the test (or outermost definition) that holds def.
func testOf(f *index.File, def int) int {
	if def < 0 {
		return -1
	}
	d := f.Defs[def]
	best := -1
	for i, t := range f.Defs {
		if t.Kind == index.KindTest && t.Start <= d.Start && t.End >= d.End {
			if best < 0 || t.End-t.Start < f.Defs[best].End-f.Defs[best].Start {
				best = i
			}
		}
	}
	if best >= 0 {
		return best
	}
	return def
}

func (a *answerer) describe() (bool, string) {
	i := a.firstDefined()
	if i < 0 {
		for _, name := range a.q.targets {
			if len(a.ix.Undefined(name)) > 0 {
				a.undeclared(name)
				return true, ""
			}
		}
		if a.gone() {
			return true, ""
		}
		return false, "the question names nothing the head commit declares"
	}
	d := a.defsOf(i)[0]
	def := d.Def()
	a.r.say("%s is a %s declared in %s.", code(def.QualName()), def.Kind, lines(d.File.Path, def.Start, def.End))
	a.r.citeDef(d)
	var calls []string
	seen := map[string]bool{}
	for _, ref := range d.File.Refs {
		if ref.Call && ref.Def == d.I && !seen[ref.Name] {
			seen[ref.Name] = true
			calls = append(calls, code(ref.Name))
		}
	}
	if len(calls) > 0 {
		a.r.say("It calls %s.", joinAnd(calls))
	}
	for _, r := range d.File.Returns {
		if r.Def == d.I {
			a.r.point("%s: %s %s", at(d.File.Path, r.Line), code(r.Text), guardText(r))
		}
	}
	if len(def.Methods) > 0 {
		a.r.say("Its methods are %s.", codeList(def.Methods))
	}
	if n := len(a.usesOf(i)); n > 0 {
		a.r.say("The head commit uses it in %s.", plural(n, "place", "places"))
	}
	for _, c := range a.ix.Changes {
		if c.Name == def.Name && c.Path == d.File.Path {
			a.r.point("in this PR, the %s", a.describeChange(c))
		}
	}
	return true, ""
}

// capList keeps the first n items and says how many more there are.
func capList(items []string, n int) []string {
	if len(items) <= n {
		return items
	}
	return append(slices.Clone(items[:n]), fmt.Sprintf("%d more", len(items)-n))
}

// capPoints keeps the first n points of evidence.
func (r *reply) capPoints(n int) {
	if len(r.evidence) > n {
		more := len(r.evidence) - n
		r.evidence = append(r.evidence[:n], fmt.Sprintf("and %d more", more))
	}
}

func codeList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = code(n)
	}
	return joinAnd(q)
}

func joinAnd(items []string) string {
	switch len(items) {
	case 0:
		return "nothing"
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

func pluralVerb(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
