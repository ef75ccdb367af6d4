package main

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/forge"
	"github.com/prchat/prchat/forge/github"
	"github.com/prchat/prchat/forge/gitlab"
)

// forges are the code hosts' API clients that the settings configure.
type forges struct {
	github *github.Client
	gitlab *gitlab.Client
	// list holds the configured ones for chat, hosts for git's credentials.
	list  []chat.Forge
	hosts []forge.GitHost
}

// newForges makes the clients of the forges whose settings are given;
// timeout bounds each request (default 30 s).
func newForges(cfg Config, timeout time.Duration, log *slog.Logger) (f forges, err error) {
	timeout = cmp.Or(timeout, 30*time.Second)
	if cfg.GitHubToken != "" || cfg.GitHubAppID != 0 {
		gc := github.Config{APIURL: cfg.GitHubAPIURL, Token: cfg.GitHubToken, HTTPClient: &http.Client{Timeout: timeout}, Logger: log}
		if cfg.GitHubAppID != 0 {
			gc.Token, gc.AppID, gc.PrivateKeyFile = "", cfg.GitHubAppID, cfg.GitHubAppPrivateKeyFile
		}
		if f.github, err = github.New(gc); err != nil {
			return f, err
		}
		f.list, f.hosts = append(f.list, f.github), append(f.hosts, f.github)
	}
	if cfg.GitLabToken != "" {
		if f.gitlab, err = gitlab.New(gitlab.Config{APIURL: cfg.GitLabAPIURL, Token: cfg.GitLabToken, HTTPClient: &http.Client{Timeout: timeout}, Logger: log}); err != nil {
			return f, err
		}
		f.list, f.hosts = append(f.list, f.gitlab), append(f.hosts, f.gitlab)
	}
	return f, nil
}

// enabled reports whether any webhook or forge API is configured.
func (f forges) enabled(cfg Config) bool {
	return len(f.list) > 0 || cfg.GitHubSecret != "" || cfg.GitHubSecretPrevious != "" || cfg.GitLabSecret != ""
}

// credentials gives git a forge's credentials for a clone URL on its host.
func (f forges) credentials(ctx context.Context, repo chat.Repository) (string, string, error) {
	return forge.Credentials(ctx, repo, f.hosts...)
}

// webhooks are the readers of the API's webhook routes.
func (f forges) webhooks(cfg Config, log *slog.Logger) (*github.Webhook, *gitlab.Webhook) {
	gh := forge.WebhookConfig{Secrets: []string{cfg.GitHubSecret, cfg.GitHubSecretPrevious}, AutoRegister: cfg.GitHubAutoRegister, Logger: log}
	if f.github != nil {
		gh.Self = f.github.Login
	}
	gl := forge.WebhookConfig{Secrets: []string{cfg.GitLabSecret}, AutoRegister: cfg.GitLabAutoRegister, Logger: log}
	if f.gitlab != nil {
		gl.Self = f.gitlab.Login
	}
	return github.NewWebhook(gh), gitlab.NewWebhook(gl)
}
