package api_test

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/prchat/prchat/api"
	"github.com/prchat/prchat/api/dashboard"
	"github.com/prchat/prchat/chat"
)

// TestOptionsAndWrongMethods (DESIGN §6): on every documented path,
// OPTIONS answers 204 with Allow naming the documented methods, and a
// method the path does not serve answers 405 with the same Allow and the
// error JSON; both are in the API document (the client checks every
// answer against it). A wildcard's rest of the path may hold slashes.
func TestOptionsAndWrongMethods(t *testing.T) {
	t.Parallel()
	dash, err := dashboard.New(dashboard.Config{AdminQueues: http.NotFoundHandler()}, dashboard.Reads{Repositories: (*chat.Admin)(nil), Conversations: (*chat.Turns)(nil), Reports: (*chat.Reports)(nil)})
	if err != nil {
		t.Fatal(err)
	}
	f := setup(t, func(o *options) { o.api.Dashboard = dash })
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{"owner": "acme", "repo": "widget", "pr": "7", "version": "1", "id": "00000000-0000-0000-0000-000000000000", "n": "1", "path": "static/js/app.js"}
	param := regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)
	for tmpl, item := range doc.Paths.Map() {
		path := param.ReplaceAllStringFunc(tmpl, func(m string) string { return values[m[1:len(m)-1]] })
		var want []string
		for method := range item.Operations() {
			want = append(want, method)
		}
		slices.Sort(want)
		allow := func(r response) []string {
			got := strings.Split(r.header.Get("Allow"), ", ")
			slices.Sort(got)
			return got
		}
		t.Run(tmpl, func(t *testing.T) {
			r := f.c.send(t, http.MethodOptions, path, nil)
			if r.status != http.StatusNoContent || !slices.Equal(allow(r), want) {
				t.Errorf("OPTIONS %s = %d, Allow %q; want 204, Allow of %v", path, r.status, r.header.Get("Allow"), want)
			}
			for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
				if slices.Contains(want, m) {
					continue
				}
				r := f.c.send(t, m, path, nil)
				if r.status != http.StatusMethodNotAllowed || !slices.Equal(allow(r), want) || !strings.Contains(string(r.body), `"code":"invalid"`) {
					t.Errorf("%s %s = %d, Allow %q, %s; want 405, Allow of %v, invalid", m, path, r.status, r.header.Get("Allow"), r.body, want)
				}
				break // one wrong method per path is enough
			}
		})
	}
}
