package chat

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prchat/prchat/chat/mask"
)

// Config holds the Service's settings.
type Config struct {
	// WorkerID is this process's worker id (its host), recorded as the host
	// of the sessions its runs create. Required for a Service that runs turns.
	WorkerID string
	// Policy is the policy of a turn's life (time limits, attempts, a sole
	// worker), shared with the worker and the reconciler.
	Policy TurnPolicy
	// MaxRepairs is how often an invalid answer is sent back to the agent.
	// Zero means never; cmd sets the default of 2.
	MaxRepairs int
	// MaxCalls caps the agent's model calls per turn. Default 40.
	MaxCalls int
	// MaxTokens caps the input (cached input included) plus output tokens per
	// turn. Default 10,000,000: a forked session re-reads its context on
	// every model call.
	MaxTokens int64
	// DefaultBackend runs conversations of reviews that name no backend.
	// Default local.
	DefaultBackend string
	// Providers are the providers questions may name and the provider
	// settings list; DefaultProvider is the active one until one is set.
	Providers       []ProviderConfig
	DefaultProvider string
	// ReposRoots are the folders under which clone paths and review run
	// directories may lie; AnyPath allows any path (a loopback daemon with
	// no roots configured). With neither, no clone path is taken.
	ReposRoots []string
	AnyPath    bool
	// AllowFileURLs allows clone URLs of any transport (file://, local
	// paths, ext::), not only https://, ssh:// and user@host:path.
	AllowFileURLs bool
	// CloneAllowPrivate allows clone URLs whose host resolves to a
	// loopback, link-local or private address (CheckCloneHost).
	CloneAllowPrivate bool
	// QuestionsPerRepo and QuestionsPerToken limit the questions asked
	// about one repository and with one token, across the deployment
	// (through Deps.Limiter). Zero: no limit.
	QuestionsPerRepo  Rate
	QuestionsPerToken Rate
	// MaxSessionBytes is the largest agent session file a review may
	// upload and a worker stores after a turn. Default
	// DefaultMaxSessionBytes (64 MiB).
	MaxSessionBytes int64
	// CommentPoll is how often a webhook question waiting for its turn, or
	// for a pending conversation, is looked at again. Default 1s.
	CommentPoll time.Duration
	// CommentLease is how long one process holds a webhook question it
	// works on before another may take it. Default 1m.
	CommentLease time.Duration
	// CommentBackoff is the wait after a webhook question's first failed
	// attempt (to ask it, or to post its answer); it doubles with each
	// further failure, up to 5m. Default 1s.
	CommentBackoff time.Duration
}

func (c Config) withDefaults() Config {
	c.Policy = c.Policy.withDefaults()
	c.MaxCalls = cmp.Or(c.MaxCalls, 40)
	c.MaxTokens = cmp.Or(c.MaxTokens, 10_000_000)
	c.DefaultBackend = cmp.Or(c.DefaultBackend, BackendLocal)
	c.MaxSessionBytes = cmp.Or(c.MaxSessionBytes, DefaultMaxSessionBytes)
	c.CommentPoll = cmp.Or(c.CommentPoll, time.Second)
	c.CommentLease = cmp.Or(c.CommentLease, time.Minute)
	c.CommentBackoff = cmp.Or(c.CommentBackoff, time.Second)
	return c
}

func (c Config) validate() error {
	if err := c.Policy.Validate(); err != nil {
		return err
	}
	switch {
	case c.MaxCalls < 0, c.MaxTokens < 0:
		return errors.New("limits must not be negative")
	case c.MaxRepairs < 0 || c.MaxRepairs > 10:
		return fmt.Errorf("max repairs %d is outside 0..10", c.MaxRepairs)
	}
	return nil
}

// Deps are the parts a Service works with. Store, Queue and Hosts are
// required; a Service that runs turns also needs Workspaces and Backends.
type Deps struct {
	Store      Store
	Queue      Queue
	Hosts      Hosts
	Workspaces Workspaces
	Backends   []Backend
	// Masker hides secrets; default one with the built-in rules only.
	Masker *mask.Masker
	// Settings and Sealer keep provider settings and encrypted keys
	// (optional: without them the provider routes answer unavailable).
	Settings SettingsStore
	Sealer   *Sealer
	// Histories stores the histories of recorded reviews' sessions.
	Histories HistoryStore
	// SessionFiles keeps the agent CLIs' session files of reviews and
	// conversations, sealed with Sealer; SessionCheckers check an uploaded
	// one, by backend name (without them, no session file is stored and
	// sessions stay on their hosts).
	SessionFiles    SessionFileStore
	SessionCheckers map[string]SessionChecker
	// Reports, if set, answers the dashboard's lists and the team figures;
	// Files, if set, shows lines of the repositories' files.
	Reports ReportStore
	Files   FileReader
	// Observer, if set, is told about every finished run (metrics).
	Observer Observer
	// Clones checks clone paths and review commits when they are
	// registered and recorded (required to register a clone path or to
	// record a review of a repository with a clone).
	Clones Clones
	// Limiter, if set, enforces the question rate limits.
	Limiter RateLimiter
	// Comments keeps webhook questions; Forges post their answers back;
	// CommentObserver counts the replies (all optional).
	Comments        CommentStore
	Forges          []Forge
	CommentObserver CommentObserver
	// Publisher and Follower, if set, deliver events live.
	Publisher Publisher
	Follower  Follower
	Logger    *slog.Logger
	// Now tells the time (time.Now by default).
	Now Clock
}

// Service begins, runs and settles turns. The API calls its question and
// lookup methods, the worker calls Run, and the reconciler calls
// PendingTurns, Enqueue and Settle.
type Service struct {
	cfg             Config
	store           Store
	queue           Queue
	hosts           Hosts
	workspaces      Workspaces
	backends        map[string]Backend
	masker          *liveMasker
	publisher       Publisher
	follower        Follower
	settings        SettingsStore
	sealer          *Sealer
	histories       HistoryStore
	sessionFiles    SessionFileStore
	sessionCheckers map[string]SessionChecker
	reports         ReportStore
	files           FileReader
	observer        Observer
	clones          Clones
	limiter         RateLimiter
	log             *slog.Logger
	now             Clock
	comments        CommentStore
	forges          map[string]Forge
	commentObserver CommentObserver
	// system is System(), built once: every running turn's request holds
	// it for the turn's life.
	system string

	inflight sync.Map // turn id -> its run's fence (int64) once claimed: runs of this process
	repos    repoCache
}

// NewService returns a Service.
func NewService(cfg Config, d Deps) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("chat config: %w", err)
	}
	if d.Store == nil || d.Queue == nil || d.Hosts == nil {
		return nil, errors.New("chat: Store, Queue and Hosts are required")
	}
	s := &Service{
		cfg:             cfg,
		system:          System(),
		store:           d.Store,
		queue:           d.Queue,
		hosts:           d.Hosts,
		workspaces:      d.Workspaces,
		backends:        make(map[string]Backend),
		masker:          newLiveMasker(cmp.Or(d.Masker, mask.New())),
		publisher:       d.Publisher,
		follower:        d.Follower,
		settings:        d.Settings,
		sealer:          d.Sealer,
		histories:       d.Histories,
		sessionFiles:    d.SessionFiles,
		sessionCheckers: d.SessionCheckers,
		reports:         d.Reports,
		files:           d.Files,
		observer:        d.Observer,
		clones:          d.Clones,
		limiter:         d.Limiter,
		log:             cmp.Or(d.Logger, slog.New(slog.DiscardHandler)),
		now:             d.Now,
		comments:        d.Comments,
		forges:          make(map[string]Forge),
		commentObserver: d.CommentObserver,
	}
	if s.now == nil {
		s.now = time.Now
	}
	for _, b := range d.Backends {
		s.backends[b.Name()] = b
	}
	for _, f := range d.Forges {
		s.forges[f.Name()] = f
	}
	return s, nil
}

// Backends lists the backend names questions and reviews may name: the
// contract's and any other this Service runs.
func (s *Service) Backends() []string {
	names := KnownBackends()
	for n := range s.backends {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// RegisterRepository registers a repository, or updates the clone path and
// URL of one with the same name. It reports whether it was new.
func (s *Service) RegisterRepository(ctx context.Context, r Repository) (Repository, bool, error) {
	if err := CheckRepoName(r.Name); err != nil {
		return Repository{}, false, err
	}
	if len(r.ClonePath) > maxPathBytes || len(r.CloneURL) > maxPathBytes {
		return Repository{}, false, Errorf(CodeInvalid, "clone_path and clone_url are at most %d bytes", maxPathBytes)
	}
	if _, ok := limitedToken(ctx); ok {
		// Registering says where a repository is cloned from: pointing a
		// repository of the token's at another's clone would read that one.
		return Repository{}, false, Errorf(CodeForbidden, "only a token for every repository registers repositories or changes where one is cloned from")
	}
	if err := s.checkRegistration(ctx, &r); err != nil {
		return Repository{}, false, err
	}
	created, err := s.store.UpsertRepository(ctx, &r)
	if err == nil {
		s.remember(r)
	}
	return r, created, err
}

// Repository returns a registered repository.
func (s *Service) Repository(ctx context.Context, name string) (Repository, error) {
	return s.repository(ctx, name)
}

// Repositories lists the registered repositories (those the request's
// token may see).
func (s *Service) Repositories(ctx context.Context) ([]Repository, error) {
	rs, err := s.store.Repositories(ctx)
	if t, ok := limitedToken(ctx); ok && err == nil {
		rs = slices.DeleteFunc(rs, func(r Repository) bool { return !t.Sees(r.Name) })
	}
	return rs, err
}

// RecordReview saves r as the next version of the PR's review.
func (s *Service) RecordReview(ctx context.Context, repo string, r Review) (Review, error) {
	if err := r.Validate(s.Backends()); err != nil {
		return Review{}, err
	}
	rp, err := s.repository(ctx, repo)
	if err != nil {
		return Review{}, err
	}
	if err := s.checkReview(ctx, rp, &r); err != nil {
		return Review{}, err
	}
	r.RepositoryID, r.Repository = rp.ID, rp.Name
	if r.Sections == nil {
		r.Sections = []Section{}
	}
	if len(r.History) > 0 && string(r.History) != "null" {
		if r.Backend != BackendOpenAI || s.histories == nil {
			return Review{}, Errorf(CodeInvalid, "a session history can be recorded only for the openai backend, whose sessions live in the database")
		}
		var msgs []json.RawMessage
		if err := json.Unmarshal(r.History, &msgs); err != nil {
			return Review{}, Errorf(CodeInvalid, "session_history must be a JSON array of messages")
		}
		r.SessionID = cmp.Or(r.SessionID, newSessionID())
		masked := json.RawMessage(s.masker.String(string(r.History)))
		if !json.Valid(masked) {
			masked = r.History
		}
		if err := s.histories.SaveHistory(ctx, r.Backend, r.SessionID, masked); err != nil {
			return Review{}, err
		}
		r.SessionHost = "" // the database holds it: any worker can fork it
	}
	if err := s.store.CreateReview(ctx, &r); err != nil {
		return Review{}, err
	}
	return r, nil
}

// newSessionID returns a random UUID (version 4) for a recorded session.
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Review returns a version of a PR's review (0 = the latest).
func (s *Service) Review(ctx context.Context, repo string, pr, version int) (Review, error) {
	if _, err := s.repository(ctx, repo); err != nil {
		return Review{}, err
	}
	return s.review(ctx, repo, pr, version)
}

// Reviews lists a PR's review versions.
func (s *Service) Reviews(ctx context.Context, repo string, pr int) ([]Review, error) {
	if _, err := s.repository(ctx, repo); err != nil {
		return nil, err
	}
	return s.store.Reviews(ctx, repo, pr)
}

// Ask begins a conversation about a review version (0 = the latest) with
// its first question: the conversation and its queued turn are stored in
// one transaction, then the turn's job is enqueued. If the enqueue fails,
// the turn stays queued and the reconciler enqueues it later.
func (s *Service) Ask(ctx context.Context, repo string, pr, version int, a Ask) (Conversation, Turn, error) {
	if err := s.checkAsk(a); err != nil {
		return Conversation{}, Turn{}, err
	}
	rp, err := s.repository(ctx, repo)
	if err != nil {
		return Conversation{}, Turn{}, err
	}
	if rp.ClonePath == "" && rp.CloneURL == "" {
		return Conversation{}, Turn{}, Errorf(CodeNeedsClone, "repository %s has no clone path or URL; register one first", repo)
	}
	rev, err := s.review(ctx, repo, pr, version)
	if err != nil {
		return Conversation{}, Turn{}, err
	}
	if err := s.limitQuestion(ctx, rp.Name); err != nil {
		return Conversation{}, Turn{}, err
	}
	c := Conversation{
		ReviewID:      rev.ID,
		Repository:    rev.Repository,
		PR:            rev.PR,
		ReviewVersion: rev.Version,
		Title:         Title(a.Question),
		Backend:       cmp.Or(rev.Backend, s.cfg.DefaultBackend),
		Model:         rev.Model,
	}
	t := s.newTurn(c, a)
	t.Queue = s.route(ctx, t.Backend, rev.SessionHost)
	if err := s.store.CreateConversation(ctx, &c, &t); err != nil {
		return Conversation{}, Turn{}, err
	}
	s.enqueue(ctx, t)
	s.feed(ctx, c.Repository, c.PR, t, StateQueued, "")
	return c, t, nil
}

// Continue asks the next question of a conversation. A conversation whose
// previous turn is still pending refuses it with CodeBusy.
func (s *Service) Continue(ctx context.Context, conversationID string, a Ask) (Turn, error) {
	if err := s.checkAsk(a); err != nil {
		return Turn{}, err
	}
	// The busy rule is the database's: AddTurn refuses a second pending turn.
	c, err := s.conversationHead(ctx, conversationID)
	if err != nil {
		return Turn{}, err
	}
	if err := s.limitQuestion(ctx, c.Repository); err != nil {
		return Turn{}, err
	}
	t := s.newTurn(c, a)
	host := c.SessionHost
	if c.SessionID == "" {
		if rev, err := s.reviewByID(ctx, c.ReviewID); err == nil {
			host = rev.SessionHost
		}
	}
	t.Queue = s.route(ctx, t.Backend, host)
	if err := s.store.AddTurn(ctx, &t); err != nil {
		return Turn{}, err
	}
	s.enqueue(ctx, t)
	s.feed(ctx, c.Repository, c.PR, t, StateQueued, "")
	return t, nil
}

func (s *Service) checkAsk(a Ask) error {
	if err := a.Validate(); err != nil {
		return err
	}
	if a.Provider != "" && !slices.Contains(s.providerNames(), a.Provider) {
		return Errorf(CodeUnsupportedBackend, "provider %q is not supported; use one of %v", a.Provider, s.providerNames())
	}
	return nil
}

func (s *Service) newTurn(c Conversation, a Ask) Turn {
	return Turn{
		ConversationID: c.ID,
		State:          StateQueued,
		Question:       a.Question,
		Focus:          a.Focus,
		Provider:       a.Provider,
		Backend:        cmp.Or(s.backendOf(a.Provider), c.Backend),
		Model:          cmp.Or(a.Model, c.Model),
		Usage:          Usage{},
	}
}

// backendOf returns the backend that runs a provider ("" for none).
func (s *Service) backendOf(provider string) string {
	if provider == "" {
		return ""
	}
	if p, ok := s.provider(provider); ok {
		return p.Backend
	}
	return provider // a backend's name
}

// route picks the queue of a turn: the host that holds the session it will
// fork or resume, while that host is alive; else (and always for a sole
// worker) the shared queue.
func (s *Service) route(ctx context.Context, backend, host string) string {
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

func (s *Service) enqueue(ctx context.Context, t Turn) {
	if err := s.queue.Enqueue(ctx, t.ID, t.Queue); err != nil {
		// The turn is stored as queued: the reconciler enqueues it later.
		s.log.WarnContext(ctx, "enqueue turn; the reconciler will retry",
			slog.String("turn", t.ID), slog.String("queue", t.Queue), slog.Any("err", err))
	}
}

// Enqueue routes a pending turn again and enqueues its job (the
// reconciler's way to recover a job that Redis lost).
func (s *Service) Enqueue(ctx context.Context, t Turn) error {
	c, err := s.store.ConversationHead(ctx, t.ConversationID)
	if err != nil {
		return fmt.Errorf("enqueue turn %s: %w", t.ID, err)
	}
	host := c.SessionHost
	if c.SessionID == "" {
		rev, err := s.reviewByID(ctx, c.ReviewID)
		if err != nil {
			return fmt.Errorf("enqueue turn %s: %w", t.ID, err)
		}
		host = rev.SessionHost
	}
	queue := s.route(ctx, cmp.Or(t.Backend, c.Backend), host)
	if queue != t.Queue {
		if err := s.store.SetTurnQueue(ctx, t.ID, queue); err != nil {
			return fmt.Errorf("enqueue turn %s: %w", t.ID, err)
		}
	}
	if err := s.queue.Enqueue(ctx, t.ID, queue); err != nil {
		return fmt.Errorf("enqueue turn %s: %w", t.ID, err)
	}
	return nil
}

// PendingTurns lists the turns that are queued or running.
func (s *Service) PendingTurns(ctx context.Context) ([]Turn, error) {
	return s.store.PendingTurns(ctx)
}

// Conversation returns a conversation with its turns.
func (s *Service) Conversation(ctx context.Context, id string) (Conversation, error) {
	c, err := s.store.Conversation(ctx, id)
	if err == nil && !sees(ctx, c.Repository) {
		return Conversation{}, conversationNotFound(id)
	}
	return c, err
}

// Conversations lists a PR's conversations, newest first.
func (s *Service) Conversations(ctx context.Context, repo string, pr int) ([]Conversation, error) {
	if _, err := s.repository(ctx, repo); err != nil {
		return nil, err
	}
	return s.store.Conversations(ctx, repo, pr)
}

// Turn returns one turn of a conversation.
func (s *Service) Turn(ctx context.Context, conversationID string, number int) (Turn, error) {
	if err := s.seeConversation(ctx, conversationID); err != nil {
		return Turn{}, err
	}
	return s.store.Turn(ctx, conversationID, number)
}

// Cancel cancels a pending turn: it is settled as cancelled at once and its
// job is stopped (a running agent is killed). A settled turn is returned as
// it is.
func (s *Service) Cancel(ctx context.Context, conversationID string, number int) (Turn, error) {
	if err := s.seeConversation(ctx, conversationID); err != nil {
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
func (s *Service) DeleteConversation(ctx context.Context, id string) error {
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
		s.publish(ctx, t.ID, []Event{{Type: EventError, Seq: t.LastSeq + 1, Message: "The conversation was deleted.", Reason: ReasonCancelled, At: s.now()}})
	}
	if c.RunDir == "" {
		return nil
	}
	if rev, err := s.reviewByID(ctx, c.ReviewID); err != nil || rev.RunDir == c.RunDir {
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
func (s *Service) Settle(ctx context.Context, turnID string, state State, reason Reason, note string) error {
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
	if s.publisher != nil {
		if c, err := s.store.ConversationHead(ctx, t.ConversationID); err == nil {
			feed = append(feed, s.feedEvent(c.Repository, c.PR, t, state, reason))
		}
	}
	s.publish(ctx, turnID, evs, feed...)
	if s.observer != nil {
		// Settled by a cancel or the reconciler, maybe before any run: its
		// run, if one is under way, is fenced off and counts nothing.
		s.observer.TurnSettled(TurnStats{Backend: t.Backend, State: state, Reason: reason})
	}
	s.log.InfoContext(ctx, "turn settled", slog.String("turn", turnID), slog.String("state", string(state)), slog.String("reason", string(reason)))
	return nil
}

func (s *Service) publish(ctx context.Context, turnID string, evs []Event, feed ...FeedEvent) {
	if s.publisher == nil || len(evs)+len(feed) == 0 {
		return
	}
	if err := s.publisher.Publish(ctx, turnID, evs, feed); err != nil {
		s.log.WarnContext(ctx, "publish events", slog.String("turn", turnID), slog.Any("err", err))
	}
}

// feedEvent is a turn's state change for its repository's feed.
func (s *Service) feedEvent(repo string, pr int, t Turn, state State, reason Reason) FeedEvent {
	return FeedEvent{Type: "turn", Repository: repo, PR: pr, ConversationID: t.ConversationID, Turn: t.Number, State: state, Reason: reason, At: s.now()}
}

// feed publishes a turn's state change to its repository's feed.
func (s *Service) feed(ctx context.Context, repo string, pr int, t Turn, state State, reason Reason) {
	if s.publisher == nil {
		return
	}
	if err := s.publisher.PublishFeed(ctx, repo, s.feedEvent(repo, pr, t, state, reason)); err != nil {
		s.log.WarnContext(ctx, "publish feed event", slog.String("turn", t.ID), slog.Any("err", err))
	}
}

// Ready checks that the database and the queue answer. Its error is a
// CodeUnavailable error whose message names the part that does not answer,
// not why (that is its cause, for the log).
func (s *Service) Ready(ctx context.Context) error {
	if err := s.store.Ping(ctx); err != nil {
		return &Error{Code: CodeUnavailable, Message: "the database does not answer", Err: err}
	}
	if err := s.queue.Ping(ctx); err != nil {
		return &Error{Code: CodeUnavailable, Message: "the queue does not answer", Err: err}
	}
	return nil
}
