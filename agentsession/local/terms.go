package local

import (
	"path"
	"regexp"
	"strings"
	"unicode"
)

// kind is what sort of search term a token of the question is.
type kind int

const (
	// kindWord is an ordinary word ("retries"), searched by its stem.
	kindWord kind = iota
	// kindIdent is an identifier (parseConfig, max_retries, `quoted`).
	kindIdent
	// kindQualified is a qualified identifier (Config.Validate).
	kindQualified
	// kindFile is a file name or path (main.go, config/config.go).
	kindFile
	// kindPath is a folder path (chat/mask).
	kindPath
)

// baseWeight is how much a match of each kind of term counts.
var baseWeight = [...]float64{kindWord: 1, kindIdent: 4, kindQualified: 5, kindFile: 3, kindPath: 2}

// term is one thing the local backend searches for.
type term struct {
	// Text is the term as the question spells it.
	Text string
	// match is what is searched for, lower-cased (a word's stem); it also
	// names the term.
	match string
	// alts are further spellings searched for (retries: retry).
	alts []string
	kind kind
}

// needles returns what is searched for to find t.
func (t term) needles() []string { return append([]string{t.match}, t.alts...) }

// maxTerms bounds the terms of one question.
const maxTerms = 16

var (
	backticks = regexp.MustCompile("`([^`\n]{1,200})`")
	urls      = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://\S+`)
	tokenRE   = regexp.MustCompile(`[A-Za-z0-9_$][A-Za-z0-9_$./-]*[A-Za-z0-9_$]|[A-Za-z0-9_$]`)
)

// extractTerms returns the search terms of a question: identifiers, file
// names and paths, and ordinary words that are not stopwords, most specific
// kinds first, then in the question's order.
func extractTerms(question string) []term {
	var terms []term
	seen := map[string]bool{}
	add := func(t term) {
		if t.match == "" || seen[t.match] {
			return
		}
		seen[t.match] = true
		terms = append(terms, t)
	}
	// Text in backticks is code: every token in it is at least an
	// identifier.
	for _, m := range backticks.FindAllStringSubmatch(question, -1) {
		for _, tok := range tokenRE.FindAllString(m[1], -1) {
			for _, t := range classify(tok, true) {
				add(t)
			}
		}
	}
	rest := backticks.ReplaceAllString(question, " ")
	rest = urls.ReplaceAllString(rest, " ")
	for _, tok := range tokenRE.FindAllString(rest, -1) {
		for _, t := range classify(tok, false) {
			add(t)
		}
	}
	// Most specific first; the sort is stable, so the question's order
	// breaks ties.
	ordered := make([]term, 0, len(terms))
	for _, k := range []kind{kindQualified, kindFile, kindIdent, kindPath, kindWord} {
		for _, t := range terms {
			if t.kind == k {
				ordered = append(ordered, t)
			}
		}
	}
	if len(ordered) > maxTerms {
		ordered = ordered[:maxTerms]
	}
	return ordered
}

// classify turns one token into terms. code says the token was in
// backticks.
func classify(tok string, code bool) []term {
	tok = strings.Trim(tok, "./-")
	if tok == "" {
		return nil
	}
	lower := strings.ToLower(tok)
	if strings.ContainsAny(tok, "./") {
		base := path.Base(lower)
		if ext := path.Ext(base); ext != "" && knownExts[ext[1:]] && len(base) > len(ext) {
			return []term{{Text: tok, match: lower, kind: kindFile}}
		}
		if strings.Contains(tok, "/") {
			if strings.Contains(tok, ".") {
				return nil // a URL or some other dotted path
			}
			return []term{{Text: tok, match: lower, kind: kindPath}}
		}
		// Dotted: a qualified identifier, also searched by its last part.
		parts := strings.Split(tok, ".")
		for _, p := range parts {
			if len(p) < 2 || !isIdentifier(p) {
				return nil // e.g., i.e., 1.2.3
			}
		}
		out := []term{{Text: tok, match: lower, kind: kindQualified}}
		if last := parts[len(parts)-1]; len(last) >= 3 {
			out = append(out, term{Text: last, match: strings.ToLower(last), kind: kindIdent})
		}
		return out
	}
	if strings.Contains(tok, "-") && !code {
		var out []term
		for _, w := range strings.Split(tok, "-") {
			out = append(out, classify(w, false)...)
		}
		return out
	}
	if isNumber(tok) {
		return nil
	}
	if code || identLike(tok) {
		if len(tok) < 2 {
			return nil
		}
		return []term{{Text: tok, match: lower, kind: kindIdent}}
	}
	if len(lower) < 3 || stopwords[lower] {
		return nil
	}
	match, alts := stem(lower)
	return []term{{Text: tok, match: match, alts: alts, kind: kindWord}}
}

// identLike reports whether a plain token looks like an identifier rather
// than a word: it has an underscore or $, an upper-case letter after a
// lower-case one (parseConfig, MaxRetries), two upper-case letters and a
// lower-case one (HTTPServer), or letters and digits mixed (sha256).
func identLike(tok string) bool {
	var lower, digit, letter bool
	uppers := 0
	for i, r := range tok {
		switch {
		case r == '_' || r == '$':
			if i > 0 {
				return true
			}
		case unicode.IsDigit(r):
			digit = true
		case unicode.IsUpper(r):
			letter = true
			uppers++
			if lower {
				return true
			}
		case unicode.IsLetter(r):
			letter, lower = true, true
		}
	}
	return digit && letter || uppers >= 2 && lower // HTTPServer
}

func isIdentifier(s string) bool {
	for i, r := range s {
		if !(r == '_' || r == '$' || unicode.IsLetter(r) || i > 0 && unicode.IsDigit(r)) {
			return false
		}
	}
	return s != ""
}

func isNumber(s string) bool {
	for _, r := range s {
		if !unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

// stem strips common English endings from a lower-case word so that its
// other forms match too (parsing: pars, handlers: handler), and gives
// spellings that the stem does not cover (retries: retri, and retry).
func stem(w string) (string, []string) {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-2], []string{w[:len(w)-3] + "y"}
	case len(w) > 5 && strings.HasSuffix(w, "sses"):
		return w[:len(w)-2], nil
	case len(w) > 5 && strings.HasSuffix(w, "ing"):
		return w[:len(w)-3], nil
	case len(w) > 4 && strings.HasSuffix(w, "ied"):
		return w[:len(w)-2], []string{w[:len(w)-3] + "y"}
	case len(w) > 4 && strings.HasSuffix(w, "ed") && !strings.HasSuffix(w, "eed"):
		return w[:len(w)-2], nil
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") &&
		!strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:len(w)-1], nil
	}
	return w, nil
}

// knownExts are file extensions that make a dotted token a file name.
var knownExts = toSet(`go mod sum py pyi js mjs cjs ts tsx jsx rs java kt kts scala rb php c h cc cpp cxx hpp hh cs fs swift m mm
	sh bash zsh fish ps1 bat md markdown rst txt adoc yaml yml json jsonc toml ini cfg conf env properties xml html htm css scss sass less
	sql proto graphql gql tf tfvars hcl lua pl pm r dart ex exs erl hrl clj cljs elm hs ml mli nix vue svelte astro
	dockerfile makefile mk cmake gradle bazel bzl lock csv tsv svg ipynb tmpl tpl j2 gotmpl`)

// stopwords are words too common in questions to search for.
var stopwords = toSet(`a about above after again against all also am an and any are aren as at be because been before being
	below between both but by can cannot could couldn did didn do does doesn doing don done down during each either else
	few for from further get gets got had hadn has hasn have haven having he her here hers herself him himself his how
	i if in into is isn it its itself just let like ll me might mine more most must mustn my myself need needs no nor not
	now of off on once one only or other ought our ours ourselves out over own please re really same shall shan she should
	shouldn so some still such than that the their theirs them themselves then there these they this those through to too
	under until up upon us very was wasn way we well were weren what whatever when where whereas wherever whether which
	while who whom whose why will with within without won would wouldn yes yet you your yours yourself yourselves
	ask asked code codes file files function functions method methods line lines here thing things explain explains
	tell show shows mean means meant use used uses using work works working happen happens happened look looks see
	think want make makes made review reviewer reviewed comment comments flag flags flagged pull request change
	changes changed defined define defines called call calls part parts place places exactly actually something
	anything everything someone anyone`)

func toSet(words string) map[string]bool {
	set := map[string]bool{}
	for _, w := range strings.Fields(words) {
		set[w] = true
	}
	return set
}
