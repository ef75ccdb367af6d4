package secretkey

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestSecretKeyFileIsMadeOnce: processes that start together on one key
// file (a shared volume) all read the one key the first of them made,
// owner-only; a value given wins over the file.
func TestSecretKeyFileIsMadeOnce(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "shared", "secret.key")
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := Load("", file)
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
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v, want mode 0600", st, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(file)); len(entries) != 1 {
		t.Errorf("the key's directory holds %d files, want the key alone", len(entries))
	}
	const env = "a-key-of-the-environment-0123456789"
	if k, err := Load(env, file); err != nil || string(k) != env {
		t.Errorf("with PRCHAT_SECRET_KEY set: %q, %v", k, err)
	}
}

// TestSecretKeyPlaceholderRefused: the deploy files' CHANGE-ME placeholder
// is no key, in the environment or in the file.
func TestSecretKeyPlaceholderRefused(t *testing.T) {
	t.Parallel()
	_, err := Load("CHANGE-ME-to-the-output-of-openssl-rand-hex-32", filepath.Join(t.TempDir(), "secret.key"))
	if err == nil || !strings.Contains(err.Error(), "placeholder") || !strings.Contains(err.Error(), "openssl rand -hex 32") {
		t.Errorf("the placeholder in PRCHAT_SECRET_KEY: %v", err)
	}
	file := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(file, []byte("change-me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load("", file); err == nil || !strings.Contains(err.Error(), "placeholder") {
		t.Errorf("the placeholder in the key file: %v", err)
	}
}
