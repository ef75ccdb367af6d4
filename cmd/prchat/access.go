package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/cmd/internal/cliflag"
)

// accessSettings are the settings of tokens, rate limits and what may be
// registered.
func accessSettings() []setting {
	return []setting{
		{env: "PRCHAT_INSECURE_NO_AUTH", def: "0", help: "1: start on a non-loopback address while no API token exists (the API is open to anyone who reaches it)", set: cliflag.Bool(func(c *Config) *bool { return &c.InsecureNoAuth })},
		{env: "PRCHAT_REPOS_ROOTS", def: "", help: "colon-separated folders under which clone paths and review run directories may lie; empty: any path on a loopback API, none otherwise", set: cliflag.String(func(c *Config) *string { return &c.ReposRoots })},
		{env: "PRCHAT_ALLOW_FILE_URLS", def: "0", help: "1: allow clone URLs of any transport (file://, local paths, ext::), not only https://, ssh:// and user@host:path", set: cliflag.Bool(func(c *Config) *bool { return &c.AllowFileURLs })},
		{env: "PRCHAT_PUBLIC_URL", def: "", help: "the URL a deployment is reached at (https://prchat.example.com behind a TLS proxy): its pages' origin, the Host served while no token exists, and https:// makes the dashboard's cookie Secure", set: publicURL},
		{env: "PRCHAT_CLONE_ALLOW_PRIVATE", def: "0", help: "1: allow clone URLs whose host resolves to a loopback, link-local or private address (an internal git server)", set: cliflag.Bool(func(c *Config) *bool { return &c.CloneAllowPrivate })},
		{env: "PRCHAT_RATE_REQUESTS", def: "50/s", help: "API requests per token and API process (N/s, N/m or N/h, bursts of N; 0: no limit)", set: cliflag.Field(chat.ParseRate, func(c *Config) *chat.Rate { return &c.RateRequests })},
		{env: "PRCHAT_RATE_QUESTIONS_PER_REPO", def: "120/m", help: "questions per repository across the deployment, through Redis (0: no limit)", set: cliflag.Field(chat.ParseRate, func(c *Config) *chat.Rate { return &c.RateQuestionsRepo })},
		{env: "PRCHAT_RATE_QUESTIONS_PER_TOKEN", def: "30/m", help: "questions per token across the deployment, through Redis (0: no limit)", set: cliflag.Field(chat.ParseRate, func(c *Config) *chat.Rate { return &c.RateQuestionsToken })},
	}
}

// publicURL checks PRCHAT_PUBLIC_URL: http(s)://host[:port] and perhaps a
// path, nothing else.
func publicURL(c *Config, v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("not an http:// or https:// URL of a host: %q", v)
	}
	c.PublicURL = strings.TrimSuffix(v, "/")
	return nil
}

// roots returns PRCHAT_REPOS_ROOTS as absolute folders.
func (c Config) roots() ([]string, error) {
	var out []string
	for _, r := range filepath.SplitList(c.ReposRoots) {
		if r == "" {
			continue
		}
		if !filepath.IsAbs(r) {
			return nil, fmt.Errorf("PRCHAT_REPOS_ROOTS: %q is not an absolute path", r)
		}
		out = append(out, filepath.Clean(r))
	}
	return out, nil
}

// loopback reports whether the listen address is on a loopback interface
// only (a host name counts if every address it has is a loopback one).
func loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "" {
		return false // every interface
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// errOpenNonLoopback is the refusal to start an API that anyone could
// reach without a token.
var errOpenNonLoopback = errors.New("no API token exists and PRCHAT_LISTEN is not a loopback address, so anyone who reaches it could use the API: make an admin token first (prchat token create --name admin --scope admin), listen on 127.0.0.1, or set PRCHAT_INSECURE_NO_AUTH=1")

// checkOpenAPI refuses to start an API on a non-loopback address while no
// token exists (unless PRCHAT_INSECURE_NO_AUTH), and warns of an open one.
func checkOpenAPI(ctx context.Context, cfg Config, access *chat.Access, log *slog.Logger) error {
	required, err := access.Required(ctx)
	if err != nil {
		return err
	}
	if required {
		return nil
	}
	if !loopback(cfg.Listen) {
		if !cfg.InsecureNoAuth {
			return errOpenNonLoopback
		}
		log.WarnContext(ctx, "no API token exists and PRCHAT_INSECURE_NO_AUTH=1: the API is open to anyone who reaches "+cfg.Listen)
		return nil
	}
	log.WarnContext(ctx, "no API token exists: the API is open to anyone on this host until one is made (prchat token create --name admin --scope admin)", slog.String("listen", cfg.Listen))
	return nil
}
