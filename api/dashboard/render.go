package dashboard

import (
	"bytes"
	"html/template"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/util"
)

// Markdown renders model and repository markdown as HTML that is safe to put
// in a page: goldmark renders it, with raw HTML in the source shown as the
// text it is (a <script> in an answer stays visible text), and bluemonday's
// policy for user content then keeps only formatting elements and
// http(s)/relative links, so no text of an answer or a review can run as
// script or load anything.
type Markdown struct {
	md     goldmark.Markdown
	policy *bluemonday.Policy
}

// NewMarkdown returns a renderer with GitHub's table, strikethrough and
// autolink extensions.
func NewMarkdown() *Markdown {
	p := bluemonday.UGCPolicy()
	p.AllowURLSchemes("http", "https")
	p.RequireNoFollowOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	p.AllowAttrs("class").Matching(bluemonday.SpaceSeparatedTokens).OnElements("code", "pre")
	return &Markdown{
		md: goldmark.New(
			goldmark.WithExtensions(extension.GFM),
			goldmark.WithRendererOptions(renderer.WithNodeRenderers(util.Prioritized(rawAsText{}, 100))),
		),
		policy: p,
	}
}

// HTML renders src as sanitised HTML.
func (m *Markdown) HTML(src string) template.HTML {
	var buf bytes.Buffer
	if err := m.md.Convert([]byte(src), &buf); err != nil {
		// goldmark fails only when writing fails; show the text as text.
		return template.HTML(template.HTMLEscapeString(src))
	}
	return template.HTML(m.policy.SanitizeBytes(buf.Bytes()))
}

// rawAsText renders the source's raw HTML (blocks and inline tags) as
// escaped text instead of dropping it or passing it through.
type rawAsText struct{}

func (rawAsText) RegisterFuncs(r renderer.NodeRendererFuncRegisterer) {
	r.Register(ast.KindHTMLBlock, func(w util.BufWriter, src []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
		n := node.(*ast.HTMLBlock)
		if entering {
			_, _ = w.WriteString(`<pre class="raw">`)
			for i := 0; i < n.Lines().Len(); i++ {
				seg := n.Lines().At(i)
				template.HTMLEscape(w, seg.Value(src))
			}
			return ast.WalkContinue, nil
		}
		if n.HasClosure() {
			template.HTMLEscape(w, n.ClosureLine.Value(src))
		}
		_, _ = w.WriteString("</pre>\n")
		return ast.WalkContinue, nil
	})
	r.Register(ast.KindRawHTML, func(w util.BufWriter, src []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			n := node.(*ast.RawHTML)
			for i := 0; i < n.Segments.Len(); i++ {
				seg := n.Segments.At(i)
				template.HTMLEscape(w, seg.Value(src))
			}
		}
		return ast.WalkSkipChildren, nil
	})
}
