// Package index is the structural index of a checkout that prchat's local
// backend answers from: the definitions, references, returns and guards of
// every source file, the method sets and interface satisfactions of its
// types, the names the code uses but never declares, and the pull
// request's changes mapped onto the enclosing definitions.
//
// Each language is read by a real parser, never by regular expressions:
//
//   - Go: go/parser and go/types, type checking every package of the
//     checkout from source with errors tolerated (imports from outside the
//     checkout stay unresolved). go/types' "undefined" errors are the names
//     declared nowhere in the checkout.
//   - Python: a recursive-descent parser of this package (python.go) over a
//     tokenizer with indentation, for statements, decorators, classes and
//     functions; expressions are read as token sequences.
//   - TypeScript and JavaScript: a recursive-descent parser of this package
//     (tsjs.go) over a tokenizer that knows strings, templates, comments and
//     regular expression literals; it reads declarations, classes,
//     interfaces, exports, arrow functions and statements, and reads
//     expressions and type annotations as token sequences.
//   - Lua: github.com/yuin/gopher-lua/parse, a pure-Go Lua 5.1 parser.
//
// No parser needs cgo: the Go module proxy offers no pure-Go TypeScript or
// current-Python parser (tree-sitter's bindings need cgo; gpython's parser
// knows Python 3.4 only, without f-strings or async), so those two are
// hand-written and tolerant: a construct they do not know is skipped to the
// end of its statement, not a failure of the file.
//
// An Index is built once per review head (Build) and saved next to the
// checkout (Save, Load), in gob encoding.
package index

import (
	"slices"
	"strings"
)

// Kinds of definitions.
const (
	KindFunc      = "function"
	KindMethod    = "method"
	KindType      = "type"
	KindInterface = "interface"
	KindClass     = "class"
	KindVar       = "variable"
	KindConst     = "constant"
	KindField     = "field"
	KindTest      = "test"
)

// Index is what the local backend knows of a checkout's structure.
type Index struct {
	// Head and Base are the commits the index describes (either may be
	// empty when the review names none).
	Head, Base string
	Files      []*File
	// Changes are the pull request's changes (base..head) by definition;
	// ChangedFiles the files it touched. DiffErr says why there is no diff
	// when there is none.
	Changes      []Change
	ChangedFiles []ChangedFile
	DiffErr      string
	// Bytes is how much source the build parsed.
	Bytes int64

	byName map[string][]DefRef
	refs   map[string][]RefRef
	undef  map[string][]UndefRef
	lower  map[string][]string
	files  map[string]*File
	// types and ifaces are the type and class definitions, and those
	// that can be implemented (interfaces, protocols, base classes).
	types, ifaces []DefRef
}

// File is the structure of one source file.
type File struct {
	Path  string
	Lang  string
	Lines int
	// Package is the Go package (or module) the file belongs to.
	Package string
	Defs    []Def
	Refs    []Ref
	Returns []Return
	// Undefined are uses of names declared nowhere in the checkout (Go).
	Undefined []Ref
	// Test says the file holds tests.
	Test bool
	// ParseErr is why the file could not be read (in full).
	ParseErr string
}

// Def is a definition.
type Def struct {
	Name string
	Kind string
	// Parent is the type or class a method or field belongs to.
	Parent string
	// Line is the line of the name; Start and End bound the definition.
	Line, Start, End int
	Exported         bool
	// Signature is the definition's first line, trimmed.
	Signature string
	// Bases are what a class extends or a type embeds; Implements what a
	// class declares it implements.
	Bases, Implements []string
	// Decorators are the names of a Python definition's decorators.
	Decorators []string
	// Methods are the methods of a type, class or interface (pointer
	// receivers included for Go).
	Methods []string
	// Sigs are, for Go, the methods with their signatures ("Get
	// (string) (string, error)"): an interface's, or those of T; PtrSigs
	// those *T adds.
	Sigs, PtrSigs []string
}

// Ref is a use of a name.
type Ref struct {
	Name string
	Line int
	// Call says the use calls it.
	Call bool
	// Qual is what the name is selected from (x in x.Name), if anything.
	Qual string
	// Target is, for Go, the definition the use resolves to, as
	// "Parent.Name" or "Name" (empty when unresolved).
	Target string
	// Def is the index in File.Defs of the innermost enclosing
	// definition, or -1.
	Def int
}

// Return is a return (or raise, throw, error) statement.
type Return struct {
	Line, End int
	// Def is the index in File.Defs of the enclosing function.
	Def int
	// Names are the identifiers the returned expression mentions.
	Names []string
	// Text is the statement, trimmed.
	Text string
	// Raise says it raises or throws rather than returns.
	Raise bool
	// Guards are the conditions on the path to the statement, innermost
	// first.
	Guards []Guard
}

// Guard is a condition a statement depends on.
type Guard struct {
	Line, End int
	Cond      string
	Names     []string
	// Else says the statement runs when the condition is false.
	Else bool
}

// Satisfaction says that a type implements an interface, or misses some
// of its methods (see Index.Implementations and Index.Satisfied).
type Satisfaction struct {
	Type, Interface string
	// TypePath and InterfacePath are the files they are declared in.
	TypePath, InterfacePath string
	// Pointer says only the pointer type implements it (Go).
	Pointer bool
	// Declared says the code names the interface (implements, a base
	// class) rather than only matching its methods.
	Declared bool
	// Missing are the interface's methods the type lacks (empty when it
	// implements it).
	Missing []string
}

// Change is what the pull request did to one definition.
type Change struct {
	// Kind: added, changed, removed, renamed or moved.
	Kind string
	Name string
	// Def is the definition's kind (function, method, ...).
	Def    string
	Parent string
	// Path and Start, End are the definition at the head (empty for a
	// removed one).
	Path       string
	Start, End int
	// OldName and OldPath are its name and file at the base, for renamed
	// and moved ones; OldStart and OldEnd its lines there.
	OldName, OldPath string
	OldStart, OldEnd int
	// Lines are the head lines the PR added or changed inside it.
	Lines []int
	// Removed counts the base lines removed inside it.
	Removed int
}

// ChangedFile is a file the pull request touched.
type ChangedFile struct {
	Path    string
	OldPath string
	// Status: added, deleted, modified or renamed.
	Status string
	// Added are the head lines added or changed; Removed counts the base
	// lines removed.
	Added   []int
	Removed int

	hunks []hunk
}

// DefRef names a definition of the index.
type DefRef struct {
	File *File
	I    int
}

// Def returns the definition.
func (d DefRef) Def() *Def { return &d.File.Defs[d.I] }

// RefRef names a use of the index.
type RefRef struct {
	File *File
	I    int
}

// Ref returns the use.
func (r RefRef) Ref() *Ref { return &r.File.Refs[r.I] }

// finish builds the lookup tables.
func (ix *Index) finish() {
	ix.byName = map[string][]DefRef{}
	ix.refs = map[string][]RefRef{}
	ix.files = map[string]*File{}
	ix.undef = map[string][]UndefRef{}
	ix.lower = map[string][]string{}
	slices.SortFunc(ix.Files, func(a, b *File) int { return strings.Compare(a.Path, b.Path) })
	for _, f := range ix.Files {
		ix.files[f.Path] = f
		for i := range f.Defs {
			ix.byName[f.Defs[i].Name] = append(ix.byName[f.Defs[i].Name], DefRef{f, i})
		}
		for i := range f.Refs {
			ix.refs[f.Refs[i].Name] = append(ix.refs[f.Refs[i].Name], RefRef{f, i})
		}
		for i := range f.Undefined {
			ix.undef[f.Undefined[i].Name] = append(ix.undef[f.Undefined[i].Name], UndefRef{f, i})
		}
	}
	ix.types, ix.ifaces = nil, nil
	bases := map[string]bool{}
	for _, f := range ix.Files {
		for i := range f.Defs {
			d := &f.Defs[i]
			for _, b := range d.Bases {
				bases[b] = true
			}
			for _, b := range d.Implements {
				bases[b] = true
			}
		}
	}
	for _, f := range ix.Files {
		for i := range f.Defs {
			switch d := &f.Defs[i]; d.Kind {
			case KindInterface:
				ix.ifaces = append(ix.ifaces, DefRef{f, i})
			case KindType, KindClass:
				ix.types = append(ix.types, DefRef{f, i})
				if d.Kind == KindClass && bases[d.Name] {
					ix.ifaces = append(ix.ifaces, DefRef{f, i})
				}
			}
		}
	}
	for name := range ix.byName {
		l := strings.ToLower(name)
		ix.lower[l] = append(ix.lower[l], name)
	}
	for name := range ix.undef {
		if _, ok := ix.byName[name]; !ok {
			l := strings.ToLower(name)
			ix.lower[l] = append(ix.lower[l], name)
		}
	}
	for _, names := range ix.lower {
		slices.Sort(names)
	}
}

// UndefRef names a use of an undeclared name.
type UndefRef struct {
	File *File
	I    int
}

// Ref returns the use.
func (u UndefRef) Ref() *Ref { return &u.File.Undefined[u.I] }

// Undefined returns the uses of name where it is declared nowhere.
func (ix *Index) Undefined(name string) []UndefRef { return ix.undef[name] }

// Fold returns the defined or undeclared names that equal name but for
// case.
func (ix *Index) Fold(name string) []string { return ix.lower[strings.ToLower(name)] }

// Defs returns the definitions named name, in file order.
func (ix *Index) Defs(name string) []DefRef { return ix.byName[name] }

// Refs returns the uses of name, in file order.
func (ix *Index) Refs(name string) []RefRef { return ix.refs[name] }

// File returns the file at path, or nil.
func (ix *Index) File(path string) *File { return ix.files[path] }

// Known reports whether name is defined or used anywhere in the index.
func (ix *Index) Known(name string) bool {
	return len(ix.byName[name]) > 0 || len(ix.refs[name]) > 0 || len(ix.undef[name]) > 0
}

// Names returns every defined name, for matching a question's words.
func (ix *Index) Names() []string {
	out := make([]string, 0, len(ix.byName))
	for n := range ix.byName {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Enclosing returns the index of the innermost definition of f that spans
// line and is a function, method or test, or -1.
func (f *File) Enclosing(line int) int {
	best := -1
	for i, d := range f.Defs {
		if !isCode(d.Kind) || line < d.Start || line > d.End {
			continue
		}
		if best < 0 || d.End-d.Start < f.Defs[best].End-f.Defs[best].Start {
			best = i
		}
	}
	return best
}

// EnclosingAny is Enclosing for any kind of definition.
func (f *File) EnclosingAny(line int) int {
	best := -1
	for i, d := range f.Defs {
		if line < d.Start || line > d.End {
			continue
		}
		if best < 0 || d.End-d.Start < f.Defs[best].End-f.Defs[best].Start {
			best = i
		}
	}
	return best
}

func isCode(kind string) bool { return kind == KindFunc || kind == KindMethod || kind == KindTest }

// QualName is Parent.Name, or Name.
func (d *Def) QualName() string {
	if d.Parent != "" {
		return d.Parent + "." + d.Name
	}
	return d.Name
}
