package claude

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/chat"
)

// validSessionID reports whether id can name a Claude Code session: a
// UUID in its canonical form.
func validSessionID(id string) bool { return agentsession.IsUUID(id) }

// maxProjectName is the length beyond which the CLI shortens a project
// folder's name and adds a hash of the full path.
const maxProjectName = 200

// projectName returns the name of the folder under <config>/projects that
// holds the sessions run in dir, as the CLI names it: every UTF-16 code
// unit that is not an ASCII letter or digit becomes '-'; a name longer than
// 200 is cut to 200 and followed by '-' and a hash of dir (the 32-bit
// "h*31+c" string hash, absolute, in base 36).
func projectName(dir string) string {
	units := utf16.Encode([]rune(dir))
	name := make([]byte, len(units))
	var h int32
	for i, u := range units {
		h = h*31 + int32(u)
		switch {
		case u >= 'a' && u <= 'z', u >= 'A' && u <= 'Z', u >= '0' && u <= '9':
			name[i] = byte(u)
		default:
			name[i] = '-'
		}
	}
	if len(name) <= maxProjectName {
		return string(name)
	}
	abs := int64(h)
	if abs < 0 {
		abs = -abs
	}
	return string(name[:maxProjectName]) + "-" + strconv.FormatInt(abs, 36)
}

// sessionFiles returns where the session id run in dir may be stored:
// under the project folder of dir, and of dir with its symbolic links
// resolved (the CLI names the folder after its working directory as the
// kernel reports it) when that differs.
func sessionFiles(configDir, dir, id string) []string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	files := []string{filepath.Join(configDir, "projects", projectName(dir), id+".jsonl")}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != dir {
		files = append(files, filepath.Join(configDir, "projects", projectName(real), id+".jsonl"))
	}
	return files
}

// findSession returns the file of session id under any project folder of
// configDir, or "" when there is none. The CLI resumes a session from any
// working directory, so this is what decides whether it can.
func findSession(configDir, id string) string {
	projects := filepath.Join(configDir, "projects")
	entries, err := os.ReadDir(projects)
	if err != nil {
		return ""
	}
	for _, e := range entries {
		f := filepath.Join(projects, e.Name(), id+".jsonl")
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
			return f
		}
	}
	return ""
}

var _ chat.SessionFileBackend = (*Backend)(nil)

// sessionLine is what CheckSessionFile reads of a session file's line.
type sessionLine struct {
	SessionID *string `json:"sessionId"`
	Cwd       string  `json:"cwd"`
}

// CheckSessionFile is the package's CheckSessionFile.
func (b *Backend) CheckSessionFile(data []byte, id string) (chat.SessionFileInfo, error) {
	return CheckSessionFile(data, id)
}

// CheckSessionFile checks that data is a Claude Code session file of
// session id: JSON lines, at least one naming a session, and every line
// that names one naming id. It returns the working directory the file
// records (its first cwd field); a Claude Code session never needs another
// session's file. It is a chat.SessionChecker.
func CheckSessionFile(data []byte, id string) (chat.SessionFileInfo, error) {
	const what = "Claude Code session file"
	if !validSessionID(id) {
		return chat.SessionFileInfo{}, chat.Errorf(chat.CodeInvalid, "%q is not a Claude Code session id (a UUID)", id)
	}
	var info chat.SessionFileInfo
	named := false
	err := agentsession.JSONLines(data, what, func(n int, l []byte) error {
		if !bytes.Contains(l, []byte(`"sessionId"`)) && (info.Cwd != "" || !bytes.Contains(l, []byte(`"cwd"`))) {
			return nil
		}
		var sl sessionLine
		if err := json.Unmarshal(l, &sl); err != nil {
			return chat.Errorf(chat.CodeInvalid, "the %s is damaged: line %d: %v", what, n, err)
		}
		if sl.SessionID != nil {
			if !strings.EqualFold(*sl.SessionID, id) {
				return chat.Errorf(chat.CodeInvalid, "the %s holds session %q (line %d), not %s", what, *sl.SessionID, n, id)
			}
			named = true
		}
		if info.Cwd == "" {
			info.Cwd = sl.Cwd
		}
		return nil
	})
	if err != nil {
		return chat.SessionFileInfo{}, err
	}
	if !named {
		return chat.SessionFileInfo{}, chat.Errorf(chat.CodeInvalid, "the file is not a Claude Code session: no line names a session (sessionId)")
	}
	return info, nil
}

// ReadSessionFile returns the file of session ref as the CLI left it: the
// one under the project folder of ref.Dir, else under any project folder.
func (b *Backend) ReadSessionFile(_ context.Context, ref chat.SessionRef) ([]byte, error) {
	if !validSessionID(ref.ID) {
		return nil, fmt.Errorf("claude-code session %q: not a session id (a UUID): %w", ref.ID, chat.ErrSessionGone)
	}
	files := []string{}
	if ref.Dir != "" {
		files = sessionFiles(b.configDir, ref.Dir, ref.ID)
	}
	if f := findSession(b.configDir, ref.ID); f != "" {
		files = append(files, f)
	}
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil {
			return data, nil
		}
	}
	return nil, fmt.Errorf("claude-code session %s: no session file under %s: %w", ref.ID, filepath.Join(b.configDir, "projects"), chat.ErrSessionGone)
}

// RestoreSession writes each file as the session file of its session run
// in dir, <config dir>/projects/<project folder of dir>/<id>.jsonl, with
// the paths under the file's Cwd mapped to dir (as the kernel names it,
// symbolic links resolved, which is how the CLI names its project folder).
func (b *Backend) RestoreSession(_ context.Context, dir string, files []chat.SessionFile) error {
	real, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("claude-code: restore sessions into %s: %w", dir, err)
	}
	if r, err := filepath.EvalSymlinks(real); err == nil {
		real = r
	}
	for _, f := range files {
		if !validSessionID(f.SessionID) {
			return fmt.Errorf("claude-code: restore session %q: not a session id (a UUID)", f.SessionID)
		}
		path := filepath.Join(b.configDir, "projects", projectName(real), f.SessionID+".jsonl")
		if err := agentsession.WriteFileAtomic(path, agentsession.MapDir(f.Data, f.Cwd, real)); err != nil {
			return fmt.Errorf("claude-code: restore session %s: %w", f.SessionID, err)
		}
	}
	return nil
}
