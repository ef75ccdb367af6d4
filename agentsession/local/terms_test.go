package local

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExtractTerms(t *testing.T) {
	t.Parallel()
	type tm struct {
		Text, Match string
		Kind        kind
	}
	tests := []struct {
		question string
		want     []tm
	}{
		{"Where is parseConfig defined?", []tm{{"parseConfig", "parseconfig", kindIdent}}},
		{"Why does max_retries default to 3 in main.go?", []tm{
			{"main.go", "main.go", kindFile}, {"max_retries", "max_retries", kindIdent}, {"default", "default", kindWord}}},
		{"Does Config.Validate check `timeout`?", []tm{
			{"Config.Validate", "config.validate", kindQualified}, {"timeout", "timeout", kindIdent},
			{"Validate", "validate", kindIdent}, {"check", "check", kindWord}}},
		{"Is chat/mask/rules.go used by chat/mask?", []tm{
			{"chat/mask/rules.go", "chat/mask/rules.go", kindFile}, {"chat/mask", "chat/mask", kindPath}}},
		{"How are retries handled when parsing failed requests, e.g. in HTTPServer?", []tm{
			{"HTTPServer", "httpserver", kindIdent}, {"retries", "retri", kindWord}, {"handled", "handl", kindWord},
			{"parsing", "pars", kindWord}, {"failed", "fail", kindWord}, {"requests", "request", kindWord}}},
		{"Why? What is this for?", nil},
		{"read-only sha256 checks", []tm{
			{"sha256", "sha256", kindIdent}, {"read", "read", kindWord}, {"checks", "check", kindWord}}},
		{"See https://example.com/x.y and version 1.2.3", []tm{{"version", "version", kindWord}}},
	}
	for _, tt := range tests {
		var got []tm
		for _, term := range extractTerms(tt.question) {
			got = append(got, tm{term.Text, term.match, term.kind})
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("extractTerms(%q) (-want +got):\n%s", tt.question, diff)
		}
	}
}

func TestExtractTermsBounded(t *testing.T) {
	t.Parallel()
	q := ""
	for i := range 40 {
		q += " ident_" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	if got := len(extractTerms(q)); got != maxTerms {
		t.Errorf("%d terms, want %d", got, maxTerms)
	}
}

func TestDefines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line, name string
		want       bool
	}{
		{"func parseconfig(lines []string) {", "parseconfig", true},
		{"func (c *config) validate() error {", "validate", true},
		{"def parse_config(path):", "parse_config", true},
		{"export const maxretries = 3", "maxretries", true},
		{"class widget:", "widget", true},
		{"max_retries: 5", "max_retries", true},
		{`  "max_retries": 5,`, "max_retries", true},
		{"max_retries == 5", "max_retries", false},
		{"c, _ := parseconfig(nil)", "parseconfig", false},
		{"return parseconfig(x)", "parseconfig", false},
		{"// parseconfig reads", "parseconfig", false},
	}
	for _, tt := range tests {
		at := indexOf(tt.line, tt.name)
		if got := defines([]byte(tt.line), at, len(tt.name)); got != tt.want {
			t.Errorf("defines(%q, %q) = %v, want %v", tt.line, tt.name, got, tt.want)
		}
	}
}

func indexOf(s, sub string) int {
	for i := range len(s) - len(sub) + 1 {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
