package dashboard

import (
	"strings"
	"testing"
)

func TestMarkdownKeepsScriptAsText(t *testing.T) {
	md := NewMarkdown()
	for _, tc := range []struct {
		name, src string
		want      []string // substrings of the output
		never     []string
	}{
		{"script block", "<script>alert(1)</script>\n\nafter", []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "<p>after</p>"}, []string{"<script"}},
		{"inline tag", "a <img src=x onerror=alert(1)> b", []string{"&lt;img src=x onerror=alert(1)&gt;"}, []string{"<img", "onerror=alert(1)>"}},
		{"javascript link", "[x](javascript:alert(1))", nil, []string{"javascript:"}},
		{"iframe", "<iframe src=\"https://evil\"></iframe>", []string{"&lt;iframe"}, []string{"<iframe"}},
		{"event attribute via html block", "<div onclick=\"steal()\">hi</div>", []string{"&lt;div onclick="}, []string{"<div onclick"}},
		{"formatting survives", "**bold** and `code`\n\n```go\nx := 1\n```", []string{"<strong>bold</strong>", "<code>code</code>", "x := 1"}, nil},
		{"https link", "[docs](https://example.com/a)", []string{`href="https://example.com/a"`, `rel="nofollow noopener"`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(md.HTML(tc.src))
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("render of %q = %q, want it to contain %q", tc.src, got, w)
				}
			}
			for _, n := range tc.never {
				if strings.Contains(got, n) {
					t.Errorf("render of %q = %q, must not contain %q", tc.src, got, n)
				}
			}
		})
	}
}
