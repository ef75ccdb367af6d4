package agentsession

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/prchat/prchat/chat"
)

// MapDir returns data, a session file of JSON lines, with the directory
// from replaced by to wherever it appears as a whole path or as the start
// of one (followed by a separator or the end of the string), in the
// file's JSON-escaped form: a session moved to another run directory then
// finds its earlier files there. An empty from, or from == to, returns
// data as it is.
func MapDir(data []byte, from, to string) []byte {
	from, to = filepath.Clean(from), filepath.Clean(to)
	if from == "." || from == to || from == string(filepath.Separator) {
		return data
	}
	old, repl := jsonEscaped(from), jsonEscaped(to)
	if !bytes.Contains(data, old) {
		return data
	}
	out := make([]byte, 0, len(data)+len(data)/16)
	for {
		i := bytes.Index(data, old)
		if i < 0 {
			return append(out, data...)
		}
		end := i + len(old)
		if pathEnds(data, end) && pathStarts(data, i) {
			out = append(append(out, data[:i]...), repl...)
		} else {
			out = append(out, data[:end]...)
		}
		data = data[end:]
	}
}

// jsonEscaped is s as it appears inside a JSON string, without the quotes.
func jsonEscaped(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(bytes.TrimSuffix(b.Bytes(), []byte("\n")), []byte(`"`))[1:]
}

// pathEnds reports whether a path may end at data[i]: at the end, or
// before a character that cannot continue a file name's part.
func pathEnds(data []byte, i int) bool {
	if i >= len(data) {
		return true
	}
	return !isNameByte(data[i])
}

// pathStarts reports whether a path may start at data[i]: not in the
// middle of a longer name (/x/tmp/run is not /tmp/run).
func pathStarts(data []byte, i int) bool {
	return i == 0 || !isNameByte(data[i-1])
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c >= 0x80
}

// JSONLines calls line for each line of data, a session file of JSON
// objects one a line (blank lines skipped), and stops at the first error.
// A line that is not a JSON object (such as the cut last line of a
// truncated file) is an *Error with CodeInvalid naming it.
func JSONLines(data []byte, what string, line func(n int, l []byte) error) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return chat.Errorf(chat.CodeInvalid, "the %s is empty", what)
	}
	n := 0
	for len(data) > 0 {
		l := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		n++
		l = bytes.TrimSpace(l)
		if len(l) == 0 {
			continue
		}
		if l[0] != '{' || !json.Valid(l) {
			return chat.Errorf(chat.CodeInvalid, "the %s is not JSON lines: line %d is not a JSON object (a truncated or damaged file?)", what, n)
		}
		if err := line(n, l); err != nil {
			return err
		}
	}
	return nil
}

// WriteFileAtomic writes data to path through a temporary file in the
// same directory and a rename, so that a CLI reading path never sees half
// a file. It makes the directory if needed; the file is private (0600).
func WriteFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".restore-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp.Name(), path)
}
