package openai

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/prchat/prchat/chat"
)

// toolError is an error a tool reports to the model: bad arguments, a path
// it may not read, a missing file. Its text is written for the model.
type toolError struct{ msg string }

func (e *toolError) Error() string { return e.msg }

// toolErrorf returns a *toolError with a formatted message.
func toolErrorf(format string, args ...any) error {
	return &toolError{msg: fmt.Sprintf(format, args...)}
}

// cleanPath checks a path the model gave and returns it clean and
// slash-separated, "." for the repository root ("" and "." name it). It
// refuses absolute paths, paths that leave the repository (..), and paths
// into .git or prchat's private folder. It looks at the text only; see
// (*toolbox).resolve for symbolic links.
func cleanPath(p string) (string, error) {
	switch {
	case p == "" || p == ".":
		return ".", nil
	case strings.ContainsAny(p, "\x00\n\r"):
		return "", toolErrorf("path %q has a forbidden character", p)
	case path.IsAbs(p) || filepath.IsAbs(p):
		return "", toolErrorf("path %q is absolute: give a path relative to the repository root", p)
	}
	c := path.Clean(p)
	if c == "." {
		return ".", nil
	}
	if !filepath.IsLocal(filepath.FromSlash(c)) {
		return "", toolErrorf("path %q leads outside the repository", p)
	}
	if err := forbidden(c); err != nil {
		return "", err
	}
	return c, nil
}

// forbidden refuses a clean repository-relative path into .git (at any
// depth) or into prchat's private folder.
func forbidden(rel string) error {
	parts := strings.Split(rel, "/")
	if strings.EqualFold(parts[0], chat.PrivateDir) {
		return toolErrorf("path %q is in prchat's private folder %s, which the tools do not read (the review is in the prompt)", rel, chat.PrivateDir)
	}
	for _, part := range parts {
		if strings.EqualFold(part, ".git") {
			return toolErrorf("path %q is in git's internals (.git), which the tools do not read", rel)
		}
	}
	return nil
}

// resolve returns the real location of a path the model gave, following
// symbolic links, and its clean form. It refuses what cleanPath refuses,
// and a path whose real location is outside the repository or in a place
// cleanPath refuses (a link to .git/config, say).
func (tb *toolbox) resolve(p string) (abs, rel string, err error) {
	rel, err = cleanPath(p)
	if err != nil {
		return "", "", err
	}
	if rel == "." {
		return tb.root, rel, nil
	}
	real, err := filepath.EvalSymlinks(filepath.Join(tb.root, filepath.FromSlash(rel)))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "", toolErrorf("%s: no such file or directory", rel)
	case err != nil:
		return "", "", toolErrorf("%s: cannot be read", rel)
	}
	within, err := filepath.Rel(tb.root, real)
	if err != nil || !filepath.IsLocal(within) {
		if within == "." {
			return tb.root, rel, nil
		}
		return "", "", toolErrorf("path %q leads outside the repository (through a symbolic link)", rel)
	}
	if err := forbidden(filepath.ToSlash(within)); err != nil {
		return "", "", toolErrorf("path %q leads into a folder the tools do not read (through a symbolic link)", rel)
	}
	return real, rel, nil
}

// realRoot returns the real location of a run directory.
func realRoot(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("the request has no run directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("run directory %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("run directory %s: %w", dir, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("run directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("run directory %s is not a directory", dir)
	}
	return real, nil
}
