package index

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// commitID is a commit id: hex only, so it can never be taken for an
// option.
var commitID = regexp.MustCompile(`^[0-9a-fA-F]{4,64}$`)

// maxDiffFiles bounds the changed files whose definitions are compared.
const maxDiffFiles = 2000

// gitCmd runs git in dir with no pager, hooks, external diff or textconv.
func gitCmd(ctx context.Context, bin, dir string, args ...string) *exec.Cmd {
	full := append([]string{"-c", "core.hooksPath=" + os.DevNull, "-c", "core.quotePath=false", "-C", dir}, args...)
	cmd := exec.CommandContext(ctx, cmp.Or(bin, "git"), full...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "GIT_OPTIONAL_LOCKS=0", "GIT_CONFIG_NOSYSTEM=1")
	return cmd
}

// diff maps the PR's diff onto the definitions of the base and the head.
func (ix *Index) diff(ctx context.Context, dir string, opt Options) error {
	if !commitID.MatchString(opt.Base) || !commitID.MatchString(opt.Head) {
		return errors.New("the review's commits are not commit ids")
	}
	var out bytes.Buffer
	cmd := gitCmd(ctx, opt.Git, dir, "diff", "--no-color", "--no-ext-diff", "--no-textconv", "--find-renames", "-U0", opt.Base, opt.Head)
	cmd.Stdout = &out
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git diff: %v: %s", err, firstLine(strings.TrimSpace(stderr.String())))
	}
	ix.ChangedFiles = parseDiff(out.Bytes())
	files := ix.ChangedFiles
	if len(files) > maxDiffFiles {
		files = files[:maxDiffFiles]
	}
	var specs []string
	for _, cf := range files {
		if cf.Status != "added" && Lang(cf.OldPath) != "" {
			specs = append(specs, opt.Base+":"+cf.OldPath)
		}
	}
	base, err := catFiles(ctx, opt.Git, dir, specs)
	if err != nil {
		return err
	}
	ix.Changes = ix.mapChanges(dir, files, func(p string) ([]byte, bool) {
		b, ok := base[opt.Base+":"+p]
		return b, ok
	})
	return nil
}

var hunkRE = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// parseDiff reads a -U0 patch into changed files.
func parseDiff(patch []byte) []ChangedFile {
	var out []ChangedFile
	var cur *ChangedFile
	sc := bufio.NewScanner(bytes.NewReader(patch))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "diff --git "):
			out = append(out, ChangedFile{Status: "modified"})
			cur = &out[len(out)-1]
			a, b := splitDiffHeader(strings.TrimPrefix(line, "diff --git "))
			cur.OldPath, cur.Path = a, b
		case cur == nil:
		case strings.HasPrefix(line, "new file mode"):
			cur.Status = "added"
		case strings.HasPrefix(line, "deleted file mode"):
			cur.Status = "deleted"
		case strings.HasPrefix(line, "rename from "):
			cur.Status, cur.OldPath = "renamed", unquote(strings.TrimPrefix(line, "rename from "))
		case strings.HasPrefix(line, "rename to "):
			cur.Path = unquote(strings.TrimPrefix(line, "rename to "))
		case strings.HasPrefix(line, "--- "):
			if p := strings.TrimPrefix(line, "--- "); p != "/dev/null" {
				cur.OldPath = strings.TrimPrefix(unquote(p), "a/")
			}
		case strings.HasPrefix(line, "+++ "):
			if p := strings.TrimPrefix(line, "+++ "); p != "/dev/null" {
				cur.Path = strings.TrimPrefix(unquote(p), "b/")
			}
		case strings.HasPrefix(line, "@@"):
			m := hunkRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			oldN, newStart, newN := atoiOr(m[2], 1), atoiOr(m[3], 0), atoiOr(m[4], 1)
			cur.Removed += oldN
			for l := newStart; l < newStart+newN; l++ {
				cur.Added = append(cur.Added, l)
			}
			cur.hunks = append(cur.hunks, hunk{oldStart: atoiOr(m[1], 0), oldN: oldN, newStart: newStart, newN: newN})
		}
	}
	return out
}

// hunk is a change of a -U0 diff.
type hunk struct{ oldStart, oldN, newStart, newN int }

func atoiOr(s string, def int) int {
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return def
	}
	return n
}

func unquote(s string) string {
	if strings.HasPrefix(s, `"`) {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
	}
	return s
}

// splitDiffHeader splits "a/x b/y" into x and y.
func splitDiffHeader(s string) (string, string) {
	if strings.HasPrefix(s, `"`) {
		if i := strings.Index(s[1:], `" `); i >= 0 {
			return strings.TrimPrefix(unquote(s[:i+2]), "a/"), strings.TrimPrefix(unquote(s[i+3:]), "b/")
		}
	}
	// Both halves are the same length when the path did not change.
	if n := len(s); n%2 == 1 {
		a, b := s[:n/2], s[n/2+1:]
		if strings.TrimPrefix(a, "a/") == strings.TrimPrefix(b, "b/") {
			return strings.TrimPrefix(a, "a/"), strings.TrimPrefix(b, "b/")
		}
	}
	if i := strings.Index(s, " b/"); i >= 0 {
		return strings.TrimPrefix(s[:i], "a/"), s[i+3:]
	}
	return s, s
}

// catFiles reads blobs (commit:path) with one git cat-file --batch.
func catFiles(ctx context.Context, bin, dir string, specs []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	if len(specs) == 0 {
		return out, nil
	}
	cmd := gitCmd(ctx, bin, dir, "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(strings.Join(specs, "\n") + "\n")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	r := bufio.NewReader(stdout)
	for _, spec := range specs {
		head, err := r.ReadString('\n')
		if err != nil {
			break
		}
		fields := strings.Fields(head)
		if len(fields) != 3 || fields[1] != "blob" {
			continue // missing, or not a file
		}
		size, err := strconv.Atoi(fields[2])
		if err != nil {
			break
		}
		buf := make([]byte, size+1)
		if _, err := io.ReadFull(r, buf); err != nil {
			break
		}
		out[spec] = buf[:size]
	}
	_, _ = io.Copy(io.Discard, r)
	if err := cmd.Wait(); err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return out, nil
}

// defsOf parses a file's definitions (Go without type checking).
func defsOf(p string, src []byte) []Def {
	lang := Lang(p)
	if lang == "go" {
		fset := token.NewFileSet()
		af, _ := parser.ParseFile(fset, p, src, parser.SkipObjectResolution|parser.ParseComments)
		if af == nil {
			return nil
		}
		f := &File{Path: p, Lang: "go"}
		c := &goChecker{fset: fset}
		x := goExtract{c: c, p: &goPkg{info: &types.Info{Defs: map[*ast.Ident]types.Object{}}}, f: f, src: src}
		x.defs(af)
		return f.Defs
	}
	return parseFile(p, lang, src).Defs
}

// changeable reports whether a definition's changes are worth telling.
func changeable(d *Def) bool {
	return d.Kind != KindField && !strings.HasPrefix(d.Name, "(")
}

func defKey(d *Def) string { return d.Kind + " " + d.QualName() }

// mapChanges maps the changed files' lines onto their definitions and pairs
// removed and added ones into renames and moves.
func (ix *Index) mapChanges(dir string, files []ChangedFile, base func(string) ([]byte, bool)) []Change {
	type side struct {
		path  string
		def   Def
		body  []string
		lines []int
		src   []byte
	}
	var added, removed []side
	var out []Change
	for _, cf := range files {
		if Lang(cf.Path) == "" && Lang(cf.OldPath) == "" {
			continue
		}
		var headDefs []Def
		var headSrc []byte
		if cf.Status != "deleted" {
			if f := ix.File(cf.Path); f != nil {
				headDefs = f.Defs
				headSrc, _ = os.ReadFile(filepath.Join(dir, filepath.FromSlash(cf.Path)))
			}
		}
		var baseDefs []Def
		baseSrc, ok := base(cf.OldPath)
		if ok {
			baseDefs = defsOf(cf.OldPath, baseSrc)
		}
		removedLines := map[int]bool{}
		for _, h := range cf.hunks {
			for l := h.oldStart; l < h.oldStart+h.oldN; l++ {
				removedLines[l] = true
			}
		}
		baseByKey := map[string]*Def{}
		for i := range baseDefs {
			if changeable(&baseDefs[i]) {
				baseByKey[defKey(&baseDefs[i])] = &baseDefs[i]
			}
		}
		headKeys := map[string]bool{}
		for i := range headDefs {
			d := &headDefs[i]
			if !changeable(d) {
				continue
			}
			headKeys[defKey(d)] = true
			var lines []int
			for _, l := range cf.Added {
				if l >= d.Start && l <= d.End {
					lines = append(lines, l)
				}
			}
			b := baseByKey[defKey(d)]
			if b == nil {
				added = append(added, side{cf.Path, *d, bodyLines(headSrc, d), lines, headSrc})
				continue
			}
			rm := 0
			for l := b.Start; l <= b.End; l++ {
				if removedLines[l] {
					rm++
				}
			}
			if cf.OldPath != cf.Path {
				// The file was renamed: the definition moved with it.
				out = append(out, Change{Kind: "moved", Name: d.Name, Def: d.Kind, Parent: d.Parent, Path: cf.Path, Start: d.Start, End: d.End,
					Lines: lines, Removed: rm, OldName: b.Name, OldPath: cf.OldPath, OldStart: b.Start, OldEnd: b.End})
				continue
			}
			if len(lines) > 0 || rm > 0 {
				out = append(out, Change{Kind: "changed", Name: d.Name, Def: d.Kind, Parent: d.Parent, Path: cf.Path, Start: d.Start, End: d.End,
					Lines: lines, Removed: rm, OldPath: cf.OldPath, OldStart: b.Start, OldEnd: b.End})
			}
		}
		for i := range baseDefs {
			b := &baseDefs[i]
			if changeable(b) && !headKeys[defKey(b)] {
				removed = append(removed, side{cf.OldPath, *b, bodyLines(baseSrc, b), nil, baseSrc})
			}
		}
	}
	// Pair what was removed with what was added: the same name elsewhere
	// is a move, a similar body under another name a rename.
	usedAdded := make([]bool, len(added))
	for _, r := range removed {
		best, bestScore := -1, 0.0
		for j, a := range added {
			if usedAdded[j] || a.def.Kind != r.def.Kind {
				continue
			}
			score := 0.0
			switch {
			case a.def.Name == r.def.Name && a.def.Parent == r.def.Parent:
				score = 2
			default:
				score = similarity(r.body, a.body, r.def.Name, a.def.Name)
				if score < 0.5 {
					continue
				}
			}
			if score > bestScore {
				best, bestScore = j, score
			}
		}
		if best < 0 {
			out = append(out, Change{Kind: "removed", Name: r.def.Name, Def: r.def.Kind, Parent: r.def.Parent, OldPath: r.path, OldStart: r.def.Start, OldEnd: r.def.End})
			continue
		}
		usedAdded[best] = true
		a := added[best]
		kind := "renamed"
		if a.def.Name == r.def.Name {
			kind = "moved"
		}
		// The lines that differ once the rename or move is undone: the
		// diff's lines, less those that differ only by the new name.
		var changed []int
		old := map[string]bool{}
		for l := r.def.Start; l <= r.def.End; l++ {
			old[strings.ReplaceAll(lineText(r.src, l), r.def.Name, "\x00")] = true
		}
		for _, l := range a.lines {
			t := lineText(a.src, l)
			if strings.Contains(t, a.def.Name) && old[strings.ReplaceAll(t, a.def.Name, "\x00")] {
				continue
			}
			changed = append(changed, l)
		}
		out = append(out, Change{Kind: kind, Name: a.def.Name, Def: a.def.Kind, Parent: a.def.Parent, Path: a.path, Start: a.def.Start, End: a.def.End,
			OldName: r.def.Name, OldPath: r.path, OldStart: r.def.Start, OldEnd: r.def.End, Lines: changed})
	}
	for j, a := range added {
		if !usedAdded[j] {
			out = append(out, Change{Kind: "added", Name: a.def.Name, Def: a.def.Kind, Parent: a.def.Parent, Path: a.path, Start: a.def.Start, End: a.def.End})
		}
	}
	slices.SortStableFunc(out, func(a, b Change) int {
		return cmp.Or(strings.Compare(cmp.Or(a.Path, a.OldPath), cmp.Or(b.Path, b.OldPath)), cmp.Compare(cmp.Or(a.Start, a.OldStart), cmp.Or(b.Start, b.OldStart)))
	})
	return out
}

// bodyLines are a definition's lines, trimmed.
func bodyLines(src []byte, d *Def) []string {
	if src == nil {
		return nil
	}
	starts := lineStarts(src)
	var out []string
	for l := d.Start; l <= d.End && l-1 < len(starts); l++ {
		end := len(src)
		if l < len(starts) {
			end = starts[l] - 1
		}
		if t := strings.TrimSpace(string(src[starts[l-1]:max(end, starts[l-1])])); t != "" && !strings.HasPrefix(t, "//") && !strings.HasPrefix(t, "#") {
			out = append(out, t)
		}
	}
	return out
}

// similarity is the share of lines two bodies have in common, the names
// told apart by the rename made equal.
func similarity(a, b []string, nameA, nameB string) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	count := map[string]int{}
	for _, l := range a {
		count[strings.ReplaceAll(l, nameA, "\x00")]++
	}
	common := 0
	for _, l := range b {
		k := strings.ReplaceAll(l, nameB, "\x00")
		if count[k] > 0 {
			count[k]--
			common++
		}
	}
	return float64(common) / float64(max(len(a), len(b)))
}
