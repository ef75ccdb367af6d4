package mask

// keyword is one literal the prefilter looks for. The automaton matches it
// ASCII case-insensitively; the rule's matcher checks exact case where the
// format needs it.
type keyword struct {
	lit  string // literal as written in the rule (or the own secret's bytes)
	rule uint16 // index into the masker's matcher table
}

// automaton is a byte-level Aho–Corasick automaton over ASCII-folded input,
// compiled into a dense transition table. It is immutable once built and safe
// for concurrent use.
type automaton struct {
	cls  [256]uint8 // byte -> equivalence class (0: byte occurs in no keyword)
	ncls uint32     // number of classes
	// delta[st+class] is the next state; states are stored pre-multiplied by
	// ncls so the hot loop needs no multiplication.
	delta []uint32
	// States with at least one keyword ending in them are numbered last, so a
	// single comparison st >= outBase detects a hit.
	outBase uint32
	// For a state index q (= st/ncls), outs[outStart[q]:outStart[q+1]] lists
	// the keywords (indices into kws) that end there, longest first.
	outStart []uint32
	outs     []uint32
	depth    []uint16 // depth[q]: length of the longest keyword prefix that is a suffix of the input read so far
	kws      []keyword
	maxLen   int
	// st/ncls is (st>>shift)*inv (mod 2^32): st is a multiple of ncls,
	// and a multiplication is much cheaper than a division
	shift, inv uint32
}

// index returns the state index q of the pre-multiplied state st
// (st/ncls).
func (a *automaton) index(st uint32) uint32 { return (st >> a.shift) * a.inv }

// next runs the automaton over s from position i in state st up to the
// first byte that ends a keyword. It returns the position after that byte
// and the state there (st >= outBase), or len(s) and the state at the end.
// It is kept out of its callers so that the loop runs in registers.
//
//go:noinline
func (a *automaton) next(s string, i int, st uint32) (int, uint32) {
	delta, cls, outBase := a.delta, &a.cls, a.outBase
	for i < len(s) {
		st = delta[st+uint32(cls[s[i]])]
		i++
		if st >= outBase {
			break
		}
	}
	return i, st
}

// lowerByte[b] is fold(b).
var lowerByte = func() (t [256]byte) {
	for b := range t {
		t[b] = fold(byte(b))
	}
	return t
}()

func fold(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}

// newAutomaton compiles kws. Empty keywords are ignored.
func newAutomaton(kws []keyword) *automaton {
	a := &automaton{kws: kws}
	// Byte classes.
	var used [256]bool
	for _, k := range kws {
		for i := 0; i < len(k.lit); i++ {
			used[fold(k.lit[i])] = true
		}
		if len(k.lit) > a.maxLen {
			a.maxLen = len(k.lit)
		}
	}
	n := uint32(1)
	for b := 0; b < 256; b++ {
		if used[b] {
			a.cls[b] = uint8(n)
			n++
		}
	}
	for b := 'A'; b <= 'Z'; b++ {
		a.cls[b] = a.cls[b+'a'-'A']
	}
	a.ncls = n

	// Trie with dense child rows (-1: no child).
	children := [][]int32{newRow(n)}
	var depth []uint16 = []uint16{0}
	var own [][]uint32 = [][]uint32{nil}
	for ki, k := range kws {
		if k.lit == "" {
			continue
		}
		q := int32(0)
		for i := 0; i < len(k.lit); i++ {
			c := a.cls[k.lit[i]]
			nx := children[q][c]
			if nx < 0 {
				nx = int32(len(children))
				children = append(children, newRow(n))
				d := depth[q] + 1
				depth = append(depth, d)
				own = append(own, nil)
				children[q][c] = nx
			}
			q = nx
		}
		own[q] = append(own[q], uint32(ki))
	}
	states := len(children)

	// Breadth-first: failure links, full transition function, output sets.
	fail := make([]int32, states)
	outsets := make([][]uint32, states)
	order := make([]int32, 0, states)
	order = append(order, 0)
	for c := uint32(0); c < n; c++ {
		if children[0][c] < 0 {
			children[0][c] = 0
		} else {
			fail[children[0][c]] = 0
			order = append(order, children[0][c])
		}
	}
	outsets[0] = own[0]
	for h := 1; h < len(order); h++ {
		q := order[h]
		outsets[q] = append(append([]uint32(nil), own[q]...), outsets[fail[q]]...)
		for c := uint32(0); c < n; c++ {
			nx := children[q][c]
			if nx < 0 {
				children[q][c] = children[fail[q]][c]
				continue
			}
			fail[nx] = children[fail[q]][c]
			order = append(order, nx)
		}
	}
	// Sort each output set longest keyword first (stable, tiny sets).
	for q := range outsets {
		o := outsets[q]
		for i := 1; i < len(o); i++ {
			for j := i; j > 0 && len(kws[o[j]].lit) > len(kws[o[j-1]].lit); j-- {
				o[j], o[j-1] = o[j-1], o[j]
			}
		}
	}

	// Renumber: states without output first (root stays 0).
	newID := make([]uint32, states)
	next := uint32(0)
	for q := 0; q < states; q++ {
		if len(outsets[q]) == 0 {
			newID[q] = next
			next++
		}
	}
	a.outBase = next * n
	for q := 0; q < states; q++ {
		if len(outsets[q]) != 0 {
			newID[q] = next
			next++
		}
	}
	a.delta = make([]uint32, uint32(states)*n)
	a.depth = make([]uint16, states)
	a.outStart = make([]uint32, states+1)
	byNew := make([]int, states)
	for q := 0; q < states; q++ {
		byNew[newID[q]] = q
	}
	for nq := 0; nq < states; nq++ {
		q := byNew[nq]
		a.depth[nq] = depth[q]
		for c := uint32(0); c < n; c++ {
			a.delta[uint32(nq)*n+c] = newID[children[q][c]] * n
		}
		a.outStart[nq] = uint32(len(a.outs))
		a.outs = append(a.outs, outsets[q]...)
	}
	a.outStart[states] = uint32(len(a.outs))
	// ncls = odd << shift; inv is odd's inverse modulo 2^32 (Newton's
	// iteration doubles the correct low bits each step)
	odd := n
	for odd%2 == 0 {
		odd /= 2
		a.shift++
	}
	inv := odd
	for range 5 {
		inv *= 2 - odd*inv
	}
	a.inv = inv
	for q := uint32(0); q < uint32(states); q++ {
		if a.index(q*n) != q {
			panic("mask: automaton state index")
		}
	}
	return a
}

func newRow(n uint32) []int32 {
	r := make([]int32, n)
	for i := range r {
		r[i] = -1
	}
	return r
}
