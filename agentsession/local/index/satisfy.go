package index

import (
	"slices"
	"strings"
)

// Implementations returns the types that implement the interfaces named
// name, and those that have some of their methods but not all (with what
// they miss), in file order. Go types implement an interface when their
// method sets (T's, or *T's) hold every method with the same signature;
// classes when they declare it (implements, a base class) or have all its
// methods.
func (ix *Index) Implementations(name string) []Satisfaction {
	var out []Satisfaction
	for _, in := range ix.ifaces {
		if in.Def().Name != name {
			continue
		}
		for _, t := range ix.types {
			if s, ok := satisfies(t, in); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// Satisfied returns the interfaces the types named name implement, and
// those they implement but for some methods.
func (ix *Index) Satisfied(name string) []Satisfaction {
	var out []Satisfaction
	for _, t := range ix.types {
		if t.Def().Name != name {
			continue
		}
		for _, in := range ix.ifaces {
			if s, ok := satisfies(t, in); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// satisfies compares a type with an interface: ok when the type implements
// it or misses at most half of its methods.
func satisfies(t, in DefRef) (Satisfaction, bool) {
	td, id := t.Def(), in.Def()
	if td == id || langFamily(t.File.Lang) != langFamily(in.File.Lang) {
		return Satisfaction{}, false
	}
	s := Satisfaction{Type: td.Name, Interface: id.Name, TypePath: t.File.Path, InterfacePath: in.File.Path}
	if t.File.Lang == "go" {
		if id.Kind != KindInterface || len(id.Sigs) == 0 {
			return s, false
		}
		// sigOf finds the method named n in sigs ("Name (...) (...)").
		sigOf := func(sigs []string, n string) string {
			for _, sg := range sigs {
				if len(sg) > len(n) && sg[len(n)] == ' ' && strings.HasPrefix(sg, n) {
					return sg
				}
			}
			return ""
		}
		named := 0
		for _, want := range id.Sigs {
			n, _, _ := strings.Cut(want, " ")
			v, p := sigOf(td.Sigs, n), sigOf(td.PtrSigs, n)
			switch {
			case v == want:
				named++
			case p == want:
				named++
				s.Pointer = true
			case v != "" || p != "":
				named++
				s.Missing = append(s.Missing, n+" (with its signature)")
			default:
				s.Missing = append(s.Missing, n)
			}
		}
		if named == 0 || (len(id.Sigs)-named)*2 > len(id.Sigs) {
			return s, false
		}
		return s, true
	}
	s.Declared = slices.Contains(td.Implements, id.Name) || slices.Contains(td.Bases, id.Name)
	for _, m := range id.Methods {
		if !slices.Contains(td.Methods, m) {
			s.Missing = append(s.Missing, m)
		}
	}
	switch {
	case id.Kind == KindClass:
		// Only subclasses implement a base class, and they inherit what
		// they do not define.
		s.Missing = nil
		return s, s.Declared
	case s.Declared:
		return s, true
	}
	return s, len(id.Methods) > 0 && len(s.Missing) == 0
}
