package claude

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"sync"
)

// ModelEnv returns the names of the variables, besides
// agentsession.CommonEnv, that the CLI takes from the worker's environment:
// the Anthropic API's key, token, endpoint and models (ANTHROPIC_*), the
// CLI's configuration directory and its own switches (CLAUDE_CODE_*, such as
// CLAUDE_CODE_USE_BEDROCK; a cloud's credentials are added by name with
// Config.ExtraEnv), its telemetry and update switches, and Node's extra CA
// certificates. A name ending in '*' stands for every name with that
// prefix.
func ModelEnv() []string {
	return []string{
		"ANTHROPIC_*", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_*",
		"DISABLE_AUTOUPDATER", "DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING",
		"DISABLE_NON_ESSENTIAL_MODEL_CALLS", "NODE_EXTRA_CA_CERTS",
	}
}

// nonEmpty returns the non-empty strings of list.
func nonEmpty(list []string) []string {
	var out []string
	for _, s := range list {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// lookupEnv returns the last value of key in env, or "".
func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// secretValues returns the values of the variables in env whose names
// look secret (keys, tokens, passwords), long enough to be worth hiding.
func secretValues(env []string) []string {
	var out []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		k = strings.ToUpper(k)
		if len(v) < 8 {
			continue
		}
		for _, word := range []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "AUTH", "CREDENTIAL"} {
			if strings.Contains(k, word) {
				out = append(out, v)
				break
			}
		}
	}
	return out
}

// tail keeps the last max bytes written to it. It is safe for concurrent
// use.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.ToValidUTF8(string(t.buf), "")
}

// lineReader reads lines of any length up to max bytes.
type lineReader struct {
	r   *bufio.Reader
	max int
}

// next returns the next line without its newline; nil for a line longer
// than l.max, which is skipped. The error is io.EOF at the end.
func (l *lineReader) next() ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := l.r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > l.max {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		switch {
		case err == nil:
			if tooLong {
				return nil, nil
			}
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			if tooLong || len(line) == 0 {
				return nil, err
			}
			return line, err
		}
	}
}

// readLines calls handle with each line read from r, skipping lines
// longer than limit bytes, until r ends; it drains r in any case.
func readLines(r io.Reader, limit int, handle func([]byte)) {
	lr := &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: limit}
	for {
		line, err := lr.next()
		if line != nil {
			handle(line)
		}
		if err != nil {
			_, _ = io.Copy(io.Discard, r)
			return
		}
	}
}
