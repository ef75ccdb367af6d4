package local

import (
	"strings"

	"github.com/prchat/prchat/agentsession/local/index"
)

// kindOf is the kind of question asked, which decides how it is answered.
type kindOf int

const (
	askUnknown kindOf = iota
	askDefine
	askExported
	askCallers
	askCallees
	askImplements
	askMethods
	askChanges
	askRenamed
	askWhyReturn
	askWhen
	askFocus
	askTested
	askDescribe
)

var kindNames = [...]string{"search", "definition", "exported", "references", "callees", "implements", "methods",
	"changes", "renames", "returns", "guards", "focus", "tests", "describe"}

func (k kindOf) String() string { return kindNames[k] }

// question is a question read for its kind and the code it names.
type question struct {
	text  string
	lower string
	kind  kindOf
	// targets are the names of the question the index knows, in the
	// question's order; quals are the Parent of a qualified one
	// (MemStore.Get), or "".
	targets []string
	quals   []string
	// words are the question's other words, lower-cased, in order.
	words []string
	// files are paths of the index the question names.
	files []string
}

// has reports whether the question's lower-cased text holds any of the
// phrases, each starting and ending at a word boundary (a phrase ending
// in * may end inside a word: implement* is implements too).
func (q *question) has(phrases ...string) bool {
	for _, p := range phrases {
		prefix := strings.HasSuffix(p, "*")
		p = strings.TrimSuffix(p, "*")
		for off := 0; ; {
			i := strings.Index(q.lower[off:], p)
			if i < 0 {
				break
			}
			i += off
			end := i + len(p)
			before := i == 0 || !isWordByte(q.lower[i-1])
			after := prefix || end == len(q.lower) || !isWordByte(q.lower[end]) || !isWordByte(p[len(p)-1])
			if before && after {
				return true
			}
			off = i + 1
		}
	}
	return false
}

func isWordByte(c byte) bool { return c == '_' || isAlnum(c) }

// hasWord reports whether the question has one of the words (whole words).
func (q *question) hasWord(words ...string) bool {
	for _, w := range q.words {
		for _, x := range words {
			if w == x {
				return true
			}
		}
	}
	return false
}

// readQuestion reads a question against an index: its names and kind.
func readQuestion(text string, ix *index.Index, focused bool) *question {
	q := &question{text: text, lower: strings.ToLower(text)}
	seen := map[string]bool{}
	for _, tok := range tokenRE.FindAllString(text, -1) {
		tok = strings.Trim(tok, "./-")
		if tok == "" {
			continue
		}
		if ix.File(tok) != nil || looksLikeFile(tok) {
			if p := matchFile(ix, tok); p != "" {
				q.files = append(q.files, p)
				continue
			}
		}
		parts := strings.Split(tok, ".")
		name, qual := parts[len(parts)-1], ""
		if len(parts) >= 2 {
			qual = parts[len(parts)-2]
		}
		resolved := ""
		if ix.Known(name) || changed(ix, name) {
			resolved = name
		} else if len(name) >= 3 {
			if alts := ix.Fold(name); len(alts) == 1 {
				resolved = alts[0]
			}
		}
		if resolved != "" && len(parts) == 1 && stopwords[strings.ToLower(name)] && !identLike(name) && !isCodeish(text, tok) {
			resolved = ""
		}
		if resolved == "" {
			for _, p := range parts {
				q.words = append(q.words, strings.ToLower(p))
			}
			continue
		}
		if !seen[qual+"."+resolved] {
			seen[qual+"."+resolved] = true
			q.targets = append(q.targets, resolved)
			q.quals = append(q.quals, qual)
		}
		q.words = append(q.words, strings.ToLower(resolved))
	}
	q.kind = q.classify(ix, focused)
	return q
}

// isCodeish reports whether tok is in backticks in the question.
func isCodeish(text, tok string) bool { return strings.Contains(text, "`"+tok+"`") }

func looksLikeFile(tok string) bool {
	return strings.Contains(tok, "/") || strings.Contains(tok, ".") && index.Lang(tok) != ""
}

// matchFile returns the indexed path tok names (exactly or as a path
// suffix), or "".
func matchFile(ix *index.Index, tok string) string {
	if ix.File(tok) != nil {
		return tok
	}
	var found string
	for _, f := range ix.Files {
		if strings.HasSuffix(f.Path, "/"+tok) {
			if found != "" {
				return found // the first of several
			}
			found = f.Path
		}
	}
	return found
}

// classify decides what kind of question q is.
func (q *question) classify(ix *index.Index, focused bool) kindOf {
	switch {
	case q.has("rename*", "old name", "previous name", "used to be called", "called before", "was called", "move*", "new name"):
		return askRenamed
	case q.hasWord("tested", "test", "tests", "testing", "covered", "coverage", "untested"):
		return askTested
	case q.has("method set", "methods of", "what methods", "which methods", "methods does", "methods do"):
		return askMethods
	case q.has("implement*", "satisf*", "conform*", "subclass*", "inherit*", "extends"):
		return askImplements
	case q.has("why does", "why do", "why is", "why would", "when does", "when do", "when would", "when will", "how can", "how does", "what makes", "under what") &&
		q.hasWord("return", "returns", "returned", "fail", "fails", "error", "errors", "raise", "raises", "throw", "throws", "panic", "panics"):
		return askWhyReturn
	case q.has("what happens when", "what happens if", "happens when", "what if ", "when is empty", "is empty", "is nil", "is none", "is null"):
		return askWhen
	case q.has("what does") && q.hasWord("call") && !q.has("who calls", "what calls"), q.has("callees", "which functions does", "what functions does"):
		return askCallees
	case q.hasWord("used", "uses", "use", "usage", "usages", "referenced", "references", "reference", "callers", "caller", "call", "calls",
		"called", "invoked", "invokes", "invoke", "dependents") || q.has("break*", "affect*", "impact*", "depend*"):
		return askCallers
	case q.has("what changed", "what has changed", "what did", "changes", "changed", "change in", "diff", "modif*", "what's new", "what is new", "added", "removed", "deleted", "this pr", "the pr", "pull request"):
		return askChanges
	case q.hasWord("exported", "export", "public", "private", "unexported"):
		return askExported
	case q.has("declare*", "defin*", "declaration*", "where is", "where are", "where does", "come from", "find "):
		return askDefine
	case focused && (q.has("this", "these lines", "here", "the range", "the selection") || len(q.targets) == 0):
		return askFocus
	case len(q.targets) > 0 && q.has("what does", "what is", "what are", "what's", "explain", "describe", "how does", "purpose of", "do?", "tell me about", "what about"):
		return askDescribe
	}
	return askUnknown
}

// changed reports whether the PR renamed, moved or removed a definition
// of that name: a name of the base the head may no longer have.
func changed(ix *index.Index, name string) bool {
	for _, c := range ix.Changes {
		if c.OldName == name || c.Kind == "removed" && c.Name == name {
			return true
		}
	}
	return false
}
