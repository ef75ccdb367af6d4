// Package secretkey reads the key that every process of a prchat
// deployment seals stored provider keys and session files with: the
// value given (PRCHAT_SECRET_KEY), or the key file, which the first
// process to find none makes (owner-only) so that a single-host
// deployment needs no setting. The deploy files' CHANGE-ME placeholder is
// refused wherever it is found.
package secretkey

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Load returns value when it is set, or else the key in the file at path,
// made first when there is none.
func Load(value, path string) ([]byte, error) {
	if value != "" {
		if placeholder(value) {
			return nil, errors.New("PRCHAT_SECRET_KEY is still the example's placeholder: set a random one, the same for every process (openssl rand -hex 32)")
		}
		return []byte(value), nil
	}
	key, err := read(path)
	if !errors.Is(err, os.ErrNotExist) {
		return key, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	// Written aside, then linked into place: a process starting beside
	// this one reads the whole key or none, and the first link wins.
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	tmp, err := os.CreateTemp(filepath.Dir(path), ".secret.key-*")
	if err != nil {
		return nil, fmt.Errorf("write the secret key: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(hex.EncodeToString(raw[:]) + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp.Name(), path)
	}
	if err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("write the secret key: %w", err)
	}
	return read(path)
}

// read reads the key file at path.
func read(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("read the secret key: %w", err)
	}
	key := bytes.TrimSpace(b)
	if placeholder(string(key)) {
		return nil, fmt.Errorf("the secret key in %s is still the example's placeholder: put a random one there (openssl rand -hex 32)", path)
	}
	return key, nil
}

// placeholder reports whether a secret is the deploy files' CHANGE-ME
// placeholder.
func placeholder(secret string) bool {
	return strings.HasPrefix(strings.ToUpper(secret), "CHANGE-ME")
}
