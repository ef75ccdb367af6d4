package agentsession

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prchat/prchat/chat"
)

// FileLines returns lines start..end (1-based, inclusive) of the file at
// path in commit sha of repo's clone, and the file's line count. The path
// rules are those of LineCount (and of the agents' tools): a clean
// repository-relative path outside prchat's private folder and .git. The
// range is clipped to the file and to chat.MaxFileLines lines; a file larger
// than chat.MaxFileBytes, or one that is not text, is refused.
func (w *Workspaces) FileLines(ctx context.Context, repo chat.Repository, sha, p string, start, end int) (chat.FileLines, error) {
	if err := checkRepoPath(p); err != nil {
		return chat.FileLines{}, chat.Errorf(chat.CodeInvalid, "path %q: %v", p, err)
	}
	if !shaPattern.MatchString(sha) {
		return chat.FileLines{}, chat.Errorf(chat.CodeInvalid, "%q is not a commit id", sha)
	}
	if start < 1 {
		start = 1
	}
	if end < start {
		end = start + chat.MaxFileLines - 1
	}
	end = min(end, start+chat.MaxFileLines-1)
	clones := w.clonesOf(repo)
	if len(clones) == 0 {
		return chat.FileLines{}, chat.Errorf(chat.CodeNeedsClone, "repository %s has no clone on this host", repo.Name)
	}
	for _, clone := range clones {
		blob, err := w.readBlob(ctx, clone, sha, p)
		if errors.Is(err, errObjectMissing) {
			continue
		}
		if err != nil {
			return chat.FileLines{}, err
		}
		return sliceLines(blob, p, sha, start, end)
	}
	return chat.FileLines{}, chat.Errorf(chat.CodeNotFound, "no file %s at commit %s in %s", p, sha, repo.Name)
}

// readBlob reads sha:p from clone with git cat-file --batch, refusing
// blobs over chat.MaxFileBytes before reading their content.
func (w *Workspaces) readBlob(ctx context.Context, clone, sha, p string) ([]byte, error) {
	cmd := w.git.Cmd(ctx, clone, "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(sha + ":" + p + "\n")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", p, sha, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", p, sha, err)
	}
	defer func() { _ = cmd.Wait() }()
	r := bufio.NewReader(out)
	head, err := r.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", p, sha, err)
	}
	fields := strings.Fields(head)
	if len(fields) == 2 && fields[1] == "missing" || len(fields) != 3 {
		return nil, errObjectMissing
	}
	if fields[1] != "blob" {
		return nil, chat.Errorf(chat.CodeInvalid, "%s is a %s, not a file", p, fields[1])
	}
	size, err := strconv.ParseInt(fields[2], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: bad size %q", p, sha, fields[2])
	}
	if size > chat.MaxFileBytes {
		return nil, chat.Errorf(chat.CodeInvalid, "%s is %d bytes, more than the %d a page shows", p, size, chat.MaxFileBytes)
	}
	blob := make([]byte, size)
	if _, err := io.ReadFull(r, blob); err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", p, sha, err)
	}
	return blob, nil
}

// sliceLines cuts lines start..end out of blob.
func sliceLines(blob []byte, p, sha string, start, end int) (chat.FileLines, error) {
	if bytes.IndexByte(blob, 0) >= 0 || !utf8.Valid(blob) {
		return chat.FileLines{}, chat.Errorf(chat.CodeInvalid, "%s is not a text file", p)
	}
	text := string(blob)
	all := strings.SplitAfter(text, "\n")
	if n := len(all); n > 0 && all[n-1] == "" {
		all = all[:n-1]
	}
	fl := chat.FileLines{Path: p, Commit: sha, TotalLines: len(all), StartLine: start}
	if start > len(all) {
		fl.StartLine, fl.EndLine, fl.Lines = start, start-1, []string{}
		return fl, nil
	}
	end = min(end, len(all))
	fl.EndLine = end
	fl.Lines = make([]string, 0, end-start+1)
	for _, l := range all[start-1 : end] {
		fl.Lines = append(fl.Lines, strings.TrimRight(l, "\r\n"))
	}
	return fl, nil
}
