// Package gitlab is prchat's GitLab adapter, in both directions. Webhook
// (webhook.go) reads GitLab's note deliveries for the API: it checks their
// X-Gitlab-Token and turns /ask notes on merge requests into chat.Comment
// questions. Client (chat.Forge) looks up merge requests, awards emoji to
// notes, and posts answers, with links to the cited lines, as replies in
// the note's discussion, with a token (PRCHAT_GITLAB_TOKEN), through
// GitLab's official Go client. Package gitlabtest fakes the REST API.
package gitlab

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

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/forge"
)

var _ chat.Forge = (*Client)(nil)

// Config configures a Client.
type Config struct {
	// APIURL is the REST API's base URL. Default https://gitlab.com/api/v4.
	APIURL string
	// Token is a personal, project or group access token with api scope.
	Token string
	// HTTPClient sends the requests; default one with a 30 s timeout.
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// Client is a GitLab API client for prchat. It is safe for concurrent use.
type Client struct {
	cfg  Config
	base *url.URL
	api  *gl.Client
	log  *slog.Logger

	mu    sync.Mutex
	login string
}

// New returns a Client.
func New(cfg Config) (*Client, error) {
	cfg.APIURL = cmp.Or(cfg.APIURL, "https://gitlab.com/api/v4")
	base, err := url.Parse(cfg.APIURL)
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" {
		return nil, fmt.Errorf("gitlab: API URL %q is not an http(s) URL", cfg.APIURL)
	}
	if cfg.Token == "" {
		return nil, errors.New("gitlab: a token is required")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	// No retries by the client: a post it retried after GitLab stored the
	// note but lost the answer (a 502, a dropped connection) would post
	// twice. prchat's outbox retries, and looks for its marker first.
	api, err := gl.NewClient(cfg.Token, gl.WithBaseURL(cfg.APIURL), gl.WithHTTPClient(cfg.HTTPClient), gl.WithoutRetries())
	if err != nil {
		return nil, fmt.Errorf("gitlab: %w", err)
	}
	return &Client{cfg: cfg, base: base, api: api, log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))}, nil
}

// Name is chat.ForgeGitLab.
func (c *Client) Name() string { return chat.ForgeGitLab }

// LineLink is GitLab's link to lines of a file at a commit:
// <repoURL>/-/blob/<commit>/<path>#L<start>-<end>.
func (c *Client) LineLink(repoURL, commit, path string, start, end int) string {
	return fmt.Sprintf("%s/-/blob/%s/%s#L%d-%d", strings.TrimRight(repoURL, "/"), commit, forge.LinkPath(path), start, end)
}

// Login returns the token's user name, whose notes are prchat's own.
func (c *Client) Login(ctx context.Context) (string, error) {
	c.mu.Lock()
	login := c.login
	c.mu.Unlock()
	if login != "" {
		return login, nil
	}
	u, _, err := c.api.Users.CurrentUser(gl.WithContext(ctx))
	if err != nil {
		return "", wrap("find the token's user", err)
	}
	c.mu.Lock()
	c.login = u.Username
	c.mu.Unlock()
	return u.Username, nil
}

// GitHost returns the scheme and host of the git addresses that go with
// the API, the only ones the token is sent to.
func (c *Client) GitHost() (scheme, host string) { return c.base.Scheme, c.base.Hostname() }

// GitCredentials returns the user name and password git uses to fetch over
// HTTPS: the token.
func (c *Client) GitCredentials(context.Context, string) (string, string, error) {
	return "oauth2", c.cfg.Token, nil
}

// PullRequest returns a merge request's head and base commits.
func (c *Client) PullRequest(ctx context.Context, ref chat.CommentRef) (string, string, error) {
	mr, _, err := c.api.MergeRequests.GetMergeRequest(ref.Repository, int64(ref.PR), nil, gl.WithContext(ctx))
	if err != nil {
		return "", "", wrap(fmt.Sprintf("get merge request %s!%d", ref.Repository, ref.PR), err)
	}
	head := cmp.Or(mr.DiffRefs.HeadSha, mr.SHA)
	return head, mr.DiffRefs.BaseSha, nil
}

// React awards an emoji to the note: eyes (👀), or confused (😕, GitLab's
// award of that name) for a refused /ask.
func (c *Client) React(ctx context.Context, ref chat.CommentRef, reaction string) error {
	_, _, err := c.api.AwardEmoji.CreateMergeRequestAwardEmojiOnNote(ref.Repository, int64(ref.PR), ref.CommentID,
		&gl.CreateAwardEmojiOptions{Name: reaction}, gl.WithContext(ctx))
	return wrap(fmt.Sprintf("award an emoji to note %d of %s!%d", ref.CommentID, ref.Repository, ref.PR), err)
}

// Standing tells what a note's author is to the project, by their access
// level (direct or inherited from its groups): Developer (30) or higher
// can push; Guest, Planner and Reporter are members; a user who is no
// member is neither.
func (c *Client) Standing(ctx context.Context, ref chat.CommentRef, author chat.Author) (chat.Standing, error) {
	if author.ID <= 0 {
		return chat.StandingOther, nil
	}
	m, resp, err := c.api.ProjectMembers.GetInheritedProjectMember(ref.Repository, author.ID, gl.WithContext(ctx))
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return chat.StandingOther, nil
	}
	if err != nil {
		return chat.StandingOther, wrap(fmt.Sprintf("get the membership of %s in %s", author.Login, ref.Repository), err)
	}
	switch {
	case m.AccessLevel >= gl.DeveloperPermissions:
		return chat.StandingWriter, nil
	case m.AccessLevel > gl.NoPermissions:
		return chat.StandingMember, nil
	}
	return chat.StandingOther, nil
}

// FindReply returns the id of a note of the discussion whose body holds
// marker, or "".
func (c *Client) FindReply(ctx context.Context, ref chat.CommentRef, marker string) (string, error) {
	d, _, err := c.api.Discussions.GetMergeRequestDiscussion(ref.Repository, int64(ref.PR), ref.Discussion, gl.WithContext(ctx))
	if err != nil {
		return "", wrap(fmt.Sprintf("get discussion %s of %s!%d", ref.Discussion, ref.Repository, ref.PR), err)
	}
	for _, n := range d.Notes {
		if n != nil && strings.Contains(n.Body, marker) {
			return strconv.FormatInt(n.ID, 10), nil
		}
	}
	return "", nil
}

// PostReply posts body as a note of the discussion.
func (c *Client) PostReply(ctx context.Context, ref chat.CommentRef, body string) (string, error) {
	if ref.Discussion == "" {
		return "", fmt.Errorf("note %d of %s!%d: %w: no discussion to reply in", ref.CommentID, ref.Repository, ref.PR, chat.ErrForgeRefused)
	}
	n, _, err := c.api.Discussions.AddMergeRequestDiscussionNote(ref.Repository, int64(ref.PR), ref.Discussion,
		&gl.AddMergeRequestDiscussionNoteOptions{Body: gl.Ptr(body)}, gl.WithContext(ctx))
	if err != nil {
		return "", wrap(fmt.Sprintf("reply in discussion %s of %s!%d", ref.Discussion, ref.Repository, ref.PR), err)
	}
	return strconv.FormatInt(n.ID, 10), nil
}

// wrap names what failed; a refusal retrying cannot change (a 4xx other
// than 401, 408, 409 and 429) wraps chat.ErrForgeRefused.
func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	var er *gl.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		code := er.Response.StatusCode
		if code >= 400 && code < 500 && code != 401 && code != 408 && code != 409 && code != 429 {
			return fmt.Errorf("%s: %w (%d): %w", what, chat.ErrForgeRefused, code, err)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}
