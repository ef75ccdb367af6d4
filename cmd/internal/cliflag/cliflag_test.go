package cliflag

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestPrint(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("server", "http://127.0.0.1:8080", "the `URL` of the server")
	fs.Int("pr", 0, "pull request number")
	fs.Bool("json", false, "print JSON")
	fs.Duration("wait", 0, "how long")
	var out bytes.Buffer
	Print(&out, fs)
	want := "  --json\n    \tprint JSON\n" +
		"  --pr int\n    \tpull request number\n" +
		"  --server URL\n    \tthe URL of the server (default http://127.0.0.1:8080)\n" +
		"  --wait duration\n    \thow long (default 0s)\n"
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", &out, want)
	}
}

// TestParse: help is printed to help and is flag.ErrHelp; a mistake is a
// UsageError and prints nothing.
func TestParse(t *testing.T) {
	newFS := func() *flag.FlagSet {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.Int("pr", 0, "pull request number")
		return fs
	}
	var help bytes.Buffer
	if err := Parse(newFS(), []string{"--help"}, &help); !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "pull request number") {
		t.Errorf("--help: %v, printed %q", err, &help)
	}
	help.Reset()
	var ue UsageError
	if err := Parse(newFS(), []string{"--pr", "x"}, &help); !errors.As(err, &ue) || help.Len() != 0 {
		t.Errorf("a bad value: %v, printed %q; want a UsageError and nothing printed", err, &help)
	}
	if err := Parse(newFS(), []string{"--pr", "7"}, &help); err != nil {
		t.Errorf("a good value: %v", err)
	}
}
