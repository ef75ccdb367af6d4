package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

// TestHelpListsEverySetting: --help names each setting's variable, flag
// and default.
func TestHelpListsEverySetting(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if code := Main(t.Context(), []string{"serve", "--help"}, func(string) string { return "" }, &out, &out); code != 0 {
		t.Fatalf("serve --help exited %d:\n%s", code, &out)
	}
	for _, s := range settings() {
		if !strings.Contains(out.String(), "--"+s.flagName()+"  ("+s.env+", default ") {
			t.Errorf("--help lacks %s (--%s):\n%s", s.env, s.flagName(), &out)
		}
	}
	if !strings.Contains(out.String(), "--cpuprofile FILE  (flag only, default none)") {
		t.Errorf("--help does not list --cpuprofile:\n%s", &out)
	}
	if strings.Contains(out.String(), "bench") {
		t.Errorf("--help of a production build speaks of the bench:\n%s", &out)
	}
	if !strings.Contains(out.String(), "(PRCHAT_POLL_INTERVAL, default 5ms)") {
		t.Errorf("--help does not give the poll interval's default of 5ms:\n%s", &out)
	}
}

// TestSettingsFromEnvironmentAndFlags: a flag wins over its variable, which
// wins over the default; a bad value is an error naming the setting.
func TestSettingsFromEnvironmentAndFlags(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PRCHAT_POLL_INTERVAL": "20ms", "PRCHAT_CONCURRENCY": "8"}
	cfg, err := loadConfig("serve", []string{"--concurrency", "2"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PollInterval != 20*time.Millisecond || cfg.Concurrency != 2 || cfg.TurnTimeout != 10*time.Minute {
		t.Errorf("poll interval %v, concurrency %d, turn timeout %v; want 20ms, 2, 10m", cfg.PollInterval, cfg.Concurrency, cfg.TurnTimeout)
	}
	for _, bad := range []struct{ env, value, want string }{
		{"PRCHAT_POLL_INTERVAL", "500us", "PRCHAT_POLL_INTERVAL (--poll-interval): 500µs is under 1ms"},
		{"PRCHAT_POLL_INTERVAL", "soon", "PRCHAT_POLL_INTERVAL (--poll-interval): not a duration"},
		{"PRCHAT_IDLE_POLL_INTERVAL", "1m", "PRCHAT_IDLE_POLL_INTERVAL (--idle-poll-interval): 1m0s is over 10s"},
		{"PRCHAT_CONCURRENCY", "many", "PRCHAT_CONCURRENCY (--concurrency): not a whole number"},
	} {
		_, err := loadConfig("serve", nil, func(k string) string {
			if k == bad.env {
				return bad.value
			}
			return ""
		}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s=%s: %v, want an error with %q", bad.env, bad.value, err, bad.want)
		}
	}
}
