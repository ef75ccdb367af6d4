package chat

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Notes a turn can carry.
const (
	noteSeededPrefix = "Started without the review's own context: "
	noteNoSession    = "The agent kept no session for this answer, so the next question starts without this conversation's context."
)

// RunStore keeps what a run of a turn reads and writes. Implemented by
// package store.
//
// Methods that take a fence return ErrFenced when the turn's current
// fencing token is another.
type RunStore interface {
	// ClaimTurnWithConversation marks a queued or running turn running for
	// runner with a fresh fencing token (the old one plus one) and returns
	// it with the head of its conversation (without turns), read with the
	// claim. A queued turn is claimed at once; for a running one, allow is
	// asked with the turn as stored and may refuse (false) a takeover of a
	// turn another live run holds; then it returns ErrFenced. A turn in a
	// final state returns ErrSettled; a deleted one an *Error with
	// CodeNotFound.
	ClaimTurnWithConversation(ctx context.Context, id, runner string, allow func(Turn) bool) (Turn, Conversation, error)
	// ReleaseTurn puts a running turn that the run holding fence cannot
	// finish (its worker stops) back to queued, with no runner, and returns
	// it: the next run claims it at once and its claim's fresh fence fences
	// that run off. A turn that run no longer holds returns ErrFenced.
	ReleaseTurn(ctx context.Context, id string, fence int64) (Turn, error)
	// AppendEvents stores events of a turn whose fence is current.
	AppendEvents(ctx context.Context, turnID string, fence int64, events []Event) error
	// FinishTurn stores the outcome of the run holding fence and settles the
	// turn, in one transaction with the conversation's session update.
	FinishTurn(ctx context.Context, turnID string, fence int64, o Outcome) error
	TurnByID(ctx context.Context, id string) (Turn, error)
	// Conversation returns a conversation with all its turns.
	Conversation(ctx context.Context, id string) (Conversation, error)
}

// RunnerConfig holds the settings of a Runner.
type RunnerConfig struct {
	// WorkerID is this process's worker id (its host), recorded as the host
	// of the sessions its runs create. Required.
	WorkerID string
	// Policy is the policy of a turn's life (time limits, attempts, a sole
	// worker), shared with Turns, the worker and the reconciler.
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
	// MaxSessionBytes is the largest agent session file a worker stores
	// after a turn. Default DefaultMaxSessionBytes (64 MiB).
	MaxSessionBytes int64
	// ReposRoots and AnyPath are Admin's: a review's run directory outside
	// them was recorded as a label only, never a place to run in.
	ReposRoots []string
	AnyPath    bool
}

func (c RunnerConfig) withDefaults() RunnerConfig {
	c.Policy = c.Policy.withDefaults()
	c.MaxCalls = cmp.Or(c.MaxCalls, 40)
	c.MaxTokens = cmp.Or(c.MaxTokens, 10_000_000)
	c.DefaultBackend = cmp.Or(c.DefaultBackend, BackendLocal)
	c.MaxSessionBytes = cmp.Or(c.MaxSessionBytes, DefaultMaxSessionBytes)
	return c
}

func (c RunnerConfig) validate() error {
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

// RunnerDeps are the parts a Runner works with. Store, Hosts, Catalog and
// Providers are required; without Workspaces every turn fails with
// backend_unavailable (this process runs no agents).
type RunnerDeps struct {
	Store      RunStore
	Hosts      Hosts
	Catalog    *Catalog
	Providers  *Providers
	Workspaces Workspaces
	Backends   []Backend
	// SessionFiles keeps the agent CLIs' session files of reviews and
	// conversations, sealed with Sealer (without them, no session file is
	// restored or stored and sessions stay on their hosts).
	SessionFiles SessionFileStore
	Sealer       *Sealer
	// Masker hides secrets; default one with the built-in rules only.
	Masker *Masker
	// Publisher, if set, delivers the run's events live.
	Publisher Publisher
	// Observer, if set, is told about every finished run (metrics).
	Observer Observer
	Logger   *slog.Logger
	// Now tells the time (time.Now by default).
	Now Clock
}

// Runner runs turns on a worker: it claims a turn, starts its agent,
// checks, repairs and masks the answer, and stores it.
type Runner struct {
	cfg        RunnerConfig
	roots      repoRoots
	store      RunStore
	hosts      Hosts
	catalog    *Catalog
	providers  *Providers
	workspaces Workspaces
	backends   map[string]Backend
	files      SessionFileStore
	sealer     *Sealer
	masker     *Masker
	notify     notifier
	observer   Observer
	log        *slog.Logger
	now        Clock
	// system is System(), built once: every running turn's request holds
	// it for the turn's life.
	system string

	inflight sync.Map // turn id -> its run's fence (int64) once claimed: runs of this process
}

// NewRunner returns a Runner.
func NewRunner(cfg RunnerConfig, d RunnerDeps) (*Runner, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("chat runner config: %w", err)
	}
	if d.Store == nil || d.Hosts == nil || d.Catalog == nil || d.Providers == nil {
		return nil, errors.New("chat runner: Store, Hosts, Catalog and Providers are required")
	}
	now := d.Now
	if now == nil {
		now = time.Now
	}
	log := cmp.Or(d.Logger, slog.New(slog.DiscardHandler))
	s := &Runner{
		cfg: cfg, roots: repoRoots{roots: cfg.ReposRoots, any: cfg.AnyPath}, store: d.Store, hosts: d.Hosts,
		files: d.SessionFiles, sealer: d.Sealer, catalog: d.Catalog, providers: d.Providers,
		workspaces: d.Workspaces, backends: make(map[string]Backend), masker: orMasker(d.Masker),
		notify: notifier{publisher: d.Publisher, log: log, now: now}, observer: d.Observer,
		log: log, now: now, system: System(),
	}
	for _, b := range d.Backends {
		s.backends[b.Name()] = b
	}
	return s, nil
}

// Run runs a turn: it claims the turn with a fresh fencing token, starts the
// agent (fork, resume or seed), checks and repairs the answer, masks it,
// stores it and settles the turn. runner names this worker run.
//
// Run returns nil when the turn is settled, whoever settled it, and when
// another live run holds it (a duplicate delivery). It returns an error only
// when the turn should be run again: the store failed, or this worker is
// shutting down under it.
func (s *Runner) Run(ctx context.Context, turnID, runner string) error {
	if _, dup := s.inflight.LoadOrStore(turnID, struct{}{}); dup {
		return nil // this process already runs it
	}
	defer s.inflight.Delete(turnID)
	// Keys stored by any process since the last turn are masked in this one.
	s.masker.refresh(ctx, false)

	// While the database is unreachable the claim is tried again, within
	// the turn's time limit; the job is not failed by an outage.
	var t Turn
	var conv Conversation
	err := s.whileUnavailable(ctx, time.Now().Add(s.cfg.Policy.Windows().Turn), "claim turn", func() (err error) {
		t, conv, err = s.store.ClaimTurnWithConversation(ctx, turnID, runner, func(t Turn) bool { return s.mayTakeOver(ctx, t, runner) })
		return err
	})
	switch {
	case errors.Is(err, ErrSettled), errors.Is(err, ErrFenced):
		s.log.InfoContext(ctx, "turn not claimed", slog.String("turn", turnID), slog.String("why", err.Error()))
		return nil
	case ErrorCode(err) == CodeNotFound:
		s.log.InfoContext(ctx, "turn not claimed: it was deleted", slog.String("turn", turnID))
		return nil // its conversation was deleted: nothing to run, ever
	case err != nil:
		return fmt.Errorf("claim turn %s: %w", turnID, err)
	}
	s.inflight.Store(turnID, t.Fence)
	r := &run{s: s, turn: t, conv: conv, fence: t.Fence, rec: newRecorder(s, t.ID, t.Fence, t.LastSeq), started: s.now()}
	if s.cfg.Policy.OutOfAttempts(t.Fence - 1) {
		// The runs before this one all ended early.
		o := Outcome{State: StateInterrupted, Reason: ReasonInterrupted, Note: InterruptedNote(t.Fence - 1)}
		return r.finish(ctx, o)
	}
	r.rec.emit(ctx, Event{Type: EventState, State: StateRunning})
	o, err := r.execute(ctx)
	if err != nil {
		// This worker stops under the turn, or the turn was cancelled or
		// deleted under it.
		wctx := context.WithoutCancel(ctx)
		r.rec.flush(wctx)
		if r.ended(wctx) {
			return nil // no run is needed any more
		}
		// Leave it running for the next run to take over.
		return fmt.Errorf("run turn %s: %w", turnID, err)
	}
	return r.finish(context.WithoutCancel(ctx), o)
}

// ended reports whether the run's turn needs no more runs of this job: it
// was settled (cancelled), deleted with its conversation, handed on
// (Release) or taken over. A deleted turn's run directory is removed.
func (r *run) ended(ctx context.Context) bool {
	t, err := r.s.store.TurnByID(ctx, r.turn.ID)
	switch {
	case ErrorCode(err) == CodeNotFound:
		r.removeDir(ctx)
		return true
	case err != nil:
		return false
	}
	return t.State.Final() || t.State == StateQueued || t.Fence != r.fence
}

// Release hands a turn that this process runs but cannot finish (its
// worker stops) to the next run at once: the turn goes back to queued with
// no runner, so the next run claims it without waiting for a takeover, and
// that claim's fresh fence fences this run off. A turn this process does not
// run, or whose run no longer holds it, returns ErrFenced.
func (s *Runner) Release(ctx context.Context, turnID string) error {
	v, _ := s.inflight.Load(turnID)
	fence, ok := v.(int64)
	if !ok {
		return fmt.Errorf("release turn %s: this process does not run it: %w", turnID, ErrFenced)
	}
	if _, err := s.store.ReleaseTurn(ctx, turnID, fence); err != nil {
		return err
	}
	s.log.InfoContext(ctx, "turn handed on", slog.String("turn", turnID), slog.Int64("fence", fence))
	return nil
}

// removeDir removes the run directory this run worked in, unless it is the
// review's own: its conversation was deleted while the run went on.
func (r *run) removeDir(ctx context.Context) {
	s := r.s
	if r.dir == "" || r.dir == r.reviewDir || s.workspaces == nil {
		return
	}
	if err := s.workspaces.Remove(ctx, r.dir); err != nil {
		s.log.WarnContext(ctx, "remove run directory of a deleted conversation", slog.String("turn", r.turn.ID), slog.Any("err", err))
	}
}

// mayTakeOver decides whether runner may claim a turn another run holds.
func (s *Runner) mayTakeOver(ctx context.Context, t Turn, runner string) bool {
	if t.State == StateQueued || t.Runner == "" || t.Runner == runner {
		return true
	}
	alive, err := s.hosts.RunnerAlive(ctx, t.Runner)
	if err != nil || !alive {
		return err == nil
	}
	return t.StartedAt != nil && s.now().Sub(*t.StartedAt) > s.cfg.Policy.Windows().Takeover
}

// run is one run of a turn.
type run struct {
	s     *Runner
	turn  Turn
	conv  Conversation // the turn's, without its turns, as the claim read it
	fence int64
	rec   *recorder // stores and sends the run's events
	// repo and pr are the turn's, for the repository feed.
	repo string
	pr   int
	// started is when this run began.
	started time.Time
	// traceID ties an internal failure's note to its cause in the log.
	traceID string
	// dir is the run directory the agent works in, reviewDir the review's
	// own (set by plan).
	dir, reviewDir string
	// plan is how the agent started (set by execute); restoreTook how long
	// restoring its stored session file took (0: none was restored).
	plan        *plan
	restoreTook time.Duration
}

// plan is how the agent of a turn starts.
type plan struct {
	backend Backend
	name    string
	model   string
	mode    SessionMode
	session SessionRef
	dir     string
	reason  string // why the session was seeded
	review  Review
	repo    Repository
	conv    Conversation
	earlier []Turn
	// endpoint is the openai backend's provider endpoint.
	endpoint *Endpoint
}

// execute runs the agent and returns the outcome to store. An error means
// the run must stop without settling (this worker is shutting down).
func (r *run) execute(ctx context.Context) (Outcome, error) {
	s := r.s
	// Planning reads the database: while it is unreachable, planning
	// starts over once it is back, within the turn's window. Returning
	// here would hand the job back to the queue while this run still holds
	// the turn, and a retry that another worker takes would find the turn
	// held by a live runner, refuse it, and leave it running with no job
	// until the reconciler's Stuck window.
	var p *plan
	err := s.whileUnavailable(ctx, time.Now().Add(s.cfg.Policy.Windows().Turn), "plan turn", func() (err error) {
		p, err = r.makePlan(ctx)
		return err
	})
	r.plan = p
	if r.repo != "" {
		// The feed hears of the run with its first published events, once
		// its review was read, however often the plan started over.
		r.rec.addFeed(s.notify.feedEvent(r.repo, r.pr, r.turn, StateRunning, ""))
	}
	if err != nil {
		if ctx.Err() != nil {
			return Outcome{}, ctx.Err()
		}
		if Unavailable(err) {
			return Outcome{}, err // the turn has not failed: run it again
		}
		return r.failure(err), nil
	}
	if p.mode == SessionSeeded {
		r.rec.emit(ctx, Event{Type: EventNote, Text: noteSeededPrefix + p.reason})
	}
	tctx, cancel := context.WithTimeout(ctx, s.cfg.Policy.TurnTimeout)
	defer cancel()

	ask := Ask{Question: r.turn.Question, Focus: r.turn.Focus}
	req := RunRequest{
		Mode:       p.mode,
		Session:    p.session,
		Dir:        p.dir,
		Prompt:     QuestionPrompt(p.review, ask),
		System:     s.system,
		Schema:     json.RawMessage(AnswerSchema),
		Model:      p.model,
		Endpoint:   p.endpoint,
		Question:   r.turn.Question,
		Focus:      r.turn.Focus,
		Repository: p.repo,
		Review:     p.review,
	}
	if p.mode == SessionSeeded || p.mode == SessionNone {
		req.Prompt = SeedPrompt(p.review, p.earlier, ask)
	}
	lines := func(ctx context.Context, path string) (int, error) {
		return s.workspaces.LineCount(ctx, p.repo, p.review.HeadSHA, path)
	}

	var usage Usage
	sessionID := ""
	var answer Answer
	var problem error
	for attempt := 0; ; attempt++ {
		req.MaxCalls = s.cfg.MaxCalls - usage.Calls
		req.MaxTokens = s.cfg.MaxTokens - usage.InputTokens - usage.OutputTokens
		res, err := p.backend.Run(tctx, req, func(e Event) {
			if e.Type == EventUsage {
				return // the turn's usage is reported once, its total, when it settles
			}
			r.rec.emit(tctx, e)
		})
		usage.Add(res.Usage)
		if errors.Is(err, ErrSessionGone) && attempt == 0 && ctx.Err() == nil && (p.mode == SessionForked || p.mode == SessionResumed) {
			// The CLI refused the session: start a new one instead.
			if err := r.reseed(ctx, p, err); err != nil {
				if Unavailable(err) || ctx.Err() != nil {
					return Outcome{}, err
				}
				return r.failure(err), nil
			}
			req.Mode, req.Session, req.Dir = p.mode, SessionRef{}, p.dir
			req.Prompt = SeedPrompt(p.review, p.earlier, ask)
			attempt = -1
			continue
		}
		sessionID = cmp.Or(res.SessionID, sessionID)
		p.model = cmp.Or(res.Model, p.model)
		if err == nil {
			err = r.checkBudget(usage)
		}
		if err != nil {
			if ctx.Err() != nil {
				return Outcome{}, ctx.Err() // cancelled, or this worker stops
			}
			if tctx.Err() != nil {
				err = Fail(ReasonTimeout, fmt.Errorf("the turn took longer than %s", s.cfg.Policy.TurnTimeout))
			}
			o := r.failure(err)
			o.Usage = usage
			return r.withSession(o, p, sessionID), nil
		}
		answer, problem = ParseAnswer(res.Structured, res.Text)
		if problem == nil {
			problem = CheckCitations(tctx, answer, lines)
		}
		if problem == nil {
			break
		}
		if ctx.Err() != nil {
			return Outcome{}, ctx.Err()
		}
		if attempt >= s.cfg.MaxRepairs {
			o := r.failure(Fail(ReasonInvalidAnswer, fmt.Errorf("the agent's answer failed the checks after %d repairs: %v", attempt, problem)))
			o.Usage = usage
			return r.withSession(o, p, sessionID), nil
		}
		usage.Repairs++
		r.rec.emit(tctx, Event{Type: EventNote, Text: "The answer failed the checks; asking the agent to repair it: " + problem.Error()})
		req.Prompt = RepairPrompt(problem)
		if sessionID != "" {
			req.Mode, req.Session = SessionResumed, SessionRef{ID: sessionID, Dir: p.dir}
		} else {
			req.Prompt = QuestionPrompt(p.review, ask) + "\n\n" + req.Prompt
		}
	}

	answer.AnswerMarkdown = s.masker.String(answer.AnswerMarkdown)
	if answer.SuggestsFix != nil {
		answer.SuggestsFix.Summary = s.masker.String(answer.SuggestsFix.Summary)
	}
	o := Outcome{State: StateSucceeded, Answer: &answer, Usage: usage}
	if p.mode == SessionSeeded {
		o.Note = noteSeededPrefix + p.reason
	}
	if sessionID == "" {
		o.Note = joinNotes(o.Note, noteNoSession)
	}
	return r.withSession(o, p, sessionID), nil
}

// reseed turns p into a new (seeded) session in a new run directory,
// after the CLI refused the session p was to fork or resume (gone), and
// says so in a note.
func (r *run) reseed(ctx context.Context, p *plan, gone error) error {
	whose := "the review's"
	if p.mode == SessionResumed {
		whose = "the conversation's"
	}
	p.reason = fmt.Sprintf("the agent CLI refused %s session (%v)", whose, publicNote(gone))
	p.mode, p.session = SessionSeeded, SessionRef{}
	if err := r.loadEarlier(ctx, p); err != nil {
		return err
	}
	dir, err := r.prepare(ctx, p)
	if err != nil {
		return err
	}
	p.dir, r.dir = dir, dir
	r.restoreTook = 0
	r.rec.emit(ctx, Event{Type: EventNote, Text: noteSeededPrefix + p.reason})
	return nil
}

// withSession fills in how the agent ran and the conversation's session.
func (r *run) withSession(o Outcome, p *plan, sessionID string) Outcome {
	if p == nil {
		return o
	}
	o.Backend, o.Model, o.Session = p.name, p.model, p.mode
	mode := p.conv.Session
	if mode == "" || p.mode == SessionSeeded {
		mode = p.mode
	}
	info := &SessionInfo{
		SessionID: sessionID,
		RunDir:    p.dir,
		Backend:   p.name,
		Model:     p.model,
		Session:   mode,
	}
	if sessionID != "" {
		info.SessionHost = r.s.cfg.WorkerID
	}
	if p.mode == SessionSeeded {
		info.SeededReason = p.reason
	} else {
		info.SeededReason = p.conv.SeededReason
	}
	o.Conversation = info
	return o
}

func (r *run) checkBudget(u Usage) error {
	s := r.s
	if u.Calls > s.cfg.MaxCalls {
		return Fail(ReasonBudgetExceeded, fmt.Errorf("the agent made %d model calls; the limit is %d", u.Calls, s.cfg.MaxCalls))
	}
	if tok := u.InputTokens + u.OutputTokens; tok > s.cfg.MaxTokens {
		return Fail(ReasonBudgetExceeded, fmt.Errorf("the agent used %d tokens; the limit is %d", tok, s.cfg.MaxTokens))
	}
	return nil
}

// plan loads the turn's review and repository (its conversation came with
// the claim) and decides how the agent starts: fork the review's session,
// resume the conversation's, or seed a new one in a new run directory.
// execute calls it again after an unavailable error: a read that can fail
// so comes before anything it makes (a run directory), or waits out an
// outage itself.
func (r *run) makePlan(ctx context.Context) (*plan, error) {
	s := r.s
	conv := r.conv
	var rev Review
	var repo Repository
	err := s.whileUnavailable(ctx, time.Now().Add(s.cfg.Policy.Windows().Turn), "load turn", func() (err error) {
		if rev, err = s.catalog.reviewByID(ctx, conv.ReviewID); err != nil {
			return fmt.Errorf("load review: %w", err)
		}
		if repo, err = s.catalog.repository(ctx, rev.Repository); err != nil {
			return fmt.Errorf("load repository: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.repo, r.pr = rev.Repository, rev.PR
	p := &plan{
		name:   cmp.Or(r.turn.Backend, conv.Backend, s.cfg.DefaultBackend),
		model:  cmp.Or(r.turn.Model, conv.Model),
		review: rev,
		repo:   repo,
		conv:   conv,
	}
	p.backend = s.backends[p.name]
	if p.backend == nil {
		return nil, Fail(ReasonBackendUnavailable, fmt.Errorf("backend %s is not installed on worker %s", p.name, s.cfg.WorkerID))
	}
	if err := p.backend.Available(ctx); err != nil {
		return nil, Fail(ReasonBackendUnavailable, fmt.Errorf("backend %s on worker %s: %w", p.name, s.cfg.WorkerID, err))
	}
	if s.workspaces == nil {
		return nil, Fail(ReasonBackendUnavailable, errors.New("this process runs no agents"))
	}
	if p.name == BackendOpenAI {
		e, model, err := s.providers.endpoint(ctx, r.turn.Provider)
		if err != nil {
			return nil, Fail(ReasonBackendUnavailable, err)
		}
		p.endpoint = e
		if r.turn.Provider != "" && r.turn.Model == "" {
			p.model = model // the named provider's default
		}
		p.model = cmp.Or(p.model, model)
	}

	switch {
	case p.name == BackendLocal:
		p.mode = SessionNone
	case conv.SessionID != "" && conv.Backend == p.name:
		p.session = SessionRef{ID: conv.SessionID, Dir: conv.RunDir}
		p.reason, err = r.locate(ctx, p, SessionOwner{ConversationID: conv.ID}, conv.SessionHost, "the conversation's", conv.RunDir)
		p.mode = SessionResumed
	case conv.SessionID != "":
		p.reason = fmt.Sprintf("this question asks for backend %s, the conversation ran on %s", p.name, conv.Backend)
	case rev.SessionID == "":
		p.reason = "the review kept no agent session"
	case rev.Backend != p.name:
		p.reason = fmt.Sprintf("this question asks for backend %s, the review was written by %s", p.name, cmp.Or(rev.Backend, "no agent"))
	default:
		p.session = SessionRef{ID: rev.SessionID, Dir: rev.RunDir}
		p.reason, err = r.locate(ctx, p, SessionOwner{ReviewID: rev.ID}, rev.SessionHost, "the review's", "")
		p.mode = SessionForked
	}
	if err != nil {
		return nil, err
	}
	if p.reason != "" {
		p.mode, p.session = SessionSeeded, SessionRef{}
	}
	if p.mode == SessionSeeded || p.mode == SessionNone {
		if err := r.loadEarlier(ctx, p); err != nil {
			return nil, err
		}
	}

	p.dir = p.session.Dir
	if p.mode == SessionNone && conv.RunDir != "" && s.workspaces.Exists(conv.RunDir) {
		p.dir = conv.RunDir
	}
	r.reviewDir = rev.RunDir
	if p.dir == "" {
		if p.dir, err = r.prepare(ctx, p); err != nil {
			return nil, err
		}
	}
	r.dir = p.dir
	return p, nil
}

// loadEarlier loads the conversation's turns before this one into p: only
// a new session needs them (its seed and prompt).
func (r *run) loadEarlier(ctx context.Context, p *plan) error {
	s := r.s
	if r.turn.Number <= 1 || p.earlier != nil {
		return nil
	}
	var full Conversation
	err := s.whileUnavailable(ctx, time.Now().Add(s.cfg.Policy.Windows().Turn), "load earlier turns", func() (err error) {
		full, err = s.store.Conversation(ctx, p.conv.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("load conversation: %w", err)
	}
	for _, t := range full.Turns {
		if t.Number < r.turn.Number {
			p.earlier = append(p.earlier, t)
		}
	}
	return nil
}

// prepare makes a new run directory for p's conversation.
func (r *run) prepare(ctx context.Context, p *plan) (string, error) {
	dir, err := r.s.workspaces.Prepare(ctx, Seed{Repository: p.repo, Review: p.review, Conversation: p.conv, Turns: p.earlier})
	if err != nil {
		if ErrorCode(err) == CodeNeedsClone {
			return "", Fail(ReasonNeedsClone, err)
		}
		return "", Fail(ReasonBackendError, &Error{Code: CodeInternal, Message: "the run directory could not be prepared", Err: err})
	}
	return dir, nil
}

// sessionProblem says why a session cannot be forked or resumed here, or ""
// when it can.
func (r *run) sessionProblem(ctx context.Context, p *plan, host, whose string) string {
	s := r.s
	if host != "" && host != s.cfg.WorkerID {
		return fmt.Sprintf("%s session is on worker %s, which is not running", whose, host)
	}
	if p.session.Dir != "" && !s.workspaces.Exists(p.session.Dir) {
		return fmt.Sprintf("%s run directory is gone", whose)
	}
	if err := p.backend.HasSession(ctx, p.session); err != nil {
		return fmt.Sprintf("%s session is gone (%v)", whose, err)
	}
	return ""
}

// failure turns an error into a failed outcome. A client is told what a
// domain error or a backend's failure says; of any other error (the store's,
// a command's, a domain error with CodeInternal) only a plain sentence with a
// trace id, while the cause goes to the log under that id.
func (r *run) failure(err error) Outcome {
	reason := FailureReason(err, ReasonBackendError)
	var e *Error
	var f *Failure
	isDomain, isFailure := errors.As(err, &e), errors.As(err, &f)
	note := publicNote(err)
	switch {
	case !isDomain && !isFailure, isDomain && e.Code == CodeInternal:
		// Nothing in it was written for a client: a plain sentence and a
		// trace id; the cause goes to the log under that id.
		r.traceID = newTraceID()
		r.s.log.Error("turn failed: internal error", slog.String("turn", r.turn.ID), slog.String("trace_id", r.traceID),
			slog.String("reason", string(reason)), slog.Any("err", err))
		if isDomain {
			note = fmt.Sprintf("%s; the cause is in the server's log under trace id %s.", strings.TrimSuffix(upperFirst(e.Message), "."), r.traceID)
		} else {
			note = fmt.Sprintf(noteInternal, r.traceID)
		}
	case note != err.Error():
		r.s.log.Warn("turn failed", slog.String("turn", r.turn.ID), slog.String("reason", string(reason)), slog.Any("err", err))
	}
	return Outcome{State: StateFailed, Reason: reason, Note: r.s.masker.String(note)}
}

// upperFirst returns s with its first letter in upper case.
func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// serverPath is an absolute path in an error's text (not the // of a URL).
var serverPath = regexp.MustCompile(`(^|[\s"'(=:])/[^/\s"'(),;:][^\s"'(),;:]*`)

// publicNote is what a client is told of a failure: the message of a
// domain error (written for clients; its cause stays in the log), else the
// error's text with the server's paths left out, so that no git command
// line or folder of the server reaches a client.
func publicNote(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return serverPath.ReplaceAllString(err.Error(), "$1[path]")
}

// finish stores the outcome with the final events.
func (r *run) finish(ctx context.Context, o Outcome) error {
	s := r.s
	if o.Note != "" && o.State == StateSucceeded {
		r.rec.emit(ctx, Event{Type: EventNote, Text: o.Note})
	}
	u := o.Usage
	r.rec.emit(ctx, Event{Type: EventUsage, InputTokens: &u.InputTokens, OutputTokens: &u.OutputTokens, CostUSD: u.CostUSD})
	r.rec.emit(ctx, Event{Type: EventState, State: o.State})
	if o.State == StateSucceeded {
		r.rec.emit(ctx, Event{Type: EventDone, ConversationID: r.turn.ConversationID, Turn: r.turn.Number, Answer: o.Answer})
	} else {
		r.rec.emit(ctx, Event{Type: EventError, Message: o.Note, Reason: o.Reason, TraceID: r.traceID})
	}
	r.saveSession(ctx, &o)
	o.Events = r.rec.take()
	// While the database is unreachable the outcome is stored again, as
	// long as the run's job may last.
	err := s.whileUnavailable(ctx, r.started.Add(s.cfg.Policy.Windows().Job), "finish turn", func() error {
		return s.store.FinishTurn(ctx, r.turn.ID, r.fence, o)
	})
	if errors.Is(err, ErrFenced) {
		s.log.InfoContext(ctx, "turn fenced; result dropped", slog.String("turn", r.turn.ID))
		r.ended(ctx) // removes the run directory of a deleted conversation
		return nil
	}
	if err != nil {
		if r.ended(ctx) {
			return nil
		}
		return fmt.Errorf("finish turn %s: %w", r.turn.ID, err)
	}
	feed := r.rec.takeFeed()
	if r.repo != "" {
		feed = append(feed, s.notify.feedEvent(r.repo, r.pr, r.turn, o.State, o.Reason))
	}
	s.notify.publish(ctx, r.turn.ID, o.Events, feed...)
	if s.observer != nil {
		s.observer.TurnSettled(TurnStats{
			Backend: o.Backend, State: o.State, Reason: o.Reason, Session: o.Session,
			QueueWait: r.started.Sub(r.turn.CreatedAt), Duration: s.now().Sub(r.started), Usage: o.Usage,
			Restore: r.restoreTook, SessionBytes: sessionBytes(o.SessionFile),
		})
	}
	s.log.InfoContext(ctx, "turn finished", slog.String("turn", r.turn.ID), slog.String("state", string(o.State)),
		slog.String("reason", string(o.Reason)), slog.String("session", string(o.Session)), slog.Int("repairs", o.Usage.Repairs))
	return nil
}

// sessionBytes is the size of a session file stored with an outcome.
func sessionBytes(f *SealedSessionFile) int64 {
	if f == nil {
		return 0
	}
	return f.Size
}

// maskJSON masks the string values of a JSON document.
func maskJSON(m interface{ String(string) string }, raw json.RawMessage) json.RawMessage {
	masked := m.String(string(raw))
	if masked == string(raw) || !json.Valid([]byte(masked)) {
		if masked != string(raw) {
			b, _ := json.Marshal(masked)
			return b
		}
		return raw
	}
	return json.RawMessage(masked)
}

func joinNotes(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n" + b
}

// Running reports whether this process is running the turn now.
func (s *Runner) Running(turnID string) bool {
	_, ok := s.inflight.Load(turnID)
	return ok
}
