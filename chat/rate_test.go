package chat_test

import (
	"strconv"
	"testing"

	"github.com/prchat/prchat/chat"
)

func TestParseRate(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"50/s": "50/1s", "120/m": "120/1m0s", "5/h": "5/1h0m0s", "3/10s": "3/10s", "0": "0/0s"} {
		r, err := chat.ParseRate(in)
		if err != nil {
			t.Errorf("ParseRate(%q): %v", in, err)
			continue
		}
		if got := strconv.Itoa(r.Count) + "/" + r.Per.String(); got != want {
			t.Errorf("ParseRate(%q) = %s, want %s", in, got, want)
		}
	}
	for _, bad := range []string{"fast", "5", "5/week", "-1/s", "x/s"} {
		if _, err := chat.ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) took it", bad)
		}
	}
}
