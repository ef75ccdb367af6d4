package claude

import (
	"os"
	"path/filepath"
	"strconv"
	"unicode/utf16"

	"github.com/prchat/prchat/agentsession"
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
