// Package github is prchat's GitHub adapter, in both directions. Webhook
// (webhook.go) reads GitHub's deliveries for the API: it checks their
// signature and turns /ask comments into chat.Comment questions. Client
// (chat.Forge) looks up pull requests, reacts to comments, posts answers
// back with links to the cited lines, finds the account prchat posts as,
// and gives git the credentials to clone private repositories; it
// authenticates with a token, or as a GitHub App with installation tokens
// that are cached until they expire. Package githubtest fakes the REST API.
package github

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v88/github"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/forge"
)

var _ chat.Forge = (*Client)(nil)

// Config configures a Client. Either Token, or AppID with a private key
// (PrivateKeyFile or PrivateKey), is required.
type Config struct {
	// APIURL is the REST API's base URL. Default https://api.github.com;
	// GitHub Enterprise Server's is https://HOST/api/v3.
	APIURL string
	// Token is a personal access or bot token.
	Token string
	// AppID and the App's private key (PEM) authenticate as a GitHub App.
	AppID          int64
	PrivateKeyFile string
	PrivateKey     []byte
	// HTTPClient sends the requests; default one with a 30 s timeout.
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// Client is a GitHub API client for prchat. It is safe for concurrent use.
type Client struct {
	cfg  Config
	base *url.URL
	log  *slog.Logger
	// token: one client for every repository; app: one per installation.
	tokenClient *gh.Client
	apps        *ghinstallation.AppsTransport
	appClient   *gh.Client

	mu            sync.Mutex
	installations map[int64]*ghinstallation.Transport
	repoInstall   map[string]int64 // owner/name -> installation id
	login         string
}

// New returns a Client.
func New(cfg Config) (*Client, error) {
	cfg.APIURL = cmp.Or(cfg.APIURL, "https://api.github.com")
	base, err := url.Parse(strings.TrimRight(cfg.APIURL, "/") + "/")
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" {
		return nil, fmt.Errorf("github: API URL %q is not an http(s) URL", cfg.APIURL)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	c := &Client{
		cfg:           cfg,
		base:          base,
		log:           cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		installations: map[int64]*ghinstallation.Transport{},
		repoInstall:   map[string]int64{},
	}
	tr := cfg.HTTPClient.Transport
	if tr == nil {
		tr = http.DefaultTransport
	}
	switch {
	case cfg.AppID != 0:
		var err error
		switch {
		case len(cfg.PrivateKey) > 0:
			c.apps, err = ghinstallation.NewAppsTransport(tr, cfg.AppID, cfg.PrivateKey)
		case cfg.PrivateKeyFile != "":
			c.apps, err = ghinstallation.NewAppsTransportKeyFromFile(tr, cfg.AppID, cfg.PrivateKeyFile)
		default:
			return nil, errors.New("github: a GitHub App needs its private key file")
		}
		if err != nil {
			return nil, fmt.Errorf("github: App private key: %w", err)
		}
		c.apps.BaseURL = strings.TrimRight(base.String(), "/")
		if c.appClient, err = c.newClient(&http.Client{Transport: c.apps, Timeout: cfg.HTTPClient.Timeout}); err != nil {
			return nil, err
		}
	case cfg.Token != "":
		if c.tokenClient, err = c.newClient(cfg.HTTPClient, gh.WithAuthToken(cfg.Token)); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("github: a token or a GitHub App id and private key are required")
	}
	return c, nil
}

func (c *Client) newClient(hc *http.Client, opts ...gh.ClientOptionsFunc) (*gh.Client, error) {
	u := c.base.String()
	cl, err := gh.NewClient(append([]gh.ClientOptionsFunc{gh.WithHTTPClient(hc), gh.WithURLs(&u, &u)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("github: %w", err)
	}
	return cl, nil
}

// Name is chat.ForgeGitHub.
func (c *Client) Name() string { return chat.ForgeGitHub }

// LineLink is GitHub's link to lines of a file at a commit:
// <repoURL>/blob/<commit>/<path>#L<start>-L<end>.
func (c *Client) LineLink(repoURL, commit, path string, start, end int) string {
	return fmt.Sprintf("%s/blob/%s/%s#L%d-L%d", strings.TrimRight(repoURL, "/"), commit, forge.LinkPath(path), start, end)
}

// client returns the API client for a repository: the token's, or the
// installation's (from the event, else looked up for the repository).
func (c *Client) client(ctx context.Context, repo string, installation int64) (*gh.Client, error) {
	if c.tokenClient != nil {
		return c.tokenClient, nil
	}
	tr, err := c.installation(ctx, repo, installation)
	if err != nil {
		return nil, err
	}
	return c.newClient(&http.Client{Transport: tr, Timeout: c.cfg.HTTPClient.Timeout})
}

// installation returns the token source of an App installation, made once
// and kept: it caches its token until shortly before it expires.
func (c *Client) installation(ctx context.Context, repo string, id int64) (*ghinstallation.Transport, error) {
	c.mu.Lock()
	if id == 0 {
		id = c.repoInstall[repo]
	}
	c.mu.Unlock()
	if id == 0 {
		owner, name, _ := strings.Cut(repo, "/")
		inst, _, err := c.appClient.Apps.GetRepositoryInstallation(ctx, owner, name)
		if err != nil {
			return nil, wrap(fmt.Sprintf("find the App installation of %s", repo), err)
		}
		id = inst.GetID()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.repoInstall[repo] = id
	tr, ok := c.installations[id]
	if !ok {
		tr = ghinstallation.NewFromAppsTransport(c.apps, id)
		tr.BaseURL = c.apps.BaseURL
		c.installations[id] = tr
	}
	return tr, nil
}

// Login returns the account prchat posts as: the token's user, or the
// App's bot account (<slug>[bot]).
func (c *Client) Login(ctx context.Context) (string, error) {
	c.mu.Lock()
	login := c.login
	c.mu.Unlock()
	if login != "" {
		return login, nil
	}
	if c.tokenClient != nil {
		u, _, err := c.tokenClient.Users.Get(ctx, "")
		if err != nil {
			return "", wrap("find the token's account", err)
		}
		login = u.GetLogin()
	} else {
		app, _, err := c.appClient.Apps.Get(ctx, "")
		if err != nil {
			return "", wrap("find the App", err)
		}
		login = app.GetSlug() + "[bot]"
	}
	c.mu.Lock()
	c.login = login
	c.mu.Unlock()
	return login, nil
}

// GitCredentials returns the user name and password git uses to clone or
// fetch a repository over HTTPS: the token, or an installation token; none
// for a repository the App is not installed on.
func (c *Client) GitCredentials(ctx context.Context, repo string) (user, password string, err error) {
	if c.tokenClient != nil {
		return "x-access-token", c.cfg.Token, nil
	}
	tr, err := c.installation(ctx, repo, 0)
	if errors.Is(err, chat.ErrForgeRefused) {
		// The App is not installed there: git fetches without credentials,
		// as for any public repository.
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	tok, err := tr.Token(ctx)
	if err != nil {
		return "", "", fmt.Errorf("installation token for %s: %w", repo, err)
	}
	return "x-access-token", tok, nil
}

// GitHost returns the scheme and host name of the git addresses that go
// with the API (https and github.com for api.github.com), the only ones
// the forge's credentials are sent to.
func (c *Client) GitHost() (scheme, host string) {
	h := c.base.Hostname()
	if h == "api.github.com" {
		h = "github.com"
	}
	return c.base.Scheme, h
}

func split(repo string) (string, string) {
	owner, name, _ := strings.Cut(repo, "/")
	return owner, name
}

// PullRequest returns a PR's head and base commits.
func (c *Client) PullRequest(ctx context.Context, ref chat.CommentRef) (string, string, error) {
	cl, err := c.client(ctx, ref.Repository, ref.Installation)
	if err != nil {
		return "", "", err
	}
	owner, name := split(ref.Repository)
	pr, _, err := cl.PullRequests.Get(ctx, owner, name, ref.PR)
	if err != nil {
		return "", "", wrap(fmt.Sprintf("get pull request %s#%d", ref.Repository, ref.PR), err)
	}
	return pr.GetHead().GetSHA(), pr.GetBase().GetSHA(), nil
}

// React adds a reaction (eyes, confused) to the comment.
func (c *Client) React(ctx context.Context, ref chat.CommentRef, reaction string) error {
	cl, err := c.client(ctx, ref.Repository, ref.Installation)
	if err != nil {
		return err
	}
	owner, name := split(ref.Repository)
	if ref.Thread != "" {
		_, _, err = cl.Reactions.CreatePullRequestCommentReaction(ctx, owner, name, ref.CommentID, reaction)
	} else {
		_, _, err = cl.Reactions.CreateIssueCommentReaction(ctx, owner, name, ref.CommentID, reaction)
	}
	return wrap(fmt.Sprintf("react to comment %d of %s", ref.CommentID, ref.Repository), err)
}

// Standing tells what a comment's author is to the repository: OWNER and
// COLLABORATOR can push; a MEMBER can when the collaborator permission API
// says write, maintain or admin, else is a member; anyone else
// (CONTRIBUTOR, FIRST_TIMER, NONE, ...) neither.
func (c *Client) Standing(ctx context.Context, ref chat.CommentRef, author chat.Author) (chat.Standing, error) {
	switch author.Association {
	case "OWNER", "COLLABORATOR":
		return chat.StandingWriter, nil
	case "MEMBER":
	default:
		return chat.StandingOther, nil
	}
	cl, err := c.client(ctx, ref.Repository, ref.Installation)
	if err != nil {
		return chat.StandingOther, err
	}
	owner, name := split(ref.Repository)
	p, _, err := cl.Repositories.GetPermissionLevel(ctx, owner, name, author.Login)
	if err != nil {
		return chat.StandingOther, wrap(fmt.Sprintf("get the permission of %s on %s", author.Login, ref.Repository), err)
	}
	// permission is admin, write, read or none; maintain reads as write.
	switch p.GetPermission() {
	case "admin", "write", "maintain":
		return chat.StandingWriter, nil
	}
	return chat.StandingMember, nil
}

// FindReply returns the id of a comment of the PR (in the review thread for
// a review comment) whose body holds marker, or "".
func (c *Client) FindReply(ctx context.Context, ref chat.CommentRef, marker string) (string, error) {
	cl, err := c.client(ctx, ref.Repository, ref.Installation)
	if err != nil {
		return "", err
	}
	owner, name := split(ref.Repository)
	if ref.Thread != "" {
		root, _ := strconv.ParseInt(ref.Thread, 10, 64)
		opts := &gh.PullRequestListCommentsOptions{ListOptions: gh.ListOptions{PerPage: 100}}
		for cm, err := range cl.PullRequests.ListCommentsIter(ctx, owner, name, ref.PR, opts) {
			if err != nil {
				return "", wrap("list review comments", err)
			}
			if cm.GetInReplyTo() == root && strings.Contains(cm.GetBody(), marker) {
				return strconv.FormatInt(cm.GetID(), 10), nil
			}
		}
		return "", nil
	}
	opts := &gh.IssueListCommentsOptions{ListOptions: gh.ListOptions{PerPage: 100}}
	for cm, err := range cl.Issues.ListCommentsIter(ctx, owner, name, ref.PR, opts) {
		if err != nil {
			return "", wrap("list PR comments", err)
		}
		if strings.Contains(cm.GetBody(), marker) {
			return strconv.FormatInt(cm.GetID(), 10), nil
		}
	}
	return "", nil
}

// PostReply posts body in the comment's review thread, or as a PR comment.
func (c *Client) PostReply(ctx context.Context, ref chat.CommentRef, body string) (string, error) {
	cl, err := c.client(ctx, ref.Repository, ref.Installation)
	if err != nil {
		return "", err
	}
	owner, name := split(ref.Repository)
	if ref.Thread != "" {
		root, _ := strconv.ParseInt(ref.Thread, 10, 64)
		// POST .../pulls/{n}/comments/{id}/replies: the reply endpoint,
		// which go-github has no method for.
		req, err := cl.NewRequest(ctx, http.MethodPost,
			fmt.Sprintf("repos/%s/%s/pulls/%d/comments/%d/replies", url.PathEscape(owner), url.PathEscape(name), ref.PR, root),
			map[string]string{"body": body})
		if err != nil {
			return "", fmt.Errorf("reply in review thread %d: %w", root, err)
		}
		var cm gh.PullRequestComment
		if _, err := cl.Do(req, &cm); err != nil {
			return "", wrap(fmt.Sprintf("reply in review thread %d of %s#%d", root, ref.Repository, ref.PR), err)
		}
		return strconv.FormatInt(cm.GetID(), 10), nil
	}
	cm, _, err := cl.Issues.CreateComment(ctx, owner, name, ref.PR, &gh.IssueComment{Body: gh.Ptr(body)})
	if err != nil {
		return "", wrap(fmt.Sprintf("comment on %s#%d", ref.Repository, ref.PR), err)
	}
	return strconv.FormatInt(cm.GetID(), 10), nil
}

// wrap names what failed; a refusal that retrying cannot change (a 4xx
// other than 401, 408, 409, 429 and rate limits) wraps chat.ErrForgeRefused.
func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	var rl *gh.RateLimitError
	var abuse *gh.AbuseRateLimitError
	var er *gh.ErrorResponse
	switch {
	case errors.As(err, &rl), errors.As(err, &abuse):
		return fmt.Errorf("%s: rate limited: %w", what, err)
	case errors.As(err, &er) && er.Response != nil:
		code := er.Response.StatusCode
		if code >= 400 && code < 500 && code != 401 && code != 408 && code != 409 && code != 429 {
			return fmt.Errorf("%s: %w (%d): %w", what, chat.ErrForgeRefused, code, err)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}
