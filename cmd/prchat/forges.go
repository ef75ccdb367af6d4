package main

import (
	"context"
	"log/slog"
	"net/url"
	"strings"

	"github.com/prchat/prchat/api"
	"github.com/prchat/prchat/api/github"
	"github.com/prchat/prchat/api/gitlab"
	"github.com/prchat/prchat/chat"
)

// forges are the code hosts' API clients that the settings configure.
type forges struct {
	github *github.Client
	gitlab *gitlab.Client
}

func newForges(cfg Config, log *slog.Logger) (forges, error) {
	var f forges
	if cfg.GitHubToken != "" || cfg.GitHubAppID != 0 {
		gc := github.Config{APIURL: cfg.GitHubAPIURL, Logger: log}
		if cfg.GitHubAppID != 0 {
			gc.AppID, gc.PrivateKeyFile = cfg.GitHubAppID, cfg.GitHubAppPrivateKeyFile
		} else {
			gc.Token = cfg.GitHubToken
		}
		var err error
		if f.github, err = github.New(gc); err != nil {
			return f, err
		}
	}
	if cfg.GitLabToken != "" {
		var err error
		if f.gitlab, err = gitlab.New(gitlab.Config{APIURL: cfg.GitLabAPIURL, Token: cfg.GitLabToken, Logger: log}); err != nil {
			return f, err
		}
	}
	return f, nil
}

// enabled reports whether any webhook or forge API is configured.
func (f forges) enabled(cfg Config) bool {
	return len(f.list()) > 0 || cfg.GitHubSecret != "" || cfg.GitHubSecretPrevious != "" || cfg.GitLabSecret != ""
}

// list returns the configured forges for chat.
func (f forges) list() []chat.Forge {
	var out []chat.Forge
	if f.github != nil {
		out = append(out, f.github)
	}
	if f.gitlab != nil {
		out = append(out, f.gitlab)
	}
	return out
}

// credentials gives git the forge's token for a clone URL on the forge's
// own host (and scheme: https, or http when the API itself is served so),
// and nothing for any other.
func (f forges) credentials(ctx context.Context, repo chat.Repository) (string, string, error) {
	u, err := url.Parse(repo.CloneURL)
	if err != nil {
		return "", "", nil
	}
	if f.github != nil {
		scheme, host := f.github.GitHost()
		if strings.EqualFold(u.Hostname(), host) && (u.Scheme == "https" || u.Scheme == scheme) {
			return f.github.GitCredentials(ctx, repo.Name)
		}
	}
	if f.gitlab != nil {
		scheme, host := f.gitlab.GitHost()
		if strings.EqualFold(u.Hostname(), host) && (u.Scheme == "https" || u.Scheme == scheme) {
			return f.gitlab.GitCredentials(ctx, repo.Name)
		}
	}
	return "", "", nil
}

// webhooks configures the API's webhook routes.
func (f forges) webhooks(cfg Config) (gh, gl api.WebhookConfig) {
	gh = api.WebhookConfig{Secrets: []string{cfg.GitHubSecret, cfg.GitHubSecretPrevious}, AutoRegister: cfg.GitHubAutoRegister}
	if f.github != nil {
		gh.Self = f.github.Login
	}
	gl = api.WebhookConfig{Secrets: []string{cfg.GitLabSecret}, AutoRegister: cfg.GitLabAutoRegister}
	if f.gitlab != nil {
		gl.Self = f.gitlab.Login
	}
	return gh, gl
}
