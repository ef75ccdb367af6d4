package api

import (
	"crypto/subtle"
	"regexp"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/prchat/prchat/chat"
	gl "gitlab.com/gitlab-org/api/client-go"
)

// GitLab's webhook events that prchat acts on.
const (
	glNote             = "Note Hook"
	glConfidentialNote = "Confidential Note Hook"
)

// gitlabBot matches the users of project and group access tokens and
// service accounts ("project_5_bot_1a2b...", "group_9_bot", "..._bot"),
// GitLab's bots.
var gitlabBot = regexp.MustCompile(`(?i)^((project|group)_\d+_bot(_[0-9a-f]+)?|.*[-_]bot|.*\[bot\])$`)

// gitlabWebhook takes GitLab's deliveries: the X-Gitlab-Token is compared
// with the secret in constant time before anything reads the body; then
// /ask notes on merge requests become turns.
func (s *Server) gitlabWebhook(c echo.Context) error {
	const forge = chat.ForgeGitLab
	req := c.Request()
	event := req.Header.Get("X-Gitlab-Event")
	label := eventLabel(event, glNote, glConfidentialNote)
	secrets := s.cfg.GitLab.secrets()
	if len(secrets) == 0 {
		s.webhookMetrics.deliveries.WithLabelValues(forge, label, "unauthorized").Inc()
		return chat.Errorf(chat.CodeUnavailable, "GitLab webhooks are off: no webhook secret is configured")
	}
	token := []byte(req.Header.Get("X-Gitlab-Token"))
	valid := false
	for _, secret := range secrets {
		if subtle.ConstantTimeCompare(token, secret) == 1 {
			valid = true
		}
	}
	if !valid {
		s.webhookMetrics.deliveries.WithLabelValues(forge, label, "unauthorized").Inc()
		return chat.Errorf(chat.CodeUnauthorized, "the delivery's X-Gitlab-Token is missing or is not the webhook secret")
	}
	body, err := webhookBody(c)
	if err != nil {
		s.webhookMetrics.deliveries.WithLabelValues(forge, label, "invalid").Inc()
		return err
	}
	if event != glNote && event != glConfidentialNote {
		return s.ignore(c, forge, label, "event "+strconv.Quote(event)+" is not acted on")
	}
	parsed, err := gl.ParseWebhook(gl.EventType(event), body)
	if err != nil {
		s.webhookMetrics.deliveries.WithLabelValues(forge, label, "invalid").Inc()
		return chat.Errorf(chat.CodeInvalid, "the %s event is not valid JSON of its kind", event)
	}
	e, ok := parsed.(*gl.MergeCommentEvent)
	if !ok {
		return s.ignore(c, forge, label, "the note is not on a merge request")
	}
	a := e.ObjectAttributes
	switch {
	case a.Action != "" && a.Action != gl.CommentEventActionCreate:
		return s.ignore(c, forge, label, "only new notes are acted on, not "+strconv.Quote(string(a.Action)))
	case a.System:
		return s.ignore(c, forge, label, "system notes are ignored")
	case e.User != nil && gitlabBot.MatchString(e.User.Username):
		return s.ignore(c, forge, label, "notes by bots are ignored")
	}
	if self := s.gitlabSelf.login(req.Context(), s.log); self != "" && e.User != nil && strings.EqualFold(e.User.Username, self) {
		return s.ignore(c, forge, label, "notes by prchat's own account are ignored")
	}
	question, ok := chat.ParseAsk(a.Note)
	if !ok {
		return s.ignore(c, forge, label, "the note does not start with "+chat.AskCommand)
	}
	q := chat.Comment{
		Forge:      forge,
		DeliveryID: req.Header.Get("Idempotency-Key"),
		Repository: e.Project.PathWithNamespace,
		CloneURL:   e.Project.GitHTTPURL,
		HTMLURL:    e.Project.WebURL,
		PR:         int(e.MergeRequest.IID),
		CommentID:  a.ID,
		Question:   question,
		Discussion: a.DiscussionID,
	}
	// A note in a thread (on the diff, or a started discussion) continues
	// the thread's conversation; a plain note the MR's timeline one.
	if a.Type == "DiffNote" || a.Type == "DiscussionNote" {
		q.Thread = a.DiscussionID
	}
	if p := a.Position; p != nil {
		q.Focus = gitlabFocus(p)
		q.HeadSHA, q.BaseSHA = p.HeadSHA, p.BaseSHA
	}
	// GitLab sends Idempotency-Key from 17.4 on, and the same key when it
	// retries; older versions are de-duplicated on the note id alone.
	q.DeliveryID = strings.TrimSpace(q.DeliveryID)
	if q.DeliveryID == "" || len(q.DeliveryID) > 200 {
		q.DeliveryID = "note:" + strconv.FormatInt(a.ID, 10)
	}
	if q.PR <= 0 || q.CommentID <= 0 {
		s.webhookMetrics.deliveries.WithLabelValues(forge, label, "invalid").Inc()
		return chat.Errorf(chat.CodeInvalid, "the note event names no merge request or note")
	}
	if q.Discussion == "" {
		s.webhookMetrics.deliveries.WithLabelValues(forge, label, "invalid").Inc()
		return chat.Errorf(chat.CodeInvalid, "the note event names no discussion to reply in")
	}
	return s.receive(c, forge, label, q, s.cfg.GitLab.AutoRegister)
}

// gitlabFocus is the focus of a diff note: its new path and lines (the line
// range's new lines, else its new line); a note on a removed line or a file
// anchors the file.
func gitlabFocus(p *gl.NotePosition) *chat.Focus {
	path := p.NewPath
	if path == "" {
		path = p.OldPath
	}
	if path == "" || chat.CheckRepoPath(path) != nil {
		return nil
	}
	a := chat.Anchor{Path: path}
	if p.PositionType != "file" && p.NewLine > 0 {
		a.StartLine, a.EndLine = int(p.NewLine), int(p.NewLine)
		if r := p.LineRange; r != nil && r.StartRange != nil && r.EndRange != nil &&
			r.StartRange.NewLine > 0 && r.StartRange.NewLine <= r.EndRange.NewLine {
			a.StartLine, a.EndLine = int(r.StartRange.NewLine), int(r.EndRange.NewLine)
		}
	}
	return &chat.Focus{Kind: chat.FocusSection, Anchors: []chat.Anchor{a}}
}
