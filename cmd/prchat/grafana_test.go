package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prchat/prchat/chat/chattest"
)

// TestGrafanaDashboardQueriesExistingMetrics checks that every metric the
// Grafana dashboard in deploy/ queries is one a daemon serves at /metrics
// once it has answered a question.
func TestGrafanaDashboardQueriesExistingMetrics(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../deploy/grafana/prchat-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	e := setup(t, mode{name: "embedded"}, nil)
	conv, _ := e.ask(e.review("local", nil), "Why does Load refuse an empty path?")
	e.wait(conv, 1)

	// The turn reads settled once its state is stored; the worker counts
	// it a moment later.
	served := map[string]string{} // family -> type
	chattest.Eventually(t, "the settled turn in /metrics", func() bool {
		resp, err := http.Get(e.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		clear(served)
		for _, line := range strings.Split(string(body), "\n") {
			if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
				served[f[2]] = f[3]
			}
		}
		return strings.Contains(string(body), "\nprchat_turns_total{")
	})
	name := regexp.MustCompile(`\bprchat_[a-z0-9_]+`)
	queried := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range name.FindAllString(tg.Expr, -1) {
				queried++
				family := m
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if base, ok := strings.CutSuffix(m, suffix); ok && served[base] == "histogram" {
						family = base
					}
				}
				if _, ok := served[family]; !ok {
					t.Errorf("panel %q queries %s, which /metrics does not serve", p.Title, m)
				}
			}
		}
	}
	if queried == 0 {
		t.Fatal("the dashboard queries no prchat metric")
	}
}
