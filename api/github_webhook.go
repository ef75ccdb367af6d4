package api

import (
	"net/http"
	"strconv"
	"strings"

	gh "github.com/google/go-github/v88/github"
	"github.com/labstack/echo/v4"
	"github.com/prchat/prchat/chat"
)

// GitHub's webhook events that prchat acts on.
const (
	ghPing          = "ping"
	ghIssueComment  = "issue_comment"
	ghReviewComment = "pull_request_review_comment"
)

// githubWebhook takes GitHub's deliveries: the raw body is verified
// (HMAC-SHA256 with the current or the previous secret, in constant time)
// before anything reads it; then /ask comments become turns.
func (s *Server) githubWebhook(c echo.Context) error {
	const forge = chat.ForgeGitHub
	req := c.Request()
	event := req.Header.Get("X-GitHub-Event")
	label := eventLabel(event, ghPing, ghIssueComment, ghReviewComment)
	secrets := s.cfg.GitHub.secrets()
	if len(secrets) == 0 {
		s.webhookMetrics.deliveries.WithLabelValues(forge, label, "unauthorized").Inc()
		return chat.Errorf(chat.CodeUnavailable, "GitHub webhooks are off: no webhook secret is configured")
	}
	body, err := webhookBody(c)
	if err != nil {
		s.webhookMetrics.deliveries.WithLabelValues(forge, label, "invalid").Inc()
		return err
	}
	sig := req.Header.Get("X-Hub-Signature-256")
	valid := false
	if strings.HasPrefix(sig, "sha256=") {
		for _, secret := range secrets {
			if gh.ValidateSignature(sig, body, secret) == nil { // hmac.Equal: constant time
				valid = true
				break
			}
		}
	}
	if !valid {
		s.webhookMetrics.deliveries.WithLabelValues(forge, label, "unauthorized").Inc()
		return chat.Errorf(chat.CodeUnauthorized, "the delivery's X-Hub-Signature-256 is missing or does not match the webhook secret")
	}
	delivery := req.Header.Get("X-GitHub-Delivery")
	if delivery == "" || len(delivery) > 200 {
		s.webhookMetrics.deliveries.WithLabelValues(forge, label, "invalid").Inc()
		return chat.Errorf(chat.CodeInvalid, "X-GitHub-Delivery is missing")
	}
	switch event {
	case ghPing:
		s.webhookMetrics.deliveries.WithLabelValues(forge, label, "ping").Inc()
		return c.JSON(http.StatusOK, map[string]string{"status": "pong"})
	case ghIssueComment, ghReviewComment:
	default:
		return s.ignore(c, forge, label, "event "+strconv.Quote(event)+" is not acted on")
	}
	parsed, err := gh.ParseWebHook(event, body)
	if err != nil {
		s.webhookMetrics.deliveries.WithLabelValues(forge, label, "invalid").Inc()
		return chat.Errorf(chat.CodeInvalid, "the %s event is not valid JSON of its kind", event)
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
		if !e.GetIssue().IsPullRequest() {
			return s.ignore(c, forge, label, "the comment is on an issue, not a pull request")
		}
		q = chat.Comment{PR: e.GetIssue().GetNumber(), CommentID: e.GetComment().GetID(), Installation: e.GetInstallation().GetID()}
	case *gh.PullRequestReviewCommentEvent:
		action, sender, repo = e.GetAction(), e.GetSender(), e.GetRepo()
		cm := e.GetComment()
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
		}
	default:
		return s.ignore(c, forge, label, "event "+strconv.Quote(event)+" is not acted on")
	}
	if action != "created" {
		return s.ignore(c, forge, label, "only new comments are acted on, not "+strconv.Quote(action))
	}
	if sender.GetType() == "Bot" || author.GetType() == "Bot" {
		return s.ignore(c, forge, label, "comments by bots are ignored")
	}
	if self := s.githubSelf.login(req.Context(), s.log); self != "" && (strings.EqualFold(sender.GetLogin(), self) || strings.EqualFold(author.GetLogin(), self)) {
		return s.ignore(c, forge, label, "comments by prchat's own account are ignored")
	}
	question, ok := chat.ParseAsk(text)
	if !ok {
		return s.ignore(c, forge, label, "the comment does not start with "+chat.AskCommand)
	}
	q.Forge, q.DeliveryID, q.Question = forge, delivery, question
	q.Repository, q.CloneURL, q.HTMLURL = repo.GetFullName(), repo.GetCloneURL(), repo.GetHTMLURL()
	if q.PR <= 0 || q.CommentID <= 0 {
		s.webhookMetrics.deliveries.WithLabelValues(forge, label, "invalid").Inc()
		return chat.Errorf(chat.CodeInvalid, "the %s event names no pull request or comment", event)
	}
	return s.receive(c, forge, label, q, s.cfg.GitHub.AutoRegister)
}

// reviewCommentFocus is the focus of a review comment: its path and lines
// (start_line..line, or original_start_line..original_line when the
// comment is outdated and line is null); a file-level comment anchors the
// file.
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
			if start != nil && *start > 0 && *start <= *line {
				a.StartLine = *start
			}
		}
	}
	if chat.CheckRepoPath(a.Path) != nil {
		return nil
	}
	return &chat.Focus{Kind: chat.FocusSection, Anchors: []chat.Anchor{a}}
}
