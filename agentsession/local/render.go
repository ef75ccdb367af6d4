package local

import (
	"fmt"
	"strings"
)

// summary says what the search found, for the tool_result event.
func (res *searchResult) summary() string {
	matches, files := 0, 0
	for _, fh := range res.files {
		if len(fh.hits) > 0 {
			files++
			matches += len(fh.hits)
		}
	}
	s := fmt.Sprintf("%s in %s", plural(matches, "match", "matches"), plural(files, "file", "files"))
	if res.stats.Truncated {
		s += fmt.Sprintf(" (stopped at the search limit after %s)", plural(res.stats.Files, "file", "files"))
	}
	return s
}

// disclaimer says where the answer comes from.
const disclaimer = "This answer comes from a plain text search of the checkout. " + structureNote

// render writes the answer's markdown: the terms searched for, the cited
// lines and what each matched, and the other files with matches.
func render(terms []term, res *searchResult, picks []candidate) string {
	var b strings.Builder
	if len(terms) == 0 {
		b.WriteString("The question names no identifiers, file names or words I could search the code for, so I found nothing to cite.\n\n")
		b.WriteString(disclaimer)
		return b.String()
	}
	if len(picks) == 0 {
		fmt.Fprintf(&b, "I found no code in the checkout that matches %s.", listTerms(terms, allBits(len(terms)), "or"))
		if res.stats.Truncated {
			fmt.Fprintf(&b, " The search stopped at its limit after %s, so some files were not searched.", plural(res.stats.Files, "file", "files"))
		}
		b.WriteString("\n\n")
		b.WriteString(disclaimer)
		return b.String()
	}

	matches, files := 0, 0
	for _, fh := range res.files {
		if len(fh.hits) > 0 {
			files++
			matches += len(fh.hits)
		}
	}
	fmt.Fprintf(&b, "I searched the checkout for %s", listTerms(terms, allBits(len(terms)), "and"))
	if matches > 0 {
		fmt.Fprintf(&b, " and found %s in %s.", plural(matches, "matching line", "matching lines"), plural(files, "file", "files"))
	} else {
		b.WriteString(": no line matches, but the question names these files.")
	}
	var found uint32
	for _, fh := range res.files {
		found |= fh.terms | fh.pathTerms
	}
	if missing := allBits(len(terms)) &^ found; missing != 0 {
		fmt.Fprintf(&b, " Nothing matches %s.", listTerms(terms, missing, "or"))
	}
	b.WriteString("\n\nThe best matches:\n\n")
	for i, c := range picks {
		fmt.Fprintf(&b, "%d. %s\n", i+1, describe(terms, c))
	}

	cited := map[*fileHits]bool{}
	for _, c := range picks {
		cited[c.file] = true
	}
	var others []string
	rest := 0
	for _, fh := range res.files {
		if cited[fh] || len(fh.hits) == 0 {
			continue
		}
		if len(others) < 5 {
			others = append(others, fmt.Sprintf("`%s` (%s)", fh.path, plural(len(fh.hits), "line", "lines")))
		} else {
			rest++
		}
	}
	if len(others) > 0 {
		b.WriteString("\nOther files with matches: ")
		b.WriteString(strings.Join(others, ", "))
		if rest > 0 {
			if rest == 1 {
				b.WriteString(", and 1 more file")
			} else {
				fmt.Fprintf(&b, ", and %d more files", rest)
			}
		}
		b.WriteString(".\n")
	}
	if res.stats.Truncated {
		fmt.Fprintf(&b, "\nThe search stopped at its limit after %s, so some files were not searched.\n", plural(res.stats.Files, "file", "files"))
	}
	b.WriteString("\n")
	b.WriteString(disclaimer)
	return b.String()
}

// describe says in words what a cited line matched.
func describe(terms []term, c candidate) string {
	cite := citeRange(c)
	if c.hit.line == 0 {
		return fmt.Sprintf("`%s` is a file the question names (lines %d-%d).", c.file.path, cite.StartLine, cite.EndLine)
	}
	var parts []string
	if c.hit.defines != 0 {
		parts = append(parts, "defines "+listTerms(terms, c.hit.defines, "and"))
	}
	if other := c.hit.terms &^ c.hit.defines; other != 0 {
		parts = append(parts, "mentions "+listTerms(terms, other, "and"))
	}
	s := fmt.Sprintf("`%s` line %d %s", c.file.path, c.hit.line, strings.Join(parts, " and "))
	if c.file.pathTerms != 0 {
		s += " (a file the question names)"
	}
	if c.hit.text != "" && !strings.Contains(c.hit.text, "`") {
		s += ": `" + c.hit.text + "`"
	} else {
		s += "."
	}
	return s
}

// listTerms lists the terms whose bits are set in mask: `a`, `b` and `c`.
func listTerms(terms []term, mask uint32, conj string) string {
	var names []string
	for i, t := range terms {
		if mask&(1<<i) != 0 {
			names = append(names, "`"+t.Text+"`")
		}
	}
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + conj + " " + names[len(names)-1]
}

func allBits(n int) uint32 { return uint32(1)<<n - 1 }

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
