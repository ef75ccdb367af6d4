package agentsession_test

import (
	"testing"

	"github.com/prchat/prchat/agentsession"
)

func TestMapDir(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, from, to, want string }{
		{"whole and prefix", `{"cwd":"/l/r","p":"/l/r/a.go"}`, "/l/r", "/w/run-1", `{"cwd":"/w/run-1","p":"/w/run-1/a.go"}`},
		{"in text", `{"t":"cat /l/r/a.go && ls /l/r"}`, "/l/r", "/w", `{"t":"cat /w/a.go && ls /w"}`},
		{"longer name untouched", `{"p":"/l/r2/a.go","q":"/x/l/r"}`, "/l/r", "/w", `{"p":"/l/r2/a.go","q":"/x/l/r"}`},
		{"escaped", `{"p":"/l/a\"b/c"}`, `/l/a"b`, "/w", `{"p":"/w/c"}`},
		{"same", `{"p":"/l/r"}`, "/l/r", "/l/r/", `{"p":"/l/r"}`},
		{"no from", `{"p":"/l/r"}`, "", "/w", `{"p":"/l/r"}`},
		{"root is never mapped", `{"p":"/l/r"}`, "/", "/w", `{"p":"/l/r"}`},
	} {
		if got := string(agentsession.MapDir([]byte(tc.in), tc.from, tc.to)); got != tc.want {
			t.Errorf("%s: MapDir(%s, %q, %q) = %s, want %s", tc.name, tc.in, tc.from, tc.to, got, tc.want)
		}
	}
}
