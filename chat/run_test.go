package chat_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/chat/mask"
	"github.com/prchat/prchat/store/storetest"
)

// fakeQueue records enqueued turns and runs nothing: tests call Run.
type fakeQueue struct {
	mu       sync.Mutex
	enqueued []string
	hosts    []string // the host queue of each enqueued turn ("" = shared)
	feed     []chat.FeedEvent
}

func (q *fakeQueue) Enqueue(_ context.Context, turnID, host string, feed ...chat.FeedEvent) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.enqueued = append(q.enqueued, turnID)
	q.hosts = append(q.hosts, host)
	q.feed = append(q.feed, feed...)
	return nil
}
func (q *fakeQueue) Cancel(context.Context, string) error { return nil }
func (q *fakeQueue) RemoveRunDir(context.Context, string, string) error {
	return nil
}
func (q *fakeQueue) Ping(context.Context) error { return nil }

// fakeHosts says which runners are alive.
type fakeHosts struct {
	mu     sync.Mutex
	dead   map[string]bool
	checks int // calls of Alive
}

func (h *fakeHosts) Alive(context.Context, string) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks++
	return true, nil
}
func (h *fakeHosts) RunnerAlive(_ context.Context, r string) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.dead[r], nil
}
func (h *fakeHosts) kill(r string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dead[r] = true
}

type fixture struct {
	store    chattest.Store
	hosts    *fakeHosts
	scripted *scripted.Backend
	services []*chattest.Domain
	conv     string
	turn     string
}

// setup makes two Services (two workers) over one store with a scripted
// agent, and asks a question whose turn is queued.
func setup(t *testing.T) *fixture {
	t.Helper()
	return setupStore(t, storetest.New(t))
}

// setupStore is setup on the store st.
func setupStore(t *testing.T, st chattest.Store) *fixture {
	t.Helper()
	return setupPublishing(t, st, nil)
}

// setupPublishing is setupStore with the Services publishing to pub.
func setupPublishing(t *testing.T, st chattest.Store, pub chat.Publisher) *fixture {
	t.Helper()
	return setupWith(t, st, fixtureOptions{pub: pub})
}

// fixtureOptions are what setupWith may change of setupStore's fixture.
type fixtureOptions struct {
	pub      chat.Publisher     // the Services publish to it
	backend  string             // the scripted agent's backend name ("": scripted)
	settings chat.SettingsStore // the Services' settings (nil: none)
}

// setupWith is setupStore with o.
func setupWith(t *testing.T, st chattest.Store, o fixtureOptions) *fixture {
	t.Helper()
	pub := o.pub
	f := &fixture{store: st, hosts: &fakeHosts{dead: map[string]bool{}}, scripted: scripted.New(o.backend)}
	repo := agentsessiontest.NewRepo(t, map[string]string{"a.go": "package a\n\nfunc A() {}\n"})
	ws, err := agentsession.NewWorkspaces(agentsession.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"w1", "w2"} {
		svc, err := chattest.New(chattest.Config{WorkerID: id, MaxRepairs: 2, AnyPath: true}, chattest.Deps{
			Store: f.store, Queue: &fakeQueue{}, Hosts: f.hosts, Workspaces: ws, Clones: ws,
			Backends: []chat.Backend{f.scripted}, Masker: mask.New(), Publisher: pub, Settings: o.settings,
		})
		if err != nil {
			t.Fatal(err)
		}
		f.services = append(f.services, svc)
	}
	ctx := context.Background()
	svc := f.services[0]
	r := repo.Repository("acme/a")
	if _, _, err := svc.Admin.RegisterRepository(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Admin.RecordReview(ctx, "acme/a", chat.Review{PR: 1, HeadSHA: repo.Head(), Backend: f.scripted.Name()}); err != nil {
		t.Fatal(err)
	}
	c, _, err := svc.Turns.Ask(ctx, "acme/a", 1, 0, chat.Ask{Question: "What does A do?"})
	if err != nil {
		t.Fatal(err)
	}
	turns, err := f.store.PendingTurns(ctx)
	if err != nil || len(turns) != 1 {
		t.Fatalf("pending turns = %v, %v", turns, err)
	}
	f.conv, f.turn = c.ID, turns[0].ID
	return f
}

func answer(text string) *chat.Answer {
	return &chat.Answer{AnswerMarkdown: text, Citations: []chat.Citation{{Path: "a.go", StartLine: 3, EndLine: 3}}}
}

// TestFencingTwoRunsStoreOneAnswer simulates asynq's duplicate delivery
// after a worker was taken for dead: the second run takes the turn over,
// and the first, when it wakes, stores nothing.
func TestFencingTwoRunsStoreOneAnswer(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	release := make(chan struct{})
	f.scripted.Push(scripted.Step{Wait: release, Answer: answer("from the first run"),
		Events: []chat.Event{{Type: chat.EventTextDelta, Text: "first run thinking"}}})
	f.scripted.Push(scripted.Step{Answer: answer("from the second run")})

	first := make(chan error, 1)
	go func() { first <- f.services[0].Runner.Run(ctx, f.turn, "w1/a") }()
	chattest.Eventually(t, "the first run's agent call", func() bool { return len(f.scripted.Requests()) == 1 })

	// While the first runner is alive, a duplicate delivery does nothing.
	if err := f.services[1].Runner.Run(ctx, f.turn, "w2/b"); err != nil {
		t.Fatalf("duplicate run: %v", err)
	}
	if n := len(f.scripted.Requests()); n != 1 {
		t.Fatalf("a duplicate delivery ran the agent: %d calls", n)
	}

	// The first worker is taken for dead: the next delivery takes over.
	f.hosts.kill("w1/a")
	if err := f.services[1].Runner.Run(ctx, f.turn, "w2/b"); err != nil {
		t.Fatalf("takeover run: %v", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first run: %v", err)
	}

	turn, err := f.store.Turn(ctx, f.conv, 1)
	if err != nil {
		t.Fatal(err)
	}
	if turn.State != chat.StateSucceeded || turn.Answer == nil || turn.Answer.AnswerMarkdown != "from the second run" {
		t.Fatalf("turn = %+v, want the second run's answer", turn)
	}
	if turn.Fence != 2 {
		t.Errorf("fence = %d, want 2 (two claims)", turn.Fence)
	}
	checkOneAnswer(t, f, "from the second run")
}

// checkOneAnswer checks the transcript of f's turn: numbered without a gap
// or a duplicate, with one done event, which carries the answer want.
func checkOneAnswer(t *testing.T, f *fixture, want string) {
	t.Helper()
	events, err := f.store.Events(context.Background(), f.turn, 0)
	if err != nil {
		t.Fatal(err)
	}
	dones := 0
	for i, e := range events {
		if e.Seq != int64(i+1) {
			t.Errorf("event %d has seq %d: the transcript has a gap or a duplicate", i, e.Seq)
		}
		if e.Type == chat.EventDone {
			dones++
			if e.Answer == nil || e.Answer.AnswerMarkdown != want {
				t.Errorf("done event carries %+v, want the answer %q", e.Answer, want)
			}
		}
	}
	if dones != 1 {
		t.Errorf("transcript has %d done events, want 1", dones)
	}
}

// TestALostClaimIsRunAgain: a claim commits without waiting for the disk
// (store.claimUpdateLease), so a Postgres crash right after it may lose it
// and put the turn back to queued at its old fence under a run that goes
// on. That run stores nothing, and the next delivery (the reconciler's
// enqueue of a queued turn without a job) answers the turn once.
func TestALostClaimIsRunAgain(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	f := setupStore(t, st)
	ctx := context.Background()
	release := make(chan struct{})
	f.scripted.Push(scripted.Step{Wait: release, Answer: answer("from the run whose claim was lost")})
	f.scripted.Push(scripted.Step{Answer: answer("from the next run")})

	first := make(chan error, 1)
	go func() { first <- f.services[0].Runner.Run(ctx, f.turn, "w1/a") }()
	chattest.Eventually(t, "the first run's agent call", func() bool { return len(f.scripted.Requests()) == 1 })

	// The crash: the claim never reached the disk, as if it had not been made.
	if err := st.DB().Exec(`UPDATE turns SET state = 'queued', fence = fence - 1, runner = '', started_at = NULL WHERE id = ?`, f.turn).Error; err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the run whose claim was lost: %v", err)
	}
	turn, err := f.store.Turn(ctx, f.conv, 1)
	if err != nil {
		t.Fatal(err)
	}
	if turn.State != chat.StateQueued || turn.Answer != nil {
		t.Fatalf("after the run whose claim was lost, turn = %+v, want it queued with no answer", turn)
	}

	if err := f.services[1].Runner.Run(ctx, f.turn, "w2/b"); err != nil {
		t.Fatalf("next run: %v", err)
	}
	if turn, err = f.store.Turn(ctx, f.conv, 1); err != nil {
		t.Fatal(err)
	}
	if turn.State != chat.StateSucceeded || turn.Answer == nil || turn.Answer.AnswerMarkdown != "from the next run" {
		t.Fatalf("turn = %+v, want the next run's answer", turn)
	}
	checkOneAnswer(t, f, "from the next run")
}

// TestRunOfASettledTurnDoesNothing: a job delivered again after its turn
// was cancelled returns at once without calling the agent.
func TestRunOfASettledTurnDoesNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	if _, err := f.services[0].Turns.Cancel(ctx, f.conv, 1); err != nil {
		t.Fatal(err)
	}
	if err := f.services[1].Runner.Run(ctx, f.turn, "w2/b"); err != nil {
		t.Fatalf("run: %v", err)
	}
	if n := len(f.scripted.Requests()); n != 0 {
		t.Fatalf("agent calls = %d, want 0", n)
	}
	turn, _ := f.store.Turn(ctx, f.conv, 1)
	if turn.State != chat.StateCancelled {
		t.Fatalf("state = %s, want cancelled", turn.State)
	}
}

// TestEnqueueLeavesATurnThatMovedOn: the reconciler's read of a turn may be
// stale by the time it enqueues the turn's job: a run may since have taken
// the turn, finished it and deleted its job, or the turn may be gone.
// Enqueue reads the turn again and leaves it: no second job, no claim that
// loses.
func TestEnqueueLeavesATurnThatMovedOn(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	read, err := f.store.TurnByID(ctx, f.turn)
	if err != nil {
		t.Fatal(err)
	}
	svc := f.services[0]
	q := &fakeQueue{}
	d, err := chattest.New(chattest.Config{WorkerID: "w1", AnyPath: true}, chattest.Deps{
		Store: f.store, Queue: q, Hosts: f.hosts, Backends: []chat.Backend{f.scripted}, Masker: mask.New(),
	})
	if err != nil {
		t.Fatal(err)
	}
	// Still as it was read: enqueued.
	if ok, err := d.Turns.Enqueue(ctx, read); err != nil || !ok {
		t.Fatalf("enqueue of a turn as read: %v, %v; want true", ok, err)
	}
	// Claimed since (the state and fence moved on), then answered.
	if _, _, err := f.store.ClaimTurnWithConversation(ctx, f.turn, "w2/b", nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.Turns.Enqueue(ctx, read); err != nil || ok {
		t.Fatalf("enqueue of a turn claimed since: %v, %v; want false", ok, err)
	}
	f.hosts.kill("w2/b")
	f.scripted.Push(scripted.Step{Answer: answer("A does nothing.")})
	if err := svc.Runner.Run(ctx, f.turn, "w1/a"); err != nil {
		t.Fatal(err)
	}
	if now, _ := f.store.TurnByID(ctx, f.turn); !now.State.Final() {
		t.Fatalf("turn is %s after its run; want it settled", now.State)
	}
	if ok, err := d.Turns.Enqueue(ctx, read); err != nil || ok {
		t.Fatalf("enqueue of a turn settled since: %v, %v; want false", ok, err)
	}
	// Deleted since.
	if err := f.store.DeleteConversation(ctx, f.conv); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.Turns.Enqueue(ctx, read); err != nil || ok {
		t.Fatalf("enqueue of a deleted turn: %v, %v; want false", ok, err)
	}
	if len(q.enqueued) != 1 {
		t.Errorf("jobs enqueued: %v; want the one of the turn as read", q.enqueued)
	}
}

// TestTooManyAttemptsIsInterrupted: a turn whose runs keep dying under it is
// settled as interrupted instead of being tried forever.
func TestTooManyAttemptsIsInterrupted(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	for i, runner := range []string{"x/1", "x/2", "x/3"} {
		if _, _, err := f.store.ClaimTurnWithConversation(ctx, f.turn, runner, nil); err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		f.hosts.kill(runner)
	}
	if err := f.services[0].Runner.Run(ctx, f.turn, "w1/a"); err != nil {
		t.Fatal(err)
	}
	turn, _ := f.store.Turn(ctx, f.conv, 1)
	if turn.State != chat.StateInterrupted || turn.Reason != chat.ReasonInterrupted {
		t.Fatalf("turn = %s/%s, want interrupted/interrupted", turn.State, turn.Reason)
	}
	// The same note the reconciler gives a turn it settles so.
	if want := chat.InterruptedNote(3); turn.Note != want {
		t.Errorf("note %q, want %q", turn.Note, want)
	}
	if n := len(f.scripted.Requests()); n != 0 {
		t.Fatalf("agent calls = %d, want 0", n)
	}
}

// TestSoleWorkerRoutesEveryTurnToTheSharedQueue: a turn about a session
// whose host is alive goes on that host's queue, unless the worker is the
// only one there can be; then it goes on the shared queue without asking
// whether the host is alive.
func TestSoleWorkerRoutesEveryTurnToTheSharedQueue(t *testing.T) {
	repo := agentsessiontest.NewRepo(t, map[string]string{"a.go": "package a\n"})
	for _, sole := range []bool{false, true} {
		st, q, hosts := storetest.New(t), &fakeQueue{}, &fakeHosts{dead: map[string]bool{}}
		ws, err := agentsession.NewWorkspaces(agentsession.Config{DataDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		svc, err := chattest.New(chattest.Config{WorkerID: "w1", Policy: chat.TurnPolicy{SoleWorker: sole}, AnyPath: true}, chattest.Deps{
			Store: st, Queue: q, Hosts: hosts, Backends: []chat.Backend{scripted.New("")}, Masker: mask.New(), Clones: ws,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, _, err := svc.Admin.RegisterRepository(ctx, repo.Repository("acme/a")); err != nil {
			t.Fatal(err)
		}
		rev := chat.Review{PR: 1, HeadSHA: repo.Head(), Backend: "scripted", SessionID: "s1", SessionHost: "w1"}
		if _, err := svc.Admin.RecordReview(ctx, "acme/a", rev); err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.Turns.Ask(ctx, "acme/a", 1, 0, chat.Ask{Question: "Why?"}); err != nil {
			t.Fatal(err)
		}
		turns, err := st.PendingTurns(ctx)
		if err != nil || len(turns) != 1 {
			t.Fatalf("pending turns = %v, %v", turns, err)
		}
		want, wantChecks := "w1", 1
		if sole {
			want, wantChecks = "", 0
		}
		if len(q.hosts) != 1 || q.hosts[0] != want || turns[0].Queue != want {
			t.Errorf("sole=%v: enqueued on %q, turn's queue %q; want %q", sole, q.hosts, turns[0].Queue, want)
		}
		if hosts.checks != wantChecks {
			t.Errorf("sole=%v: %d liveness checks, want %d", sole, hosts.checks, wantChecks)
		}
	}
}

// TestUsageAndNotesOnce: a turn's transcript reports its usage once, the
// total, however many usage events the agent reports, and each note line
// once, though the final note repeats the seeded session's reason.
func TestUsageAndNotesOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	in1, in2, out := int64(100), int64(50), int64(7)
	f.scripted.Push(scripted.Step{
		Events: []chat.Event{
			{Type: chat.EventUsage, InputTokens: &in1, OutputTokens: &out},
			{Type: chat.EventUsage, InputTokens: &in2, OutputTokens: &out},
		},
		Answer: answer("A does nothing."),
		Usage:  chat.Usage{InputTokens: 150, OutputTokens: 14, Calls: 2},
	})
	if err := f.services[0].Runner.Run(ctx, f.turn, "w1/a"); err != nil {
		t.Fatal(err)
	}
	evs, err := f.services[0].Subscriptions.Transcript(ctx, f.conv, 1)
	if err != nil {
		t.Fatal(err)
	}
	var usages []chat.Event
	notes := map[string]int{}
	for _, e := range evs {
		switch e.Type {
		case chat.EventUsage:
			usages = append(usages, e)
		case chat.EventNote:
			for _, line := range strings.Split(e.Text, "\n") {
				notes[line]++
			}
		}
	}
	if len(usages) != 1 || *usages[0].InputTokens != 150 || *usages[0].OutputTokens != 14 {
		t.Errorf("usage events = %+v, want one with the total 150/14", usages)
	}
	if len(notes) == 0 {
		t.Fatal("a seeded turn has no note")
	}
	for line, n := range notes {
		if n != 1 {
			t.Errorf("note line %q appears %d times", line, n)
		}
	}
	turn, _ := f.store.Turn(ctx, f.conv, 1)
	if turn.Note == "" {
		t.Error("the turn's stored note is empty: only the events drop repeats")
	}
}
