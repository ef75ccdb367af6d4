package github_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prchat/prchat/chat/mask"
	"github.com/prchat/prchat/forge/github"
)

// TestAppKeyIsMaskedByValue (issue: the GitHub App's private key was not
// masked by value): the key file's text, and each line of its body alone,
// are masked by the daemon's masker.
func TestAppKeyIsMaskedByValue(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	text := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	file := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	m := mask.New(github.KeyFileSecrets(file)...)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	body := lines[1 : len(lines)-1]
	for _, s := range []string{text, "key: " + body[3] + " end", strings.Join(body[5:9], "\n")} {
		got := m.String(s)
		for _, l := range body {
			if strings.Contains(got, l) {
				t.Fatalf("a line of the App's key is shown: %q in %.200q", l, got)
			}
		}
	}
	if github.KeyFileSecrets("") != nil {
		t.Error("no key file gives secrets")
	}
}
