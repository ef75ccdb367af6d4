package api_test

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prchat/prchat/api"
	"github.com/prchat/prchat/chat/chattest"
)

// TestProbe: a worker's probe server answers /healthz and /metrics with
// request ids, and nothing of the API.
func TestProbe(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	probe := api.NewProbe(api.Config{Registry: reg, Logger: slog.New(slog.DiscardHandler)})
	base := serve(t, probe)
	c := newClient(t, base)
	if body := c.expect(t, "GET", "/healthz", nil, http.StatusOK, nil); strings.TrimSpace(string(body)) != `{"status":"ok"}` {
		t.Errorf("healthz = %s", body)
	}
	metrics := string(c.expect(t, "GET", "/metrics", nil, http.StatusOK, nil))
	if !strings.Contains(metrics, `prchat_http_requests_total{method="GET",route="/healthz",status="200"} 1`) {
		t.Errorf("the probe's metrics do not count its requests:\n%s", metrics)
	}
	// Not through c: the document has no 404 for GET /api/v1/repos, which
	// the API itself never answers so.
	resp, err := http.Get(base + "/api/v1/repos")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `"code":"not_found"`) || resp.Header.Get("X-Request-Id") == "" {
		t.Errorf("an API route on the probe = %d %s, want 404 not_found with a request id", resp.StatusCode, body)
	}
	r := c.send(t, "GET", "/healthz", nil, "X-Request-Id", "probe-request-1")
	if got := r.header.Get("X-Request-Id"); got != "probe-request-1" {
		t.Errorf("X-Request-Id = %q, want the client's", got)
	}
}

// TestShutdownBeforeServe: a server stopped before it began to serve (a
// SIGTERM while the process started) serves nothing: Serve closes the
// listener and returns, so that the process's stop does not wait for it
// for good.
func TestShutdownBeforeServe(t *testing.T) {
	t.Parallel()
	probe := api.NewProbe(api.Config{Logger: slog.New(slog.DiscardHandler)})
	if err := probe.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- probe.Serve(ln) }()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after Shutdown: %v", err)
		}
	case <-time.After(chattest.Patience()):
		t.Fatal("Serve after Shutdown is still serving")
	}
	if conn, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		conn.Close()
		t.Error("the listener still takes connections after Serve returned")
	}
}
