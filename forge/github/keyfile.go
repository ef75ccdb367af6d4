package github

import (
	"os"
	"strings"
)

// KeyFileSecrets are the values of a GitHub App's private key file that
// prchat masks: the whole PEM text and each line of its body, so that a
// part of the key shown alone is masked too.
func KeyFileSecrets(file string) []string {
	if file == "" {
		return nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil // New reports it
	}
	out := []string{strings.TrimSpace(string(pem))}
	for _, line := range strings.Split(string(pem), "\n") {
		if line = strings.TrimSpace(line); len(line) >= 16 && !strings.HasPrefix(line, "-----") {
			out = append(out, line)
		}
	}
	return out
}
