package chat

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// TurnStore keeps conversations and their turns for Turns. Implemented by
// package store.
//
// Lookups of missing rows return an *Error with CodeNotFound.
type TurnStore interface {
	// CreateConversation inserts c and its first turn t (state queued) in one
	// transaction. It fills the ids, numbers and times of both (ids given
	// are kept).
	CreateConversation(ctx context.Context, c *Conversation, t *Turn) error
	// AddTurn inserts t as the conversation's next turn (state queued). A
	// conversation with a queued or running turn refuses it with CodeBusy.
	AddTurn(ctx context.Context, t *Turn) error
	// Conversation returns a conversation with all its turns.
	Conversation(ctx context.Context, id string) (Conversation, error)
	// ConversationHead returns a conversation without its turns.
	ConversationHead(ctx context.Context, id string) (Conversation, error)
	// Conversations lists a PR's conversations, newest first, without turns.
	Conversations(ctx context.Context, repo string, pr int) ([]Conversation, error)
	// DeleteConversation deletes a conversation with its turns and events.
	DeleteConversation(ctx context.Context, id string) error

	Turn(ctx context.Context, conversationID string, number int) (Turn, error)
	// TurnByID returns a turn by its id, without its events.
	TurnByID(ctx context.Context, id string) (Turn, error)
	// PendingTurns lists turns in state queued or running, oldest first:
	// each with its ids (ID, ConversationID, Number), State, Provider,
	// Queue, Runner, Fence, LastSeq, Backend, CreatedAt and StartedAt, what
	// a reconciler pass needs, and not its question, focus, answer, note or
	// usage (a pass reads every pending turn).
	PendingTurns(ctx context.Context) ([]Turn, error)
	// SetTurnQueue records the host queue a turn's job went to ("" = shared).
	SetTurnQueue(ctx context.Context, id, queue string) error
	// SettleTurn settles a pending turn whoever holds it (cancel, reconciler)
	// and takes a fresh fence so that no run can store into it any more. It
	// numbers events (the final ones, their Seq unset) after the turn's last
	// stored event and stores them in the same transaction, so that a
	// settled turn is never read without its final event. It returns the
	// settled turn with that fence and its LastSeq the Seq of the last of
	// events, or ErrSettled.
	SettleTurn(ctx context.Context, turnID string, state State, reason Reason, note string, events []Event) (Turn, error)
}

// TurnsConfig holds the settings of Turns.
type TurnsConfig struct {
	// WorkerID is this process's worker id, if it runs turns: a deleted
	// conversation's run directory on this host is removed here.
	WorkerID string
	// Policy is the policy of a turn's life (a sole worker routes every
	// turn to the shared queue), shared with the Runner and the worker.
	Policy TurnPolicy
	// DefaultBackend runs conversations of reviews that name no backend.
	// Default local.
	DefaultBackend string
	// QuestionsPerRepo and QuestionsPerToken limit the questions asked
	// about one repository and with one token, across the deployment
	// (through TurnsDeps.Limiter). Zero: no limit.
	QuestionsPerRepo  Rate
	QuestionsPerToken Rate
}

// TurnsDeps are the parts Turns works with. Store, Queue, Hosts, Catalog
// and Providers are required.
type TurnsDeps struct {
	Store     TurnStore
	Queue     Queue
	Hosts     Hosts
	Catalog   *Catalog
	Providers *Providers
	// Workspaces, if set, removes the run directory of a deleted
	// conversation that is on this host.
	Workspaces Workspaces
	// Limiter, if set, enforces the question rate limits.
	Limiter RateLimiter
	// Publisher, if set, delivers the turns' state changes live.
	Publisher Publisher
	// Observer, if set, is told about every turn Settle settles (metrics).
	Observer Observer
	// Masker hides secrets in settle notes; default the built-in rules.
	Masker *Masker
	Logger *slog.Logger
	// Now tells the time (time.Now by default).
	Now Clock
}

// Turns begins turns (a question asked through the API or in a PR's
// comment), cancels and settles them, and looks up conversations and
// their turns. The Runner runs them; the reconciler re-enqueues and
// settles what the queue lost.
type Turns struct {
	cfg        TurnsConfig
	store      TurnStore
	queue      Queue
	hosts      Hosts
	catalog    *Catalog
	providers  *Providers
	workspaces Workspaces
	limits     questionLimits
	notify     notifier
	observer   Observer
	masker     *Masker
	log        *slog.Logger
	now        Clock
}

// NewTurns returns Turns.
func NewTurns(cfg TurnsConfig, d TurnsDeps) (*Turns, error) {
	cfg.Policy = cfg.Policy.withDefaults()
	if err := cfg.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("chat turns config: %w", err)
	}
	cfg.DefaultBackend = cmp.Or(cfg.DefaultBackend, BackendLocal)
	if d.Store == nil || d.Queue == nil || d.Hosts == nil || d.Catalog == nil || d.Providers == nil {
		return nil, errors.New("chat turns: Store, Queue, Hosts, Catalog and Providers are required")
	}
	now := d.Now
	if now == nil {
		now = time.Now
	}
	log := cmp.Or(d.Logger, slog.New(slog.DiscardHandler))
	return &Turns{
		cfg: cfg, store: d.Store, queue: d.Queue, hosts: d.Hosts, catalog: d.Catalog, providers: d.Providers,
		workspaces: d.Workspaces,
		limits:     questionLimits{limiter: d.Limiter, perRepo: cfg.QuestionsPerRepo, perToken: cfg.QuestionsPerToken, now: now},
		notify:     notifier{publisher: d.Publisher, log: log, now: now},
		observer:   d.Observer,
		masker:     orMasker(d.Masker),
		log:        log,
		now:        now,
	}, nil
}

// Ask begins a conversation about a review version (0 = the latest) with
// its first question: the conversation and its queued turn are stored in
// one transaction, then the turn's job is enqueued. If the enqueue fails,
// the turn stays queued and the reconciler enqueues it later.
func (s *Turns) Ask(ctx context.Context, repo string, pr, version int, a Ask) (Conversation, Turn, error) {
	if err := s.checkAsk(a); err != nil {
		return Conversation{}, Turn{}, err
	}
	rp, err := s.catalog.repository(ctx, repo)
	if err != nil {
		return Conversation{}, Turn{}, err
	}
	if rp.ClonePath == "" && rp.CloneURL == "" {
		return Conversation{}, Turn{}, Errorf(CodeNeedsClone, "repository %s has no clone path or URL; register one first", repo)
	}
	rev, err := s.catalog.review(ctx, repo, pr, version)
	if err != nil {
		return Conversation{}, Turn{}, err
	}
	if err := s.limits.take(ctx, rp.Name); err != nil {
		return Conversation{}, Turn{}, err
	}
	return s.begin(ctx, s.conversationAbout(rev, a), &rev, a, "")
}

// Continue asks the next question of a conversation. A conversation whose
// previous turn is still pending refuses it with CodeBusy.
func (s *Turns) Continue(ctx context.Context, conversationID string, a Ask) (Turn, error) {
	if err := s.checkAsk(a); err != nil {
		return Turn{}, err
	}
	// The busy rule is the database's: AddTurn refuses a second pending turn.
	c, err := visibleHead(ctx, s.store, conversationID)
	if err != nil {
		return Turn{}, err
	}
	if err := s.limits.take(ctx, c.Repository); err != nil {
		return Turn{}, err
	}
	_, t, err := s.begin(ctx, c, nil, a, "")
	return t, err
}

// conversationAbout is a new conversation about rev whose first question
// is a.
func (s *Turns) conversationAbout(rev Review, a Ask) Conversation {
	return Conversation{
		ReviewID:      rev.ID,
		Repository:    rev.Repository,
		PR:            rev.PR,
		ReviewVersion: rev.Version,
		Title:         Title(a.Question),
		Backend:       cmp.Or(rev.Backend, s.cfg.DefaultBackend),
		Model:         rev.Model,
	}
}

// begin stores the turn of question a as queued and enqueues its job:
// the first turn of c, a new conversation about review rev (see
// conversationAbout; an ID given is kept), or, with rev nil, the next turn
// of the stored conversation c. turnID, if given, is the turn's id. The
// caller has checked the question and who may ask it. A conversation with
// a pending turn refuses the next with CodeBusy. If the enqueue fails, the
// turn stays queued and the reconciler enqueues it later.
//
// Every question begins here, from the API and from PR comments alike.
func (s *Turns) begin(ctx context.Context, c Conversation, rev *Review, a Ask, turnID string) (Conversation, Turn, error) {
	t := s.newTurn(c, a)
	t.ID = turnID
	if rev != nil {
		t.Queue = s.route(ctx, t.Backend, rev.SessionHost)
		if err := s.store.CreateConversation(ctx, &c, &t); err != nil {
			return Conversation{}, Turn{}, err
		}
	} else {
		t.Queue = s.route(ctx, t.Backend, s.catalog.sessionHost(ctx, c))
		if err := s.store.AddTurn(ctx, &t); err != nil {
			return Conversation{}, Turn{}, err
		}
	}
	var feed []FeedEvent
	if s.notify.publisher != nil {
		feed = append(feed, s.notify.feedEvent(c.Repository, c.PR, t, StateQueued, ""))
	}
	s.enqueue(ctx, t, feed...)
	return c, t, nil
}

func (s *Turns) checkAsk(a Ask) error {
	if err := a.Validate(); err != nil {
		return err
	}
	return s.providers.check(a.Provider)
}

func (s *Turns) newTurn(c Conversation, a Ask) Turn {
	return Turn{
		ConversationID: c.ID,
		State:          StateQueued,
		Question:       a.Question,
		Focus:          a.Focus,
		Provider:       a.Provider,
		Backend:        cmp.Or(s.providers.backendOf(a.Provider), c.Backend),
		Model:          cmp.Or(a.Model, c.Model),
		Usage:          Usage{},
	}
}

// route picks the queue of a turn: the host that holds the session it will
// fork or resume, while that host is alive; else (and always for a sole
// worker) the shared queue.
func (s *Turns) route(ctx context.Context, backend, host string) string {
	if s.cfg.Policy.SoleWorker || host == "" || backend == BackendLocal {
		return ""
	}
	alive, err := s.hosts.Alive(ctx, host)
	if err != nil {
		s.log.WarnContext(ctx, "check host", slog.String("host", host), slog.Any("err", err))
		return ""
	}
	if !alive {
		return ""
	}
	return host
}

// enqueue enqueues a new turn's job with its feed events.
func (s *Turns) enqueue(ctx context.Context, t Turn, feed ...FeedEvent) {
	if err := s.queue.Enqueue(ctx, t.ID, t.Queue, feed...); err != nil {
		// The turn is stored as queued: the reconciler enqueues it later.
		s.log.WarnContext(ctx, "enqueue turn; the reconciler will retry",
			slog.String("turn", t.ID), slog.String("queue", t.Queue), slog.Any("err", err))
	}
}

// Enqueue routes a pending turn again and enqueues its job (the
// reconciler's way to recover a job that Redis lost). t is the turn as the
// caller read it: Enqueue reads it again first and leaves alone a turn
// that is gone or whose state or fence changed since (a run took it, or it
// settled, after the caller's read), reporting false: a reconciler's pass
// over thousands of pending turns takes a while, and a turn it read may
// have been handed on, claimed or finished by the time it gets to it;
// enqueued again, each would cost a job, a claim that loses and its Redis
// calls.
func (s *Turns) Enqueue(ctx context.Context, t Turn) (bool, error) {
	now, err := s.store.TurnByID(ctx, t.ID)
	switch {
	case ErrorCode(err) == CodeNotFound:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("enqueue turn %s: %w", t.ID, err)
	case now.State != t.State || now.Fence != t.Fence:
		return false, nil
	}
	c, err := s.store.ConversationHead(ctx, t.ConversationID)
	if err != nil {
		return false, fmt.Errorf("enqueue turn %s: %w", t.ID, err)
	}
	host := c.SessionHost
	if c.SessionID == "" {
		rev, err := s.catalog.reviewByID(ctx, c.ReviewID)
		if err != nil {
			return false, fmt.Errorf("enqueue turn %s: %w", t.ID, err)
		}
		host = rev.SessionHost
	}
	queue := s.route(ctx, cmp.Or(t.Backend, c.Backend), host)
	if queue != t.Queue {
		if err := s.store.SetTurnQueue(ctx, t.ID, queue); err != nil {
			return false, fmt.Errorf("enqueue turn %s: %w", t.ID, err)
		}
	}
	if err := s.queue.Enqueue(ctx, t.ID, queue); err != nil {
		return false, fmt.Errorf("enqueue turn %s: %w", t.ID, err)
	}
	return true, nil
}

// PendingTurns lists the turns that are queued or running, with the
// fields TurnStore.PendingTurns names.
func (s *Turns) PendingTurns(ctx context.Context) ([]Turn, error) {
	return s.store.PendingTurns(ctx)
}

// Conversation returns a conversation with its turns.
func (s *Turns) Conversation(ctx context.Context, id string) (Conversation, error) {
	c, err := s.store.Conversation(ctx, id)
	if err == nil && !sees(ctx, c.Repository) {
		return Conversation{}, conversationNotFound(id)
	}
	return c, err
}

// Conversations lists a PR's conversations, newest first.
func (s *Turns) Conversations(ctx context.Context, repo string, pr int) ([]Conversation, error) {
	if _, err := s.catalog.repository(ctx, repo); err != nil {
		return nil, err
	}
	return s.store.Conversations(ctx, repo, pr)
}

// Turn returns one turn of a conversation.
func (s *Turns) Turn(ctx context.Context, conversationID string, number int) (Turn, error) {
	if err := seeConversation(ctx, s.store, conversationID); err != nil {
		return Turn{}, err
	}
	return s.store.Turn(ctx, conversationID, number)
}

// Cancel cancels a pending turn: it is settled as cancelled at once and its
// job is stopped (a running agent is killed). A settled turn is returned as
// it is.
func (s *Turns) Cancel(ctx context.Context, conversationID string, number int) (Turn, error) {
	if err := seeConversation(ctx, s.store, conversationID); err != nil {
		return Turn{}, err
	}
	t, err := s.store.Turn(ctx, conversationID, number)
	if err != nil || t.State.Final() {
		return t, err
	}
	if err := s.Settle(ctx, t.ID, StateCancelled, ReasonCancelled, "Cancelled by request."); err != nil && !errors.Is(err, ErrSettled) {
		return Turn{}, err
	}
	if err := s.queue.Cancel(ctx, t.ID); err != nil {
		s.log.WarnContext(ctx, "cancel job", slog.String("turn", t.ID), slog.Any("err", err))
	}
	return s.store.Turn(ctx, conversationID, number)
}

// DeleteConversation deletes a conversation with its turns and removes its
// run directory. A pending turn's jobs are stopped after the rows are gone,
// so that its run, on whatever worker, finds the turn deleted, removes the
// run directory it worked in and ends without a retry.
func (s *Turns) DeleteConversation(ctx context.Context, id string) error {
	c, err := s.Conversation(ctx, id)
	if err != nil {
		return err
	}
	if err := s.store.DeleteConversation(ctx, id); err != nil {
		return err
	}
	for _, t := range c.Turns {
		if t.State.Final() {
			continue
		}
		if err := s.queue.Cancel(ctx, t.ID); err != nil {
			s.log.WarnContext(ctx, "cancel job of a deleted turn", slog.String("turn", t.ID), slog.Any("err", err))
		}
		s.notify.publish(ctx, t.ID, []Event{{Type: EventError, Seq: t.LastSeq + 1, Message: "The conversation was deleted.", Reason: ReasonCancelled, At: s.now()}})
	}
	if c.RunDir == "" {
		return nil
	}
	if rev, err := s.catalog.reviewByID(ctx, c.ReviewID); err != nil || rev.RunDir == c.RunDir {
		return nil // the review's own run directory is not ours to remove
	}
	host := c.SessionHost
	if s.workspaces != nil && (host == "" || host == s.cfg.WorkerID || s.cfg.Policy.SoleWorker) {
		if err := s.workspaces.Remove(ctx, c.RunDir); err != nil {
			s.log.WarnContext(ctx, "remove run directory", slog.String("conversation", id), slog.Any("err", err))
		}
		return nil
	}
	// The run directory is on a worker's host: that worker removes it.
	if err := s.queue.RemoveRunDir(ctx, host, c.RunDir); err != nil {
		s.log.WarnContext(ctx, "ask a worker to remove a run directory", slog.String("conversation", id), slog.String("host", host), slog.Any("err", err))
	}
	return nil
}

// Settle settles a pending turn whoever runs it (cancel, reconciler) and
// stores and sends its final events, stored with the settle itself. It
// returns ErrSettled if the turn was already final.
func (s *Turns) Settle(ctx context.Context, turnID string, state State, reason Reason, note string) error {
	note = s.masker.String(note)
	now := s.now()
	evs := []Event{{Type: EventState, State: state, At: now}}
	if note != "" {
		evs = append(evs, Event{Type: EventNote, Text: note, At: now})
	}
	evs = append(evs, Event{Type: EventError, Message: cmp.Or(note, string(reason)), Reason: reason, At: now})
	t, err := s.store.SettleTurn(ctx, turnID, state, reason, note, evs)
	if err != nil {
		return err
	}
	for i := range evs {
		evs[i].Seq = t.LastSeq - int64(len(evs)-i) + 1
	}
	var feed []FeedEvent
	if s.notify.publisher != nil {
		if c, err := s.store.ConversationHead(ctx, t.ConversationID); err == nil {
			feed = append(feed, s.notify.feedEvent(c.Repository, c.PR, t, state, reason))
		}
	}
	s.notify.publish(ctx, turnID, evs, feed...)
	if s.observer != nil {
		// Settled by a cancel or the reconciler, maybe before any run: its
		// run, if one is under way, is fenced off and counts nothing.
		s.observer.TurnSettled(TurnStats{Backend: t.Backend, State: state, Reason: reason})
	}
	s.log.InfoContext(ctx, "turn settled", slog.String("turn", turnID), slog.String("state", string(state)), slog.String("reason", string(reason)))
	return nil
}
