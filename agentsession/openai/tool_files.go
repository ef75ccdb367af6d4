package openai

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prchat/prchat/agentsession/codesearch"
)

// readFile returns lines start..end of the file at p, numbered. Zero start
// is 1; zero end is start plus maxReadLines-1. The range is cut to
// maxReadLines lines and maxReadBytes bytes, and says so.
func (tb *toolbox) readFile(p string, start, end int) (string, string, error) {
	if p == "" || p == "." {
		return "", "", toolErrorf("path is required")
	}
	abs, rel, err := tb.resolve(p)
	if err != nil {
		return "", "", err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", "", toolErrorf("%s: cannot be read", rel)
	}
	switch {
	case fi.IsDir():
		return "", "", toolErrorf("%s is a folder; use %s to see what is in it", rel, toolListFiles)
	case !fi.Mode().IsRegular():
		return "", "", toolErrorf("%s is not a regular file", rel)
	}
	start = max(start, 1)
	if end == 0 {
		end = start + maxReadLines - 1
	}
	if end < start {
		return "", "", toolErrorf("end_line %d is before start_line %d", end, start)
	}
	clamped := false
	if end-start+1 > maxReadLines {
		end = start + maxReadLines - 1
		clamped = true
	}

	f, err := os.Open(abs)
	if err != nil {
		return "", "", toolErrorf("%s: cannot be read", rel)
	}
	defer f.Close()
	// Lines are counted up to maxCountBytes into the file.
	r := bufio.NewReaderSize(io.LimitReader(f, maxCountBytes), 64<<10)
	if head, _ := r.Peek(8 << 10); codesearch.Binary(head) {
		return "", "", toolErrorf("%s is a binary file", rel)
	}

	var (
		body     strings.Builder
		line     int  // lines seen so far
		last     int  // last line shown
		full     bool // maxReadBytes reached
		complete bool // every line of the file was counted
	)
	for {
		text, long, err := readLine(r)
		if err != nil {
			complete = errors.Is(err, io.EOF) && fi.Size() <= maxCountBytes
			break
		}
		line++
		if line < start || line > end || full {
			continue
		}
		if body.Len() >= maxReadBytes {
			full = true
			continue
		}
		s := strings.ToValidUTF8(string(text), "\uFFFD")
		if long {
			s += " [... line cut]"
		}
		fmt.Fprintf(&body, "%6d\t%s\n", line, s)
		last = line
	}
	total := "?"
	if complete {
		total = fmt.Sprint(line)
	}
	if last == 0 {
		if complete && line == 0 {
			return fmt.Sprintf("%s is empty (0 lines).\n", rel), fmt.Sprintf("read %s: empty", rel), nil
		}
		return "", "", toolErrorf("%s has %s lines; start_line %d is past its end", rel, total, start)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%s, lines %d-%d of %s:\n", rel, start, last, total)
	out.WriteString(body.String())
	switch {
	case full:
		fmt.Fprintf(&out, "[only %d KB are read at a time; ask for start_line %d to read on]\n", maxReadBytes>>10, last+1)
	case clamped && last < line:
		fmt.Fprintf(&out, "[only %d lines are read at a time; ask for start_line %d to read on]\n", maxReadLines, last+1)
	case !complete:
		fmt.Fprintf(&out, "[the file is longer; ask for start_line %d to read on]\n", last+1)
	case last < line:
		fmt.Fprintf(&out, "[the file goes on to line %d]\n", line)
	}
	return out.String(), fmt.Sprintf("read %s lines %d-%d of %s", rel, start, last, total), nil
}

// readLine reads one line without its end of line, keeping at most
// maxLineBytes of it, and reports whether it was longer.
func readLine(r *bufio.Reader) (line []byte, long bool, err error) {
	for {
		frag, isPrefix, err := r.ReadLine()
		if err != nil {
			if len(line) > 0 || long {
				return line, long, nil
			}
			return nil, false, err
		}
		if room := maxLineBytes - len(line); room > 0 {
			line = append(line, frag[:min(room, len(frag))]...)
			if len(frag) > room {
				long = true
			}
		} else if len(frag) > 0 {
			long = true
		}
		if !isPrefix {
			return bytes.TrimSuffix(line, []byte{'\r'}), long, nil
		}
	}
}

// listFiles lists what is under the folder p, breadth first (the folder's
// own entries, then those of its subfolders), at most maxListEntries. It
// does not enter .git, prchat's private folder, dependency or build output
// folders (it lists them, marked), nor follow symbolic links.
func (tb *toolbox) listFiles(ctx context.Context, p string) (string, string, error) {
	abs, rel, err := tb.resolve(p)
	if err != nil {
		return "", "", err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", "", toolErrorf("%s: cannot be read", rel)
	}
	if !fi.IsDir() {
		return "", "", toolErrorf("%s is a file; use %s to read it", rel, toolReadFile)
	}
	type dir struct{ abs, rel string }
	queue := []dir{{abs, rel}}
	var (
		entries []string
		more    bool
	)
	for len(queue) > 0 && !more {
		if err := ctx.Err(); err != nil {
			return "", "", err
		}
		d := queue[0]
		queue = queue[1:]
		des, err := os.ReadDir(d.abs)
		if err != nil {
			continue
		}
		slices.SortFunc(des, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
		for _, de := range des {
			name := de.Name()
			if strings.EqualFold(name, ".git") || d.rel == "." && strings.EqualFold(name, ".prchat") {
				continue
			}
			if len(entries) == maxListEntries {
				more = true
				break
			}
			entry := name
			if d.rel != "." {
				entry = path.Join(d.rel, name)
			}
			switch t := de.Type(); {
			case t&os.ModeSymlink != 0:
				entry += " (symbolic link)"
			case de.IsDir() && skippedDir(name):
				entry += "/ (not listed: dependencies or build output)"
			case de.IsDir():
				queue = append(queue, dir{filepath.Join(d.abs, name), strings.TrimPrefix(path.Join(d.rel, name), "./")})
				entry += "/"
			}
			entries = append(entries, entry)
		}
	}
	where := rel
	if rel == "." {
		where = "the repository root"
	}
	var out strings.Builder
	if len(entries) == 0 {
		fmt.Fprintf(&out, "%s is empty.\n", where)
		return out.String(), fmt.Sprintf("listed %s: empty", rel), nil
	}
	fmt.Fprintf(&out, "Under %s (folders end in /):\n", where)
	for _, e := range entries {
		out.WriteString(e + "\n")
	}
	if more || len(queue) > 0 {
		fmt.Fprintf(&out, "[more entries not listed; list a subfolder to see them]\n")
	}
	return out.String(), fmt.Sprintf("listed %d entries under %s", len(entries), rel), nil
}
