package chat

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
)

// Forge names: where a pull request's comments come from.
const (
	ForgeGitHub = "github"
	ForgeGitLab = "gitlab"
)

// AskCommand is the command that starts a question in a PR comment.
const AskCommand = "/ask"

// ParseAsk returns the question of a comment whose body starts with /ask
// and a question. ok is false for any other comment; a bare /ask is ok with
// an empty question.
func ParseAsk(body string) (question string, ok bool) {
	b := strings.TrimLeftFunc(body, unicode.IsSpace)
	rest, found := strings.CutPrefix(b, AskCommand)
	if !found {
		return "", false
	}
	if rest != "" {
		r := []rune(rest)[0]
		if !unicode.IsSpace(r) {
			return "", false // "/asking", "/ask-me"
		}
	}
	return strings.TrimSpace(rest), true
}

// Comment is a question asked in a pull request's comment, as a forge's
// webhook delivered it. Everything in it comes from the (signed) event.
type Comment struct {
	Forge string
	// DeliveryID is the forge's id of the delivery (X-GitHub-Delivery,
	// GitLab's Idempotency-Key or the note id).
	DeliveryID string
	// Repository is owner/name; CloneURL and HTMLURL are the repository's
	// clone and web addresses from the event.
	Repository string
	CloneURL   string
	HTMLURL    string
	// ForgeProject is the project's path on the forge, where its API is
	// called, when the repository is registered under another name (its
	// forge_project); "" when it is Repository.
	ForgeProject string
	PR           int
	// CommentID is the forge's id of the comment.
	CommentID int64
	Question  string
	// Focus is the anchor of a review comment (nil for a timeline comment).
	Focus *Focus
	// Thread is the review thread (GitHub: its root comment id; GitLab:
	// the note's discussion id, which every note has); "" for a GitHub
	// comment in the PR's timeline.
	Thread string
	// Discussion is where GitLab's reply goes: the note's discussion (a
	// timeline note is a discussion of its own). Unused for GitHub.
	Discussion string
	// Installation is the GitHub App installation the event came through.
	Installation int64
	// HeadSHA and BaseSHA are the PR's commits when the event names them.
	HeadSHA, BaseSHA string
	// Author is who wrote the comment (not stored: it decides only whether
	// the question is taken).
	Author Author
}

// Author is the writer of a PR comment, as the forge's event names them.
type Author struct {
	Login string
	// ID is the forge's user id (GitLab's members API needs it).
	ID int64
	// Association is GitHub's author_association (OWNER, MEMBER,
	// COLLABORATOR, CONTRIBUTOR, NONE, ...); "" on GitLab.
	Association string
}

// Who may ask in a PR comment (WebhooksConfig.Askers).
const (
	// AskersWriters: people who can push to the repository.
	AskersWriters = "writers"
	// AskersMembers: also every member of the repository's organisation
	// or group.
	AskersMembers = "members"
	// AskersAnyone: anyone who can comment.
	AskersAnyone = "anyone"
)

// Standing is what a comment's author is to the repository, as the forge
// tells it.
type Standing int

// Standings, from least to most.
const (
	// StandingOther: neither a member nor a writer.
	StandingOther Standing = iota
	// StandingMember: a member of the organisation or group (or a project
	// member below Developer on GitLab) who cannot push.
	StandingMember
	// StandingWriter: can push (GitHub write, maintain or admin; GitLab
	// Developer or higher).
	StandingWriter
)

// Reactions prchat makes to a comment.
const (
	// ReactionSeen marks an accepted /ask (👀).
	ReactionSeen = "eyes"
	// ReactionRefused marks the /ask of someone who may not ask (😕;
	// GitHub's confused reaction, GitLab's confused award emoji).
	ReactionRefused = "confused"
)

// Comment states: received (no turn yet), waiting (behind a pending turn of
// its conversation), queued (its turn exists; the answer is to be posted),
// posted, failed (gave up posting or asking).
const (
	CommentReceived = "received"
	CommentWaiting  = "waiting"
	CommentQueued   = "queued"
	CommentPosted   = "posted"
	CommentFailed   = "failed"
)

// WebhookComment is a received comment question with what became of it: the
// inbox of questions and the outbox of their answers in one record.
type WebhookComment struct {
	Comment
	ID string
	// TurnID is the id the question's turn gets (fixed on receipt, so that
	// the turn is made once however often the comment is processed).
	TurnID         string
	ConversationID string
	TurnNumber     int
	State          string
	// Reacted says whether the 👀 reaction was made.
	Reacted bool
	// PostTried says that posting the answer was tried: the next attempt
	// first looks for a reply already there.
	PostTried bool
	// ReplyID is the forge's id of the posted answer.
	ReplyID string
	// Attempts counts the tries to ask or post; NextAttempt is when the next
	// is due; Error is the last failure (for operators).
	Attempts    int
	NextAttempt time.Time
	Error       string
	// Refusal, when set, is why the question will not be answered: the one
	// sentence its reply says instead of an answer (posted once, like an
	// answer).
	Refusal string
	// Notice, when set on a comment to add, is a notice said once per PR
	// (NoticeUnregistered): of the comments of one PR that carry it, only
	// the first is stored (AddComment).
	Notice string
	// Version changes on every update (optimistic locking).
	Version   int64
	CreatedAt time.Time
}

// CommentStore keeps the webhook questions and their replies. Implemented
// by package store.
type CommentStore interface {
	// AddComment stores a received comment (state received) and fills its
	// ID, Version and CreatedAt. A delivery id or a (forge, repository,
	// comment id) already stored is ErrDuplicate; a comment whose Notice
	// its PR has had (from any process) is ErrNoticed; nothing is stored
	// then.
	AddComment(ctx context.Context, c *WebhookComment) error
	// UpdateComment stores c's processing fields if its Version is still the
	// stored one, and bumps c.Version; else it returns ErrFenced.
	UpdateComment(ctx context.Context, c *WebhookComment) error
	// DueComments lists comments in state received, waiting or queued
	// whose next attempt is due at now, oldest first.
	DueComments(ctx context.Context, now time.Time, limit int) ([]WebhookComment, error)
	// ClaimThread returns the conversation of a thread; a thread with none
	// gets conversationID.
	ClaimThread(ctx context.Context, forge, repo string, pr int, thread, conversationID string) (string, error)
}

// ErrDuplicate means a webhook delivery or comment was received before.
var ErrDuplicate = errors.New("delivery or comment already received")

// ErrNoticed means a comment's notice was said in its PR before.
var ErrNoticed = errors.New("the pull request had this notice before")

// NoticeUnregistered is the notice that prchat does not know a PR's
// repository: said once per PR, however many questions are asked there.
const NoticeUnregistered = "unregistered"

// ErrForgeRefused means the forge refused a request for good (a 4xx other
// than a rate limit): retrying will not help.
var ErrForgeRefused = errors.New("the forge refused the request")

// CommentRef says which comment of which PR a forge call is about.
type CommentRef struct {
	// Repository is the project's path on the forge (the repository's
	// forge project when it has one).
	Repository   string
	PR           int
	CommentID    int64
	Thread       string
	Discussion   string
	Installation int64
}

// Forge is a code host's API that questions come from and answers go to.
// Implemented by packages forge/github and forge/gitlab.
type Forge interface {
	// Name is the forge's name (ForgeGitHub, ForgeGitLab).
	Name() string
	// LineLink is the web address of lines start to end of path at commit,
	// in the repository whose web address is repoURL.
	LineLink(repoURL, commit, path string, start, end int) string
	// PullRequest returns a PR's head and base commits.
	PullRequest(ctx context.Context, ref CommentRef) (head, base string, err error)
	// React reacts to the comment with reaction (ReactionSeen,
	// ReactionRefused).
	React(ctx context.Context, ref CommentRef, reaction string) error
	// Standing tells what the comment's author is to the repository.
	Standing(ctx context.Context, ref CommentRef, author Author) (Standing, error)
	// FindReply returns the id of a reply to the comment already posted
	// whose body holds marker ("" when there is none).
	FindReply(ctx context.Context, ref CommentRef, marker string) (string, error)
	// PostReply posts body as the answer to the comment: in its review
	// thread or discussion, else in the PR's timeline. It returns the id of
	// the posted reply.
	PostReply(ctx context.Context, ref CommentRef, body string) (string, error)
}

// CommentObserver is told what became of webhook questions, for metrics.
// Implemented by package worker.
type CommentObserver interface {
	// ReplyPosted counts a posted answer; ReplyDeclined a posted reply
	// saying why a question is not answered; ReplyFailed a reply given up.
	ReplyPosted(forge string)
	ReplyDeclined(forge string)
	ReplyFailed(forge string)
}

// Delivery is a forge's webhook delivery as the forge's adapter read it
// (after checking its signature or token): a ping, an event that is not
// acted on, or a question.
type Delivery struct {
	// Event is the delivery's event: one the forge's adapter knows, else
	// "other" (a bounded label for metrics).
	Event string
	// Ping says the delivery only checks that the webhook works.
	Ping bool
	// Ignored, if not "", says why the delivery is not acted on.
	Ignored string
	// Comment is the question of a delivery that is acted on.
	Comment Comment
	// AutoRegister says that the forge's settings register an unknown
	// repository from the event (ReceiveComment's autoRegister).
	AutoRegister bool
}

// Receipt is what a received comment became, as the webhook answers it.
type Receipt struct {
	// Status is queued, waiting (behind the conversation's pending turn),
	// duplicate or ignored.
	Status         string `json:"status"`
	Reason         string `json:"reason,omitempty"`
	ConversationID string `json:"conversation_id,omitempty"`
	Turn           int    `json:"turn,omitempty"`
}

// Receipt statuses. ReceiptDeclined is a question prchat will not answer:
// a reply in its thread says why (Reason).
const (
	ReceiptQueued    = "queued"
	ReceiptWaiting   = "waiting"
	ReceiptDuplicate = "duplicate"
	ReceiptIgnored   = "ignored"
	ReceiptDeclined  = "declined"
)

// WebhookTurnStore reads the turns of webhook questions. Implemented by
// package store.
type WebhookTurnStore interface {
	TurnByID(ctx context.Context, id string) (Turn, error)
	// ConversationHead returns a conversation without its turns.
	ConversationHead(ctx context.Context, id string) (Conversation, error)
	// Events returns the stored events of a turn with Seq > after, in order.
	Events(ctx context.Context, turnID string, after int64) ([]Event, error)
}

// WebhooksConfig holds the settings of Webhooks.
type WebhooksConfig struct {
	// Poll is how often a webhook question waiting for its turn, or for a
	// pending conversation, is looked at again. Default 1s.
	Poll time.Duration
	// Lease is how long one process holds a webhook question it works on
	// before another may take it. Default 1m.
	Lease time.Duration
	// Backoff is the wait after a webhook question's first failed attempt
	// (to ask it, or to post its answer); it doubles with each further
	// failure, up to 5m. Default 1s.
	Backoff time.Duration
	// QuestionsPerRepo limits the questions asked about one repository,
	// as for Turns; a question over it waits while the limit lets it be
	// asked within maxRateWait of its arrival, else it is declined (the
	// reply says when to ask again). Zero: no limit.
	QuestionsPerRepo Rate
	// Askers says whose /ask is taken: AskersWriters (the default),
	// AskersMembers or AskersAnyone. Anyone else's gets ReactionRefused
	// and nothing else.
	Askers string
}

func (c WebhooksConfig) validate() error {
	switch c.Askers {
	case AskersWriters, AskersMembers, AskersAnyone:
		return nil
	}
	return fmt.Errorf("chat webhooks: askers %q is none of %s, %s, %s", c.Askers, AskersWriters, AskersMembers, AskersAnyone)
}

// WebhooksDeps are the parts Webhooks work with. Comments, Store, Turns,
// Admin and Catalog are required.
type WebhooksDeps struct {
	// Comments keeps the webhook questions: the inbox and the outbox.
	Comments CommentStore
	Store    WebhookTurnStore
	// Turns begins the questions' turns; Admin registers repositories and
	// records the reviews of unreviewed PRs.
	Turns   *Turns
	Admin   *Admin
	Catalog *Catalog
	// Forges look up PRs and post the answers back (one per forge name).
	Forges []Forge
	// Limiter, if set, enforces QuestionsPerRepo.
	Limiter RateLimiter
	// Observer, if set, counts the replies.
	Observer CommentObserver
	// Masker hides secrets in recorded failures; default the built-in
	// rules only.
	Masker *Masker
	Logger *slog.Logger
	// Now tells the time (time.Now by default).
	Now Clock
}

// Webhooks take questions from pull request comments (the inbox) and
// post their answers back to the forge (the outbox), each once.
type Webhooks struct {
	cfg      WebhooksConfig
	comments CommentStore
	store    WebhookTurnStore
	turns    *Turns
	admin    *Admin
	catalog  *Catalog
	forges   map[string]Forge
	limits   questionLimits
	observer CommentObserver
	masker   *Masker
	log      *slog.Logger
	now      Clock
	// reviewing serialises, in this process, the making of the review of
	// an unreviewed PR: two questions arriving together make one version.
	reviewing sync.Mutex
}

// NewWebhooks returns Webhooks.
func NewWebhooks(cfg WebhooksConfig, d WebhooksDeps) (*Webhooks, error) {
	cfg.Poll = cmp.Or(cfg.Poll, time.Second)
	cfg.Lease = cmp.Or(cfg.Lease, time.Minute)
	cfg.Backoff = cmp.Or(cfg.Backoff, time.Second)
	cfg.Askers = cmp.Or(cfg.Askers, AskersWriters)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if d.Comments == nil || d.Store == nil || d.Turns == nil || d.Admin == nil || d.Catalog == nil {
		return nil, errors.New("chat webhooks: Comments, Store, Turns, Admin and Catalog are required")
	}
	now := d.Now
	if now == nil {
		now = time.Now
	}
	s := &Webhooks{
		cfg: cfg, comments: d.Comments, store: d.Store, turns: d.Turns, admin: d.Admin, catalog: d.Catalog,
		forges:   make(map[string]Forge),
		limits:   questionLimits{limiter: d.Limiter, perRepo: cfg.QuestionsPerRepo, now: now},
		observer: d.Observer, masker: orMasker(d.Masker),
		log: cmp.Or(d.Logger, slog.New(slog.DiscardHandler)), now: now,
	}
	for _, f := range d.Forges {
		s.forges[f.Name()] = f
	}
	return s, nil
}

// commentRetry is how long after its attempts-th failed attempt a comment
// is tried again: exponential from WebhooksConfig.Backoff, capped at 5m.
func (s *Webhooks) commentRetry(attempts int) time.Duration {
	return Backoff{First: s.cfg.Backoff, Max: 5 * time.Minute}.Delay(attempts)
}

// maxCommentAttempts is how often asking or posting is tried before a
// comment is given up as failed.
const maxCommentAttempts = 12

// ReceiveComment takes a question from a PR comment: it stores it once
// (a delivery or comment received before is a duplicate), reacts 👀, and
// asks it at once when it can. What it could not do yet (the PR's commits
// from the forge, a busy conversation) DeliverReplies does later; the
// question is never lost.
//
// Never silent: a question from someone who may ask that prchat will not
// answer (an unregistered repository, an invalid question, a rate limit
// it cannot wait for, a review that cannot be made) is declined: stored,
// and answered at once with a reply saying why (ReceiptDeclined). An
// unregistered repository is said so once per PR.
//
// An unregistered repository is registered from the event's clone URL when
// autoRegister is set (a setting of each forge's webhook).
func (s *Webhooks) ReceiveComment(ctx context.Context, c Comment, autoRegister bool) (Receipt, error) {
	if c.holdsNUL() {
		// As the API refuses them: nothing with a NUL byte is stored.
		return Receipt{Status: ReceiptIgnored, Reason: "the comment holds a NUL byte, which prchat does not take"}, nil
	}
	if err := s.forgeRepository(ctx, &c); err != nil {
		return Receipt{}, err
	}
	// A project in nested groups that no repository names is one prchat
	// does not know, and is told so below.
	if CheckRepoName(c.Repository) != nil && CheckForgeProject(c.Repository) != nil {
		return Receipt{Status: ReceiptIgnored, Reason: "the event names no repository as owner/name"}, nil
	}
	if ok, err := s.mayAsk(ctx, c); err != nil {
		return Receipt{}, err
	} else if !ok {
		return Receipt{Status: ReceiptIgnored, Reason: "the comment's author may not ask prchat here (PRCHAT_WEBHOOK_ASKERS=" + s.cfg.Askers + ")"}, nil
	}
	wc := WebhookComment{Comment: c, TurnID: newSessionID(), State: CommentReceived}
	if _, err := s.catalog.repository(ctx, c.Repository); err != nil {
		if ErrorCode(err) != CodeRepositoryNotFound {
			return Receipt{}, err
		}
		if !autoRegister || c.CloneURL == "" || CheckRepoName(c.Repository) != nil {
			wc.Refusal = fmt.Sprintf("prchat does not know the repository %s: it answers questions only about repositories registered with it", c.Repository)
			wc.Notice = NoticeUnregistered
		} else if _, _, err := s.admin.RegisterRepository(ctx, Repository{Name: c.Repository, CloneURL: c.CloneURL}); err != nil {
			if code := ErrorCode(err); code == CodeInternal || code == CodeUnavailable {
				return Receipt{}, fmt.Errorf("register %s from its webhook: %w", c.Repository, err)
			}
			wc.Refusal = fmt.Sprintf("prchat could not register the repository %s from the event: %s", c.Repository, strings.TrimSuffix(ErrorMessage(err), "."))
			wc.Notice = NoticeUnregistered
		} else {
			s.log.InfoContext(ctx, "registered repository from a webhook", slog.String("repository", c.Repository), slog.String("forge", c.Forge))
		}
	}
	if wc.Refusal == "" {
		if c.Question == "" {
			wc.Refusal = "there is no question after " + AskCommand
		} else if err := (Ask{Question: c.Question, Focus: c.Focus}).Validate(); err != nil {
			wc.Refusal = "the question cannot be asked: " + ErrorMessage(err)
		}
	}
	// Stored leased to this process (NextAttempt after the lease): the
	// outbox leaves it alone while it is asked (or declined) here, and
	// takes it up when the lease ends if this process stops first.
	wc.NextAttempt = s.now().Add(s.cfg.Lease)
	if err := s.comments.AddComment(ctx, &wc); err != nil {
		switch {
		case errors.Is(err, ErrDuplicate):
			return Receipt{Status: ReceiptDuplicate}, nil
		case errors.Is(err, ErrNoticed):
			return Receipt{Status: ReceiptIgnored, Reason: wc.Refusal + " (said once in this pull request)"}, nil
		}
		return Receipt{}, err
	}
	if wc.Refusal != "" {
		return s.declineNow(ctx, &wc), nil
	}
	// 👀 on receipt, not at the outbox's next pass: that may be a second
	// away, or in another process. A failed reaction is made later.
	s.react(ctx, &wc)
	// Forges wait about 10 s for an answer: what takes longer (a slow API
	// for an unreviewed PR) is left to DeliverReplies.
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := s.askComment(actx, &wc)
	if err != nil {
		if reason, ok := declineReason(err); ok {
			s.log.InfoContext(ctx, "declined a webhook question", slog.String("comment", wc.ID),
				slog.String("repository", c.Repository), slog.Any("err", err))
			wc.Refusal = reason
			return s.declineNow(ctx, &wc), nil
		}
		// Stored: DeliverReplies asks it later.
		s.log.WarnContext(ctx, "ask a webhook question; it will be tried again",
			slog.String("comment", wc.ID), slog.String("repository", c.Repository), slog.Any("err", err))
		s.deferComment(context.WithoutCancel(ctx), &wc, err)
		return Receipt{Status: ReceiptQueued}, nil
	}
	return r, nil
}

// declineNow posts the reply of a declined question (wc.Refusal) at once;
// if that fails, DeliverReplies posts it later.
func (s *Webhooks) declineNow(ctx context.Context, wc *WebhookComment) Receipt {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s.deliverRefusal(pctx, wc)
	return Receipt{Status: ReceiptDeclined, Reason: wc.Refusal}
}

// react makes the 👀 reaction of an accepted question, once; a failure is
// logged and the reaction made on a later pass.
func (s *Webhooks) react(ctx context.Context, wc *WebhookComment) {
	f, ok := s.forges[wc.Forge]
	if !ok || wc.Reacted {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := f.React(rctx, wc.ref(), ReactionSeen); err != nil {
		s.log.WarnContext(ctx, "react to a comment", slog.String("comment", wc.ID), slog.Any("err", err))
		return
	}
	wc.Reacted = true
}

// mayAsk reports whether the comment's author may ask, by the Askers
// setting and what the forge says of the author; one who may not gets
// ReactionRefused (and nothing is stored).
func (s *Webhooks) mayAsk(ctx context.Context, c Comment) (bool, error) {
	if s.cfg.Askers == AskersAnyone {
		return true, nil
	}
	st := StandingOther
	if f, ok := s.forges[c.Forge]; ok {
		var err error
		if st, err = f.Standing(ctx, c.ref(), c.Author); err != nil {
			return false, fmt.Errorf("find what %s is to %s: %w", c.Author.Login, c.Repository, err)
		}
	}
	need := StandingWriter
	if s.cfg.Askers == AskersMembers {
		need = StandingMember
	}
	if st >= need {
		return true, nil
	}
	if f, ok := s.forges[c.Forge]; ok {
		if err := f.React(ctx, c.ref(), ReactionRefused); err != nil {
			s.log.WarnContext(ctx, "react to a comment whose author may not ask", slog.String("repository", c.Repository), slog.Any("err", err))
		}
	}
	s.log.InfoContext(ctx, "refused a webhook question: its author may not ask", slog.String("forge", c.Forge),
		slog.String("repository", c.Repository), slog.Int("pr", c.PR), slog.String("askers", s.cfg.Askers))
	return false, nil
}

// askComment makes the turn of a received or waiting comment (once: the
// turn id is the comment's), and records what became of it.
func (s *Webhooks) askComment(ctx context.Context, wc *WebhookComment) (Receipt, error) {
	if t, err := s.store.TurnByID(ctx, wc.TurnID); err == nil {
		return s.commentQueued(ctx, wc, t.ConversationID, t.Number)
	} else if ErrorCode(err) != CodeNotFound {
		return Receipt{}, err
	}
	// Questions from comments count against the repository's question
	// rate like any: over it, the question waits until the limit allows
	// it, if that is soon; else it is declined, saying when to ask again.
	if wait, err := s.limits.repoWait(ctx, wc.Repository); err != nil {
		return Receipt{}, err
	} else if wait > 0 {
		if s.now().Add(wait).After(wc.CreatedAt.Add(maxRateWait)) {
			return Receipt{}, &declined{reason: RateLimited("questions about "+wc.Repository, wait).Message}
		}
		wc.NextAttempt = s.now().Add(wait)
		if err := s.comments.UpdateComment(ctx, wc); err != nil && !errors.Is(err, ErrFenced) {
			return Receipt{}, err
		}
		return Receipt{Status: ReceiptWaiting, Reason: RateLimited("questions about "+wc.Repository, wait).Message}, nil
	}
	rev, err := s.commentReview(ctx, wc)
	if err != nil {
		return Receipt{}, err
	}
	thread := "timeline/v" + strconv.Itoa(rev.Version)
	if wc.Thread != "" {
		thread = "thread/" + wc.Thread
	}
	convID, err := s.comments.ClaimThread(ctx, wc.Forge, wc.Repository, wc.PR, thread, newSessionID())
	if err != nil {
		return Receipt{}, err
	}
	a := Ask{Question: wc.Question, Focus: wc.Focus}
	head, err := s.store.ConversationHead(ctx, convID)
	switch {
	case ErrorCode(err) == CodeNotFound:
		// The thread's first question: its conversation is about the
		// review version it was asked on.
		c := s.turns.conversationAbout(rev, a)
		c.ID = convID
		c, t, err := s.turns.begin(ctx, c, &rev, a, wc.TurnID)
		if err != nil {
			return Receipt{}, declineFinal(fmt.Errorf("begin the conversation of comment %d: %w", wc.CommentID, err))
		}
		return s.commentQueued(ctx, wc, c.ID, t.Number)
	case err != nil:
		return Receipt{}, err
	}
	_, t, err := s.turns.begin(ctx, head, nil, a, wc.TurnID)
	if err != nil {
		if ErrorCode(err) != CodeBusy {
			return Receipt{}, declineFinal(err)
		}
		// Queued behind the pending turn: asked when it settles.
		wc.ConversationID = head.ID
		wc.State = CommentWaiting
		wc.NextAttempt = s.now().Add(s.cfg.Poll)
		if err := s.comments.UpdateComment(ctx, wc); err != nil && !errors.Is(err, ErrFenced) {
			return Receipt{}, err
		}
		return Receipt{Status: ReceiptWaiting, ConversationID: head.ID, Reason: "the conversation has a question pending; this one is asked when it is answered"}, nil
	}
	return s.commentQueued(ctx, wc, head.ID, t.Number)
}

func (s *Webhooks) commentQueued(ctx context.Context, wc *WebhookComment, convID string, n int) (Receipt, error) {
	wc.ConversationID, wc.TurnNumber, wc.State = convID, n, CommentQueued
	wc.NextAttempt, wc.Error = s.now(), ""
	if err := s.comments.UpdateComment(ctx, wc); err != nil && !errors.Is(err, ErrFenced) {
		return Receipt{}, err
	}
	return Receipt{Status: ReceiptQueued, ConversationID: convID, Turn: n}, nil
}

// commentReview returns the PR's latest review version, or records one
// made from the PR's head and base (from the event, else the forge) when
// there is none: a version with no agent session, so the conversation is
// seeded with the default backend. Questions arriving together make one
// version: in this process they take turns, and across processes the store
// creates version 1 once (CreateFirstReview). A review that cannot be made
// for good is a declined error.
func (s *Webhooks) commentReview(ctx context.Context, wc *WebhookComment) (Review, error) {
	rev, err := s.catalog.review(ctx, wc.Repository, wc.PR, 0)
	if err == nil || ErrorCode(err) != CodeNoReview {
		return rev, declineFinal(err)
	}
	s.reviewing.Lock()
	defer s.reviewing.Unlock()
	// Another question may have made it meanwhile.
	if rev, err = s.catalog.review(ctx, wc.Repository, wc.PR, 0); err == nil || ErrorCode(err) != CodeNoReview {
		return rev, declineFinal(err)
	}
	head, base := wc.HeadSHA, wc.BaseSHA
	if head == "" || base == "" {
		f, ok := s.forges[wc.Forge]
		if !ok {
			return Review{}, &declined{reason: fmt.Sprintf("prchat has no %s API set up to look up this pull request, so no review of it could be made", wc.Forge)}
		}
		if head, base, err = f.PullRequest(ctx, wc.ref()); err != nil {
			err = fmt.Errorf("look up %s#%d: %w", wc.Repository, wc.PR, err)
			if errors.Is(err, ErrForgeRefused) {
				return Review{}, &declined{reason: fmt.Sprintf("%s refused what prchat asked of it to make a review of this pull request", wc.Forge), err: err}
			}
			return Review{}, err
		}
	}
	rev, created, err := s.admin.recordFirstReview(ctx, wc.Repository, Review{
		PR:      wc.PR,
		HeadSHA: head,
		BaseSHA: base,
		Markdown: fmt.Sprintf("No review was recorded for pull request #%d; prchat made this version from the "+
			"pull request's head and base when a question arrived from %s.", wc.PR, wc.Forge),
	})
	switch {
	case err == nil:
	case hasCode(err, CodeNeedsClone):
		// The clone is gone: fetching again will not bring it back.
		return Review{}, &declined{reason: fmt.Sprintf("prchat's clone of %s is missing or cannot be read, so no review of this pull request could be made", wc.Repository), err: err}
	case errors.Is(err, ErrUnknownCommit):
		return Review{}, &declined{reason: fmt.Sprintf("the pull request's commits are not in prchat's clone of %s, also after fetching it, so no review of this pull request could be made", wc.Repository), err: err}
	default:
		return Review{}, declineFinal(err)
	}
	if created {
		s.log.InfoContext(ctx, "recorded a review version for a question on an unreviewed PR",
			slog.String("repository", wc.Repository), slog.Int("pr", wc.PR), slog.Int("version", rev.Version))
	}
	return rev, nil
}

// declined is an error of asking a question that trying again will not
// mend: the question is declined, and its reply says reason.
type declined struct {
	reason string // one sentence for the thread
	err    error
}

func (d *declined) Error() string {
	if d.err != nil {
		return d.reason + ": " + d.err.Error()
	}
	return d.reason
}

func (d *declined) Unwrap() error { return d.err }

// declineFinal returns err as a declined error when it is a domain error
// that says the question cannot be asked (an invalid request, a
// repository or review that is not there, a refusal); an outage or
// internal error it returns as it is, to be tried again.
func declineFinal(err error) error {
	if err == nil {
		return nil
	}
	var d *declined
	if errors.As(err, &d) {
		return err
	}
	switch ErrorCode(err) {
	case CodeInvalid, CodeRepositoryNotFound, CodeNoReview, CodeNotFound, CodeForbidden, CodeUnsupportedBackend, CodeNeedsClone, CodeConflict:
		return &declined{reason: strings.TrimSuffix(ErrorMessage(err), "."), err: err}
	}
	return err
}

// declineReason returns the reply's reason of an error that declines a
// question.
func declineReason(err error) (string, bool) {
	var d *declined
	if errors.As(err, &d) {
		return d.reason, true
	}
	return "", false
}

// hasCode reports whether any error in err's tree (joined errors too) is
// an *Error with code.
func hasCode(err error, code Code) bool {
	for err != nil {
		if e, ok := err.(*Error); ok && e.Code == code {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if hasCode(e, code) {
					return true
				}
			}
			return false
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		default:
			return false
		}
	}
	return false
}

// maxRateWait is how long after its arrival a question may wait for the
// repository's rate limit; one that would wait longer is declined.
const maxRateWait = time.Minute

// holdsNUL reports whether any text of the comment holds a NUL byte.
func (c Comment) holdsNUL() bool {
	for _, v := range []string{c.DeliveryID, c.Repository, c.CloneURL, c.HTMLURL, c.Question, c.Thread, c.Discussion, c.HeadSHA, c.BaseSHA} {
		if strings.ContainsRune(v, 0) {
			return true
		}
	}
	if c.Focus != nil {
		for _, a := range c.Focus.Anchors {
			if strings.ContainsRune(a.Path, 0) {
				return true
			}
		}
	}
	return false
}

func (c Comment) ref() CommentRef {
	return CommentRef{Repository: cmp.Or(c.ForgeProject, c.Repository), PR: c.PR, CommentID: c.CommentID, Thread: c.Thread, Discussion: c.Discussion, Installation: c.Installation}
}

// deferComment records a failed attempt and when to try again. A question
// not asked yet whose attempt failed for good (a declined error), or after
// maxCommentAttempts, is declined: its reply says why (deliverRefusal). An
// answer whose posting failed maxCommentAttempts times is given up.
func (s *Webhooks) deferComment(ctx context.Context, wc *WebhookComment, cause error) {
	wc.Attempts++
	wc.Error = s.masker.String(cause.Error())
	if len(wc.Error) > 2000 {
		wc.Error = wc.Error[:2000]
	}
	wc.NextAttempt = s.now().Add(s.commentRetry(wc.Attempts))
	reason, final := declineReason(cause)
	asking := wc.State == CommentReceived || wc.State == CommentWaiting
	if asking && !final && wc.Attempts >= maxCommentAttempts {
		reason, final = fmt.Sprintf("it could not be taken after %d attempts", wc.Attempts), true
	}
	switch {
	case final:
		// Never silent: told why, once, now (posting the reply has
		// attempts of its own).
		s.log.WarnContext(ctx, "declined a webhook question", slog.String("comment", wc.ID),
			slog.String("forge", wc.Forge), slog.Int("attempts", wc.Attempts), slog.Any("err", cause))
		wc.Refusal, wc.State, wc.Attempts, wc.NextAttempt, wc.PostTried = reason, CommentReceived, 0, s.now(), false
	case !asking && (wc.Attempts >= maxCommentAttempts || errors.Is(cause, ErrForgeRefused)):
		s.giveUp(ctx, wc, cause)
	}
	if err := s.comments.UpdateComment(ctx, wc); err != nil && !errors.Is(err, ErrFenced) {
		s.log.WarnContext(ctx, "record a webhook question's attempt", slog.String("comment", wc.ID), slog.Any("err", err))
	}
}

// giveUp marks a comment failed: nothing more is tried.
func (s *Webhooks) giveUp(ctx context.Context, wc *WebhookComment, cause error) {
	wc.State = CommentFailed
	if s.observer != nil {
		s.observer.ReplyFailed(wc.Forge)
	}
	s.log.WarnContext(ctx, "gave up a webhook question", slog.String("comment", wc.ID),
		slog.String("forge", wc.Forge), slog.Int("attempts", wc.Attempts), slog.Any("err", cause))
}

// deliverRefusal posts the reply of a declined question: one sentence
// saying why (wc.Refusal), with its trace id, exactly once: an attempt
// after one that may have posted it first looks for its marker. Then the
// comment is done (state failed: no answer); a failed post is tried again
// later, up to maxCommentAttempts.
func (s *Webhooks) deliverRefusal(ctx context.Context, wc *WebhookComment) {
	f, ok := s.forges[wc.Forge]
	if !ok {
		s.giveUp(ctx, wc, fmt.Errorf("no %s API is configured to say why a question is declined", wc.Forge))
		if err := s.comments.UpdateComment(ctx, wc); err != nil && !errors.Is(err, ErrFenced) {
			s.log.WarnContext(ctx, "record a declined question", slog.String("comment", wc.ID), slog.Any("err", err))
		}
		return
	}
	if err := s.postRefusal(ctx, f, wc); err != nil {
		wc.Attempts++
		wc.Error = s.masker.String(err.Error())
		wc.NextAttempt = s.now().Add(s.commentRetry(wc.Attempts))
		if wc.Attempts >= maxCommentAttempts {
			s.giveUp(ctx, wc, err)
		} else {
			s.log.WarnContext(ctx, "post why a webhook question is declined; it will be tried again", slog.String("comment", wc.ID),
				slog.String("forge", wc.Forge), slog.Int("attempt", wc.Attempts), slog.Any("err", err))
		}
	} else {
		wc.State = CommentFailed
		if s.observer != nil {
			s.observer.ReplyDeclined(wc.Forge)
		}
		s.log.InfoContext(ctx, "posted why a webhook question is declined", slog.String("comment", wc.ID),
			slog.String("forge", wc.Forge), slog.String("repository", wc.Repository), slog.Int("pr", wc.PR))
	}
	if err := s.comments.UpdateComment(ctx, wc); err != nil && !errors.Is(err, ErrFenced) {
		s.log.WarnContext(ctx, "record a declined question", slog.String("comment", wc.ID), slog.Any("err", err))
	}
}

// postRefusal posts RefusalBody to wc unless an earlier attempt did.
func (s *Webhooks) postRefusal(ctx context.Context, f Forge, wc *WebhookComment) error {
	marker := ReplyMarker(wc.TurnID)
	return s.postOnce(ctx, f, wc, marker, func() (string, error) {
		return RefusalBody(wc.Refusal, wc.ID, marker), nil
	})
}

// postOnce posts the reply that body writes to wc's thread, once: after an
// attempt that may have posted it (PostTried), it looks for a reply
// carrying marker first, and posts nothing when there is one.
func (s *Webhooks) postOnce(ctx context.Context, f Forge, wc *WebhookComment, marker string, body func() (string, error)) error {
	if wc.PostTried {
		id, err := f.FindReply(ctx, wc.ref(), marker)
		if err != nil {
			return fmt.Errorf("look for an earlier reply: %w", err)
		}
		if id != "" {
			wc.ReplyID = id
			return nil
		}
	}
	text, err := body()
	if err != nil {
		return err
	}
	// Recorded before posting: a process that stops after posting leaves
	// the next attempt to look for the reply first.
	wc.PostTried = true
	if err := s.comments.UpdateComment(ctx, wc); err != nil {
		return fmt.Errorf("record a post attempt: %w", err)
	}
	id, err := f.PostReply(ctx, wc.ref(), text)
	if err != nil {
		return err
	}
	wc.ReplyID = id
	return nil
}

// DeliverReplies does what is due for the webhook questions: it reacts to
// new ones, asks those not asked yet (or waiting behind a pending turn), and
// posts the answers of settled turns, each exactly once: before posting
// again after a failure it looks for a reply carrying the turn's marker. It
// returns how many comments it worked on.
func (s *Webhooks) DeliverReplies(ctx context.Context) (int, error) {
	due, err := s.comments.DueComments(ctx, s.now(), 50)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range due {
		if ctx.Err() != nil {
			break
		}
		wc := &due[i]
		// An answer still being made needs nothing yet: no write.
		if wc.State == CommentQueued && (wc.Reacted || s.forges[wc.Forge] == nil) {
			if t, err := s.store.TurnByID(ctx, wc.TurnID); err == nil && !t.State.Final() {
				continue
			}
		}
		// Take the comment for a while, so that another process leaves it.
		wc.NextAttempt = s.now().Add(s.cfg.Lease)
		if err := s.comments.UpdateComment(ctx, wc); err != nil {
			if !errors.Is(err, ErrFenced) {
				return n, err
			}
			continue
		}
		n++
		s.deliverComment(ctx, wc)
	}
	return n, nil
}

func (s *Webhooks) deliverComment(ctx context.Context, wc *WebhookComment) {
	if wc.Refusal != "" {
		s.deliverRefusal(ctx, wc)
		return
	}
	f, ok := s.forges[wc.Forge]
	s.react(ctx, wc)
	switch wc.State {
	case CommentReceived, CommentWaiting:
		if _, err := s.askComment(ctx, wc); err != nil {
			s.deferComment(ctx, wc, err)
		}
		return
	}
	t, err := s.store.TurnByID(ctx, wc.TurnID)
	if ErrorCode(err) == CodeNotFound {
		// Its conversation was deleted before the answer was posted.
		err = &declined{reason: "its conversation was deleted before it was answered", err: err}
	}
	if err != nil {
		s.deferComment(ctx, wc, err)
		return
	}
	if !t.State.Final() {
		wc.NextAttempt = s.now().Add(s.cfg.Poll)
		if err := s.comments.UpdateComment(ctx, wc); err != nil && !errors.Is(err, ErrFenced) {
			s.log.WarnContext(ctx, "record a webhook question", slog.String("comment", wc.ID), slog.Any("err", err))
		}
		return
	}
	if !ok {
		s.deferComment(ctx, wc, fmt.Errorf("no %s API is configured to post the answer", wc.Forge))
		return
	}
	if err := s.postReply(ctx, f, wc, t); err != nil {
		s.log.WarnContext(ctx, "post an answer; it will be tried again", slog.String("comment", wc.ID),
			slog.String("forge", wc.Forge), slog.Int("attempt", wc.Attempts+1), slog.Any("err", err))
		s.deferComment(ctx, wc, err)
		return
	}
	wc.State, wc.Error = CommentPosted, ""
	if err := s.comments.UpdateComment(ctx, wc); err != nil && !errors.Is(err, ErrFenced) {
		s.log.WarnContext(ctx, "record a posted answer", slog.String("comment", wc.ID), slog.Any("err", err))
	}
	if s.observer != nil {
		s.observer.ReplyPosted(wc.Forge)
	}
	s.log.InfoContext(ctx, "posted an answer", slog.String("comment", wc.ID), slog.String("forge", wc.Forge),
		slog.String("repository", wc.Repository), slog.Int("pr", wc.PR), slog.String("state", string(t.State)))
}

// postReply posts the answer of turn t to wc, unless a reply carrying the
// turn's marker is there already (an earlier attempt posted it and then
// failed to record that).
func (s *Webhooks) postReply(ctx context.Context, f Forge, wc *WebhookComment, t Turn) error {
	return s.postOnce(ctx, f, wc, ReplyMarker(t.ID), func() (string, error) {
		c, err := s.store.ConversationHead(ctx, t.ConversationID)
		if err != nil {
			return "", fmt.Errorf("conversation of turn %s: %w", t.ID, err)
		}
		rev, err := s.catalog.reviewByID(ctx, c.ReviewID)
		if err != nil {
			return "", fmt.Errorf("review of turn %s: %w", t.ID, err)
		}
		truncated := false
		if evs, err := s.store.Events(ctx, t.ID, 0); err == nil {
			for _, e := range evs {
				if e.Type == EventNote && e.Text == NoteCutShort {
					truncated = true
				}
			}
		}
		return ReplyBody(ReplyInput{Turn: t, HTMLURL: wc.HTMLURL, HeadSHA: rev.HeadSHA, Truncated: truncated, Forge: f,
			Unreviewed: rev.Backend == "" && rev.SessionID == ""}), nil
	})
}
