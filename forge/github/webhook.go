package github

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	gh "github.com/google/go-github/v88/github"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/forge"
)

// GitHub's webhook events that prchat acts on.
const (
	eventPing          = "ping"
	eventIssueComment  = "issue_comment"
	eventReviewComment = "pull_request_review_comment"
)

// Webhook reads GitHub's webhook deliveries (POST /webhooks/github).
type Webhook struct {
	cfg     forge.WebhookConfig
	secrets [][]byte
	self    *forge.Self
}

// NewWebhook returns the reader of GitHub's deliveries with cfg's secrets.
func NewWebhook(cfg forge.WebhookConfig) *Webhook {
	return &Webhook{cfg: cfg, secrets: cfg.SecretBytes(), self: forge.NewSelf(cfg.Self, cfg.Logger)}
}

// Read verifies a delivery's raw body (HMAC-SHA256 with the current or
// the previous secret, in constant time) before anything parses it, and
// reads the question of an /ask comment on a pull request. A refused
// delivery is an error with chat's code (unavailable without a secret,
// unauthorized, invalid); body's error is returned as it is.
func (w *Webhook) Read(ctx context.Context, h http.Header, body func() ([]byte, error)) (chat.Delivery, error) {
	event := h.Get("X-GitHub-Event")
	d := chat.Delivery{Event: forge.EventLabel(event, eventPing, eventIssueComment, eventReviewComment), AutoRegister: w.cfg.AutoRegister}
	if len(w.secrets) == 0 {
		return d, chat.Errorf(chat.CodeUnavailable, "GitHub webhooks are off: no webhook secret is configured")
	}
	raw, err := body()
	if err != nil {
		return d, err
	}
	sig := h.Get("X-Hub-Signature-256")
	valid := false
	if strings.HasPrefix(sig, "sha256=") {
		for _, secret := range w.secrets {
			if gh.ValidateSignature(sig, raw, secret) == nil { // hmac.Equal: constant time
				valid = true
				break
			}
		}
	}
	if !valid {
		return d, chat.Errorf(chat.CodeUnauthorized, "the delivery's X-Hub-Signature-256 is missing or does not match the webhook secret")
	}
	delivery := h.Get("X-GitHub-Delivery")
	if delivery == "" || len(delivery) > 200 {
		return d, chat.Errorf(chat.CodeInvalid, "X-GitHub-Delivery is missing")
	}
	switch event {
	case eventPing:
		d.Ping = true
		return d, nil
	case eventIssueComment, eventReviewComment:
	default:
		d.Ignored = "event " + strconv.Quote(event) + " is not acted on"
		return d, nil
	}
	parsed, err := gh.ParseWebHook(event, raw)
	if err != nil {
		return d, chat.Errorf(chat.CodeInvalid, "the %s event is not valid JSON of its kind", event)
	}
	var (
		q      chat.Comment
		action string
		sender *gh.User
		author *gh.User
		repo   *gh.Repository
		text   string
	)
	switch e := parsed.(type) {
	case *gh.IssueCommentEvent:
		action, sender, repo = e.GetAction(), e.GetSender(), e.GetRepo()
		author, text = e.GetComment().GetUser(), e.GetComment().GetBody()
		if e.Issue == nil || e.Comment == nil {
			return d, chat.Errorf(chat.CodeInvalid, "the issue_comment event names no issue or comment")
		}
		if !e.Issue.IsPullRequest() {
			d.Ignored = "the comment is on an issue, not a pull request"
			return d, nil
		}
		q = chat.Comment{PR: e.GetIssue().GetNumber(), CommentID: e.GetComment().GetID(), Installation: e.GetInstallation().GetID(),
			Author: chat.Author{Login: author.GetLogin(), ID: author.GetID(), Association: e.GetComment().GetAuthorAssociation()}}
	case *gh.PullRequestReviewCommentEvent:
		action, sender, repo = e.GetAction(), e.GetSender(), e.GetRepo()
		cm := e.GetComment()
		if e.Comment == nil || e.PullRequest == nil {
			return d, chat.Errorf(chat.CodeInvalid, "the pull_request_review_comment event names no pull request or comment")
		}
		author, text = cm.GetUser(), cm.GetBody()
		root := cm.GetInReplyTo()
		if root == 0 {
			root = cm.GetID()
		}
		q = chat.Comment{
			PR:           e.GetPullRequest().GetNumber(),
			CommentID:    cm.GetID(),
			Installation: e.GetInstallation().GetID(),
			Thread:       strconv.FormatInt(root, 10),
			Focus:        reviewCommentFocus(cm),
			HeadSHA:      e.GetPullRequest().GetHead().GetSHA(),
			BaseSHA:      e.GetPullRequest().GetBase().GetSHA(),
			Author:       chat.Author{Login: author.GetLogin(), ID: author.GetID(), Association: cm.GetAuthorAssociation()},
		}
	default:
		d.Ignored = "event " + strconv.Quote(event) + " is not acted on"
		return d, nil
	}
	question, ok := chat.ParseAsk(text)
	switch {
	case action != "created":
		d.Ignored = "only new comments are acted on, not " + strconv.Quote(action)
	case sender.GetType() == "Bot" || author.GetType() == "Bot":
		d.Ignored = "comments by bots are ignored"
	case w.isSelf(ctx, sender, author):
		d.Ignored = "comments by prchat's own account are ignored"
	case !ok:
		d.Ignored = "the comment does not start with " + chat.AskCommand
	}
	if d.Ignored != "" {
		return d, nil
	}
	q.Forge, q.DeliveryID, q.Question = chat.ForgeGitHub, delivery, question
	q.Repository, q.CloneURL, q.HTMLURL = repo.GetFullName(), repo.GetCloneURL(), repo.GetHTMLURL()
	if q.PR <= 0 || q.CommentID <= 0 {
		return d, chat.Errorf(chat.CodeInvalid, "the %s event names no pull request or comment", event)
	}
	d.Comment = q
	return d, nil
}

// isSelf reports whether the comment is by prchat's own account.
func (w *Webhook) isSelf(ctx context.Context, sender, author *gh.User) bool {
	self := w.self.Login(ctx)
	return self != "" && (strings.EqualFold(sender.GetLogin(), self) || strings.EqualFold(author.GetLogin(), self))
}

// reviewCommentFocus is the focus of a review comment: its path and lines
// (start_line..line, or original_start_line..original_line when the
// comment is outdated and line is null), on the base side for a comment on
// the diff's left (side LEFT: lines the PR removed); a range whose start is
// on the other side than its end anchors its end line alone. A file-level
// comment anchors the file.
func reviewCommentFocus(cm *gh.PullRequestComment) *chat.Focus {
	path := cm.GetPath()
	if path == "" {
		return nil
	}
	a := chat.Anchor{Path: path}
	if cm.GetSubjectType() != "file" {
		line, start := cm.Line, cm.StartLine
		if line == nil {
			line, start = cm.OriginalLine, cm.OriginalStartLine
		}
		if line != nil && *line > 0 {
			a.EndLine = *line
			a.StartLine = *line
			if start != nil && *start > 0 && *start <= *line && (cm.GetStartSide() == "" || cm.GetStartSide() == cm.GetSide()) {
				a.StartLine = *start
			}
			if cm.GetSide() == "LEFT" {
				a.Side = chat.SideBase
			}
		}
	}
	if chat.CheckRepoPath(a.Path) != nil {
		return nil
	}
	return &chat.Focus{Kind: chat.FocusSection, Anchors: []chat.Anchor{a}}
}
