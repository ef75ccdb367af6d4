package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// TestSecretKeyFileIsMadeOnce: processes that start together on one key
// file (a shared volume) all read the one key the first of them made,
// owner-only; PRCHAT_SECRET_KEY wins over the file.
func TestSecretKeyFileIsMadeOnce(t *testing.T) {
	t.Parallel()
	cfg := Config{DataDir: t.TempDir(), SecretKeyFile: filepath.Join(t.TempDir(), "shared", "secret.key")}
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := cfg.secretKey()
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for _, k := range keys {
		if len(k) < 32 || string(k) != string(keys[0]) {
			t.Fatalf("keys read: %q", keys)
		}
	}
	st, err := os.Stat(cfg.SecretKeyFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v, want mode 0600", st, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(cfg.SecretKeyFile)); len(entries) != 1 {
		t.Errorf("the key's directory holds %d files, want the key alone", len(entries))
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "secret.key")); !os.IsNotExist(err) {
		t.Errorf("a key was made in the data directory too: %v", err)
	}
	cfg.SecretKey = "a-key-of-the-environment-0123456789"
	if k, err := cfg.secretKey(); err != nil || string(k) != cfg.SecretKey {
		t.Errorf("with PRCHAT_SECRET_KEY set: %q, %v", k, err)
	}
}

// TestSecretKeyPlaceholderRefused: the deploy files' CHANGE-ME placeholder
// is no key, in the environment or in the file.
func TestSecretKeyPlaceholderRefused(t *testing.T) {
	t.Parallel()
	_, err := Config{SecretKey: "CHANGE-ME-to-the-output-of-openssl-rand-hex-32"}.secretKey()
	if err == nil || !strings.Contains(err.Error(), "placeholder") || !strings.Contains(err.Error(), "openssl rand -hex 32") {
		t.Errorf("the placeholder in PRCHAT_SECRET_KEY: %v", err)
	}
	file := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(file, []byte("change-me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (Config{SecretKeyFile: file}).secretKey(); err == nil || !strings.Contains(err.Error(), "placeholder") {
		t.Errorf("the placeholder in the key file: %v", err)
	}
}
