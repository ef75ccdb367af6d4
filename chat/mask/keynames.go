package mask

import "sync"

// The names a generic key is checked for, found in one pass over the
// normalised key (normKey.set) instead of one search per name: the
// words that make a key not secret (public, csrf, xsrf), the services
// contextualID knows, then the names of serviceDefs.
const (
	namePublic = iota
	nameCSRF
	nameXSRF
	nameAWS
	nameTwilio
	nameDatadog
	nameHeroku
	nameDiscord
	numFixedNames
)

var fixedNames = [numFixedNames]string{"public", "csrf", "xsrf", "aws", "twilio", "datadog", "heroku", "discord"}

// keyNameSet is the compiled set of key names: an automaton whose
// keywords' rule field is the name's bit, and for each serviceDef the bits
// of its names.
type keyNameSet struct {
	ac      *automaton
	svcBits [][]int // svcBits[d][j]: bit of serviceDefs[d].keys[j]
	svcMask uint64  // the bits of all serviceDefs names
}

var keyNames = sync.OnceValue(func() *keyNameSet {
	var kws []keyword
	for i, n := range fixedNames {
		kws = append(kws, keyword{lit: n, rule: uint16(i)})
	}
	ks := &keyNameSet{}
	bit := map[string]int{}
	for i, n := range fixedNames {
		bit[n] = i
	}
	for _, d := range serviceDefs {
		var bits []int
		for _, n := range d.keys {
			b, ok := bit[n]
			if !ok {
				b = len(bit)
				bit[n] = b
				kws = append(kws, keyword{lit: n, rule: uint16(b)})
			}
			bits = append(bits, b)
			ks.svcMask |= 1 << uint(b)
		}
		ks.svcBits = append(ks.svcBits, bits)
	}
	if len(bit) > 64 {
		panic("mask: more than 64 key names")
	}
	ks.ac = newAutomaton(kws)
	return ks
})

// find returns the bits of the names that occur in key (lower case).
func (ks *keyNameSet) find(key []byte) uint64 {
	a := ks.ac
	var found uint64
	st := uint32(0)
	for _, c := range key {
		st = a.delta[st+uint32(a.cls[c])]
		if st < a.outBase {
			continue
		}
		q := a.index(st)
		for _, ki := range a.outs[a.outStart[q]:a.outStart[q+1]] {
			found |= 1 << uint(a.kws[ki].rule)
		}
	}
	return found
}
