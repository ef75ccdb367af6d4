package gitlab

import (
	"cmp"
	"context"
	"crypto/subtle"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/forge"
)

// GitLab's webhook events that prchat acts on.
const (
	eventNote             = "Note Hook"
	eventConfidentialNote = "Confidential Note Hook"
)

// bot matches the users of project and group access tokens and service
// accounts ("project_5_bot_1a2b...", "group_9_bot", "..._bot"), GitLab's
// bots.
var bot = regexp.MustCompile(`(?i)^((project|group)_\d+_bot(_[0-9a-f]+)?|.*[-_]bot|.*\[bot\])$`)

// Webhook reads GitLab's webhook deliveries (POST /webhooks/gitlab).
type Webhook struct {
	cfg     forge.WebhookConfig
	secrets [][]byte
	self    *forge.Self
}

// NewWebhook returns the reader of GitLab's deliveries with cfg's secrets.
func NewWebhook(cfg forge.WebhookConfig) *Webhook {
	return &Webhook{cfg: cfg, secrets: cfg.SecretBytes(), self: forge.NewSelf(cfg.Self, cfg.Logger)}
}

// Read compares a delivery's X-Gitlab-Token with the secrets in constant
// time before it reads the body, and reads the question of an /ask note on
// a merge request. A refused delivery is an error with chat's code
// (unavailable without a secret, unauthorized, invalid); body's error is
// returned as it is.
func (w *Webhook) Read(ctx context.Context, h http.Header, body func() ([]byte, error)) (chat.Delivery, error) {
	event := h.Get("X-Gitlab-Event")
	d := chat.Delivery{Event: forge.EventLabel(event, eventNote, eventConfidentialNote), AutoRegister: w.cfg.AutoRegister}
	if len(w.secrets) == 0 {
		return d, chat.Errorf(chat.CodeUnavailable, "GitLab webhooks are off: no webhook secret is configured")
	}
	token := []byte(h.Get("X-Gitlab-Token"))
	valid := false
	for _, secret := range w.secrets {
		if subtle.ConstantTimeCompare(token, secret) == 1 {
			valid = true
		}
	}
	if !valid {
		return d, chat.Errorf(chat.CodeUnauthorized, "the delivery's X-Gitlab-Token is missing or is not the webhook secret")
	}
	raw, err := body()
	if err != nil {
		return d, err
	}
	if event != eventNote && event != eventConfidentialNote {
		d.Ignored = "event " + strconv.Quote(event) + " is not acted on"
		return d, nil
	}
	parsed, err := gl.ParseWebhook(gl.EventType(event), raw)
	if err != nil {
		return d, chat.Errorf(chat.CodeInvalid, "the %s event is not valid JSON of its kind", event)
	}
	e, ok := parsed.(*gl.MergeCommentEvent)
	if !ok {
		d.Ignored = "the note is not on a merge request"
		return d, nil
	}
	a := e.ObjectAttributes
	question, isAsk := chat.ParseAsk(a.Note)
	switch {
	case a.Action != "" && a.Action != gl.CommentEventActionCreate:
		d.Ignored = "only new notes are acted on, not " + strconv.Quote(string(a.Action))
	case a.System:
		d.Ignored = "system notes are ignored"
	case e.User != nil && bot.MatchString(e.User.Username):
		d.Ignored = "notes by bots are ignored"
	case e.User != nil && w.isSelf(ctx, e.User.Username):
		d.Ignored = "notes by prchat's own account are ignored"
	case !isAsk:
		d.Ignored = "the note does not start with " + chat.AskCommand
	}
	if d.Ignored != "" {
		return d, nil
	}
	q := chat.Comment{
		Forge:      chat.ForgeGitLab,
		DeliveryID: h.Get("Idempotency-Key"),
		Repository: e.Project.PathWithNamespace,
		CloneURL:   e.Project.GitHTTPURL,
		HTMLURL:    e.Project.WebURL,
		PR:         int(e.MergeRequest.IID),
		CommentID:  a.ID,
		Question:   question,
		Discussion: a.DiscussionID,
	}
	if e.User != nil {
		q.Author = chat.Author{Login: e.User.Username, ID: e.User.ID}
	}
	// Every note has a discussion (a plain note on the MR's timeline is
	// one of its own, which a reply makes a thread), and the conversation
	// follows it: a reply continues the conversation of its discussion's
	// first note, whatever its type.
	q.Thread = a.DiscussionID
	// A note made on an older version of the MR may have no current
	// position: then its original one anchors it.
	p := a.Position
	if p == nil {
		p = a.OriginalPosition
	}
	if p != nil {
		q.Focus = notePositionFocus(p)
		// The commits of a position on the MR's head are the MR's; those
		// of an older version are not, and the MR is looked up instead.
		if head := e.MergeRequest.LastCommit.ID; head == "" || head == p.HeadSHA {
			q.HeadSHA, q.BaseSHA = p.HeadSHA, p.BaseSHA
		}
	}
	// GitLab sends Idempotency-Key from 17.4 on, and the same key when it
	// retries; older versions are de-duplicated on the note id alone.
	q.DeliveryID = strings.TrimSpace(q.DeliveryID)
	if q.DeliveryID == "" || len(q.DeliveryID) > 200 {
		q.DeliveryID = "note:" + strconv.FormatInt(a.ID, 10)
	}
	if q.PR <= 0 || q.CommentID <= 0 {
		return d, chat.Errorf(chat.CodeInvalid, "the note event names no merge request or note")
	}
	if q.Discussion == "" {
		return d, chat.Errorf(chat.CodeInvalid, "the note event names no discussion to reply in")
	}
	d.Comment = q
	return d, nil
}

// isSelf reports whether user is prchat's own account.
func (w *Webhook) isSelf(ctx context.Context, user string) bool {
	self := w.self.Login(ctx)
	return self != "" && strings.EqualFold(user, self)
}

// notePositionFocus is the focus of a diff note: its path and lines. A
// note on a line the MR added or kept (new_line) anchors the new path's
// lines at the head; one on a removed line (old_line only) anchors the old
// path's lines with side base. A line range whose ends are both on that
// side anchors the range; a note on a file (or an image) anchors the file.
func notePositionFocus(p *gl.NotePosition) *chat.Focus {
	a := chat.Anchor{Path: cmp.Or(p.NewPath, p.OldPath)}
	if p.PositionType == "text" || p.PositionType == "" {
		r := p.LineRange
		if r != nil && (r.StartRange == nil || r.EndRange == nil) {
			r = nil
		}
		switch {
		case p.NewLine > 0:
			a.StartLine, a.EndLine = int(p.NewLine), int(p.NewLine)
			if r != nil && r.StartRange.NewLine > 0 && r.StartRange.NewLine <= r.EndRange.NewLine {
				a.StartLine, a.EndLine = int(r.StartRange.NewLine), int(r.EndRange.NewLine)
			}
		case p.OldLine > 0:
			a.Path, a.Side = cmp.Or(p.OldPath, p.NewPath), chat.SideBase
			a.StartLine, a.EndLine = int(p.OldLine), int(p.OldLine)
			if r != nil && r.StartRange.OldLine > 0 && r.StartRange.OldLine <= r.EndRange.OldLine {
				a.StartLine, a.EndLine = int(r.StartRange.OldLine), int(r.EndRange.OldLine)
			}
		}
	}
	if a.Path == "" || chat.CheckRepoPath(a.Path) != nil {
		return nil
	}
	return &chat.Focus{Kind: chat.FocusSection, Anchors: []chat.Anchor{a}}
}
