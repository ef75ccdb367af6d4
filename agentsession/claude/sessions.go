package claude

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"unicode/utf16"
)

// uuidPattern is a session id the CLI accepts: a UUID in its canonical
// form.
var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// validSessionID reports whether id can name a Claude Code session.
func validSessionID(id string) bool { return uuidPattern.MatchString(id) }

// newSessionID returns a random (version 4) UUID.
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

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

// sessionLocks serialises the runs of the CLI on one session: a resume
// appends to the session's file and holds it alone; forks only read it and
// may run together. Waiting for a lock ends with the context.
type sessionLocks struct {
	mu    sync.Mutex
	locks map[string]*sessionLock
}

// sessionLock is the state of one session's lock.
type sessionLock struct {
	readers int
	writer  bool
	refs    int           // holders and waiters; the entry goes at zero
	changed chan struct{} // closed and replaced when the lock is released
}

// lock takes the lock of session id, exclusively when write, and returns
// its release function.
func (l *sessionLocks) lock(ctx context.Context, id string, write bool) (func(), error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*sessionLock{}
	}
	s, ok := l.locks[id]
	if !ok {
		s = &sessionLock{changed: make(chan struct{})}
		l.locks[id] = s
	}
	s.refs++
	for {
		free := !s.writer && (!write || s.readers == 0)
		if free {
			if write {
				s.writer = true
			} else {
				s.readers++
			}
			l.mu.Unlock()
			return func() { l.unlock(id, s, write) }, nil
		}
		changed := s.changed
		l.mu.Unlock()
		select {
		case <-changed:
			l.mu.Lock()
		case <-ctx.Done():
			l.mu.Lock()
			l.release(id, s)
			l.mu.Unlock()
			return nil, fmt.Errorf("wait for session %s, which another run is using: %w", id, ctx.Err())
		}
	}
}

// unlock releases a lock taken by lock.
func (l *sessionLocks) unlock(id string, s *sessionLock, write bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if write {
		s.writer = false
	} else {
		s.readers--
	}
	close(s.changed)
	s.changed = make(chan struct{})
	l.release(id, s)
}

// release drops one reference to s; l.mu is held.
func (l *sessionLocks) release(id string, s *sessionLock) {
	s.refs--
	if s.refs == 0 {
		delete(l.locks, id)
	}
}
