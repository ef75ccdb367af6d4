package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/prchat/prchat/chat/chattest"
)

// tokenCLI runs `prchat token` on the database of cfg.
func tokenCLI(t *testing.T, cfg Config, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(k string) string {
		switch k {
		case "PRCHAT_DATA_DIR":
			return cfg.DataDir
		case "PRCHAT_DATABASE_URL":
			return cfg.DatabaseURL
		}
		return ""
	}
	code = Main(context.Background(), append([]string{"token"}, args...), getenv, &out, &errOut)
	return code, out.String(), errOut.String()
}

// statusWith sends GET path with a bearer token ("" for none).
func statusWith(t *testing.T, base, path, token string) int {
	t.Helper()
	req, err := http.NewRequest("GET", base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestStartRefusesAnOpenNonLoopbackAPI: with no token, an API on a
// non-loopback address does not start unless PRCHAT_INSECURE_NO_AUTH; once
// a token exists (made with prchat token create) it starts and needs it.
func TestStartRefusesAnOpenNonLoopbackAPI(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			e := prepare(t, m, func(c *Config) { c.Listen = "0.0.0.0:0" })
			for _, r := range []role{roleOf("serve"), roleOf("api")} {
				if !r.embedded && e.cfg.RedisURL == "" {
					continue
				}
				d, err := start(context.Background(), e.cfg, r, e.opts)
				if !errors.Is(err, errOpenNonLoopback) {
					if d != nil {
						d.Stop()
					}
					t.Fatalf("start on 0.0.0.0 with no token: %v, want the refusal", err)
				}
			}
			insecure := e.cfg
			insecure.InsecureNoAuth = true
			d := e.boot(roleOf("serve"), insecure)
			if got := statusWith(t, d.URL(), "/api/v1/repos", ""); got != http.StatusOK {
				t.Errorf("insecure open API: %d", got)
			}
			d.Stop()

			code, out, errOut := tokenCLI(t, e.cfg, "create", "--name", "first admin", "--scope", "admin")
			if code != 0 {
				t.Fatalf("token create: exit %d: %s", code, errOut)
			}
			token := strings.TrimSpace(out)
			d = e.boot(roleOf("serve"), e.cfg)
			if got := statusWith(t, d.URL(), "/api/v1/repos", ""); got != http.StatusUnauthorized {
				t.Errorf("without a token: %d, want 401", got)
			}
			if got := statusWith(t, d.URL(), "/api/v1/repos", token); got != http.StatusOK {
				t.Errorf("with the token: %d, want 200", got)
			}
			if got := statusWith(t, d.URL(), "/healthz", ""); got != http.StatusOK {
				t.Errorf("healthz without a token: %d", got)
			}
		})
	}
}

// TestTokenCommandAndClients: the first token made with the CLI while the
// daemon runs is enforced within a second or so; prchat review record and
// prchat ask send PRCHAT_TOKEN; a token revoked with the CLI is refused.
func TestTokenCommandAndClients(t *testing.T) {
	t.Parallel()
	e := setup(t, mode{name: "embedded"}, nil)
	if got := statusWith(t, e.url, "/api/v1/repos", ""); got != http.StatusOK {
		t.Fatalf("open API before any token: %d", got)
	}
	code, admin, errOut := tokenCLI(t, e.cfg, "create", "--name", "admin", "--scope", "admin")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	admin = strings.TrimSpace(admin)
	if !strings.Contains(errOut, "shown this once") {
		t.Errorf("create says %q", errOut)
	}
	_, asker, _ := tokenCLI(t, e.cfg, "create", "--name", "asker", "--scope", "ask", "--repo", e.repo)
	asker = strings.TrimSpace(asker)
	chattest.Eventually(t, "the token made with the CLI to be enforced", func() bool { return statusWith(t, e.url, "/api/v1/repos", "") == http.StatusUnauthorized })

	client := func(token string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		getenv := func(k string) string {
			switch k {
			case "PRCHAT_SERVER":
				return e.url
			case "PRCHAT_TOKEN":
				return token
			}
			return ""
		}
		code := Main(context.Background(), args, getenv, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	md := t.TempDir() + "/review.md"
	if err := os.WriteFile(md, []byte("Load now refuses an empty path.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	record := []string{"review", "record", "--repo", e.repo, "--pr", "7", "--backend", "local", "--head", e.head, "--base", e.base, "--markdown-file", md}
	if code, _, errOut := client("", record...); code == 0 || !strings.Contains(errOut, "unauthorized") {
		t.Errorf("review record without a token: exit %d, %s", code, errOut)
	}
	if code, _, errOut := client(asker, record...); code == 0 || !strings.Contains(errOut, "forbidden") {
		t.Errorf("review record with an ask token: exit %d, %s", code, errOut)
	}
	if code, out, errOut := client(admin, record...); code != 0 {
		t.Fatalf("review record with the admin token: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut := client(asker, "ask", "--repo", e.repo, "--pr", "7", "Where is errEmptyPath?")
	if code != 0 {
		t.Fatalf("ask with PRCHAT_TOKEN: exit %d\n%s\n%s", code, out, errOut)
	}

	_, list, _ := tokenCLI(t, e.cfg, "list")
	if !strings.Contains(list, "asker") || !strings.Contains(list, e.repo) || strings.Contains(list, asker) {
		t.Errorf("token list:\n%s", list)
	}
	var id string
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == "asker" {
			id = f[0]
		}
	}
	if code, out, errOut := tokenCLI(t, e.cfg, "revoke", id); code != 0 || !strings.Contains(out, "revoked") {
		t.Fatalf("revoke: exit %d %s %s", code, out, errOut)
	}
	if got := statusWith(t, e.url, "/api/v1/repos", asker); got != http.StatusUnauthorized {
		t.Errorf("a revoked token: %d, want 401", got)
	}
	if code, _, _ := tokenCLI(t, e.cfg, "create", "--name", "x"); code != 2 {
		t.Errorf("create without --scope: exit %d, want 2", code)
	}
	if code, _, errOut := tokenCLI(t, e.cfg, "create", "--name", "x", "--scope", "root"); code != 2 || !strings.Contains(errOut, "read, ask or admin") {
		t.Errorf("create with scope root: exit %d, %s", code, errOut)
	}
}

func TestLoopback(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:8080": true, "localhost:8080": true, "127.1.2.3:1": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.0.0.5:8080": false, "example.com:80": false, "nonsense": false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
