package cliflag

import (
	"bytes"
	"flag"
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
