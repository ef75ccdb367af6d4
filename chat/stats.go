package chat

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"time"
)

// ReportStore answers the questions of the dashboard and the team figures:
// which pull requests a repository has, and the facts of recent turns.
// Implemented by package store.
type ReportStore interface {
	// PullRequests lists the pull requests of a repository that have a
	// recorded review, newest review first. An unknown repository is
	// CodeRepositoryNotFound.
	PullRequests(ctx context.Context, repo string) ([]PullRequest, error)
	// TurnFacts returns the facts of the turns created at or after since,
	// and of every turn still queued or running, of repo ("" = every
	// repository).
	TurnFacts(ctx context.Context, since time.Time, repo string) ([]TurnFact, error)
}

// PullRequest is a pull request with recorded reviews.
type PullRequest struct {
	Repository string `json:"repository"`
	PR         int    `json:"pr"`
	// LatestVersion is the newest review version, HeadSHA its head.
	LatestVersion int    `json:"latest_version"`
	HeadSHA       string `json:"head_sha"`
	Conversations int    `json:"conversations"`
	// UpdatedAt is when the newest review was recorded or the newest
	// conversation changed.
	UpdatedAt time.Time `json:"updated_at"`
}

// TurnFact is what the team figures need to know of one turn.
type TurnFact struct {
	Repository string
	Backend    string
	State      State
	Reason     Reason
	Session    SessionMode
	Repairs    int
	CostUSD    *float64
	CreatedAt  time.Time
	FinishedAt *time.Time
}

// Stats are a team's figures over a window (GET /api/v1/stats).
type Stats struct {
	Since      time.Time `json:"since"`
	Until      time.Time `json:"until"`
	Repository string    `json:"repository"`
	// Turns is the number of turns asked in the window.
	Turns int `json:"turns"`
	// Days counts turns per UTC day of their question, state and backend.
	Days []DayCount `json:"days"`
	// TimeToAnswer is from the question to the answer, over the window's
	// succeeded turns.
	TimeToAnswer Durations `json:"time_to_answer"`
	// Cost is what the window's turns cost, per repository and backend.
	Cost []CostLine `json:"cost"`
	// Repairs is the number of invalid answers sent back to the agent;
	// Seeded the number of turns that started without the review's own
	// session.
	Repairs int `json:"repairs"`
	Seeded  int `json:"seeded"`
	// Failures counts the window's turns that did not succeed, by reason.
	Failures []ReasonCount `json:"failures"`
	Queue    QueueFigures  `json:"queue"`
}

// DayCount is the number of turns of one day, state and backend.
type DayCount struct {
	Day     string `json:"day"` // YYYY-MM-DD, UTC
	State   State  `json:"state"`
	Backend string `json:"backend"`
	Turns   int    `json:"turns"`
}

// Durations summarise a set of durations, in seconds.
type Durations struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_seconds"`
	P95   float64 `json:"p95_seconds"`
}

// CostLine is the cost of one repository's turns on one backend.
type CostLine struct {
	Repository string  `json:"repository"`
	Backend    string  `json:"backend"`
	Turns      int     `json:"turns"`
	CostUSD    float64 `json:"cost_usd"`
	// UnknownCost counts turns whose cost is not known (not in CostUSD).
	UnknownCost int `json:"unknown_cost_turns"`
}

// ReasonCount is the number of turns that ended for one reason.
type ReasonCount struct {
	State  State  `json:"state"`
	Reason Reason `json:"reason"`
	Turns  int    `json:"turns"`
}

// QueueFigures describe the turns waiting now.
type QueueFigures struct {
	Queued  int `json:"queued"`
	Running int `json:"running"`
	// OldestQueuedAt is when the longest-waiting queued turn was asked
	// (null when none waits), OldestQueuedSeconds how long ago.
	OldestQueuedAt      *time.Time `json:"oldest_queued_at"`
	OldestQueuedSeconds float64    `json:"oldest_queued_seconds"`
}

// ReportsDeps are the parts Reports works with. Catalog is required;
// without Store the figures and lists, without Files the file views,
// answer unavailable.
type ReportsDeps struct {
	Store   ReportStore
	Files   FileReader
	Catalog *Catalog
	// Masker hides secrets in the lines of files; default the built-in
	// rules only.
	Masker *Masker
	// Now tells the time (time.Now by default).
	Now Clock
}

// Reports answers what the dashboard shows beside conversations: the team
// figures, the reviewed pull requests of a repository, and lines of the
// files that citations point at.
type Reports struct {
	reports ReportStore
	files   FileReader
	catalog *Catalog
	masker  *Masker
	now     Clock
}

// NewReports returns Reports.
func NewReports(d ReportsDeps) (*Reports, error) {
	if d.Catalog == nil {
		return nil, errors.New("chat reports: a Catalog is required")
	}
	r := &Reports{reports: d.Store, files: d.Files, catalog: d.Catalog, masker: orMasker(d.Masker), now: d.Now}
	if r.now == nil {
		r.now = time.Now
	}
	return r, nil
}

// MaxStatsWindow bounds how far back the team figures look.
const MaxStatsWindow = 366 * 24 * time.Hour

// Stats returns the team's figures for the turns asked in the last window
// (at most MaxStatsWindow) in repo ("" = every repository the request's
// token may see).
func (s *Reports) Stats(ctx context.Context, window time.Duration, repo string) (Stats, error) {
	if s.reports == nil {
		return Stats{}, Errorf(CodeUnavailable, "team figures are not available on this server")
	}
	if window <= 0 || window > MaxStatsWindow {
		return Stats{}, Errorf(CodeInvalid, "since must be between 1s and %d days", int(MaxStatsWindow/(24*time.Hour)))
	}
	if repo != "" {
		if _, err := s.catalog.repository(ctx, repo); err != nil {
			return Stats{}, err
		}
	}
	until := s.now().UTC()
	since := until.Add(-window)
	facts, err := s.reports.TurnFacts(ctx, since, repo)
	if err != nil {
		return Stats{}, err
	}
	if t, ok := limitedToken(ctx); ok {
		facts = slices.DeleteFunc(facts, func(f TurnFact) bool { return !t.Sees(f.Repository) })
	}
	return summarise(facts, since, until, repo), nil
}

// summarise computes the figures of facts for the window since..until.
func summarise(facts []TurnFact, since, until time.Time, repo string) Stats {
	st := Stats{Since: since, Until: until, Repository: repo}
	days := map[DayCount]int{}
	costs := map[[2]string]*CostLine{}
	reasons := map[ReasonCount]int{}
	var answers []float64
	for _, f := range facts {
		switch f.State {
		case StateQueued:
			st.Queue.Queued++
			if st.Queue.OldestQueuedAt == nil || f.CreatedAt.Before(*st.Queue.OldestQueuedAt) {
				at := f.CreatedAt
				st.Queue.OldestQueuedAt = &at
			}
		case StateRunning:
			st.Queue.Running++
		}
		if f.CreatedAt.Before(since) {
			continue // pending for longer than the window: the queue only
		}
		st.Turns++
		days[DayCount{Day: f.CreatedAt.UTC().Format(time.DateOnly), State: f.State, Backend: f.Backend}]++
		key := [2]string{f.Repository, f.Backend}
		c := costs[key]
		if c == nil {
			c = &CostLine{Repository: f.Repository, Backend: f.Backend}
			costs[key] = c
		}
		c.Turns++
		if f.CostUSD != nil {
			c.CostUSD += *f.CostUSD
		} else if f.State.Final() {
			c.UnknownCost++
		}
		st.Repairs += f.Repairs
		if f.Session == SessionSeeded {
			st.Seeded++
		}
		if f.State.Final() && f.State != StateSucceeded {
			reasons[ReasonCount{State: f.State, Reason: f.Reason}]++
		}
		if f.State == StateSucceeded && f.FinishedAt != nil {
			answers = append(answers, f.FinishedAt.Sub(f.CreatedAt).Seconds())
		}
	}
	if st.Queue.OldestQueuedAt != nil {
		st.Queue.OldestQueuedSeconds = math.Max(0, until.Sub(*st.Queue.OldestQueuedAt).Seconds())
	}
	st.Days = make([]DayCount, 0, len(days))
	for d, n := range days {
		d.Turns = n
		st.Days = append(st.Days, d)
	}
	slices.SortFunc(st.Days, func(a, b DayCount) int {
		return cmp.Or(cmp.Compare(a.Day, b.Day), cmp.Compare(a.Backend, b.Backend), cmp.Compare(a.State, b.State))
	})
	st.Cost = make([]CostLine, 0, len(costs))
	for _, c := range costs {
		st.Cost = append(st.Cost, *c)
	}
	slices.SortFunc(st.Cost, func(a, b CostLine) int {
		return cmp.Or(cmp.Compare(a.Repository, b.Repository), cmp.Compare(a.Backend, b.Backend))
	})
	st.Failures = make([]ReasonCount, 0, len(reasons))
	for r, n := range reasons {
		r.Turns = n
		st.Failures = append(st.Failures, r)
	}
	slices.SortFunc(st.Failures, func(a, b ReasonCount) int {
		return cmp.Or(cmp.Compare(b.Turns, a.Turns), cmp.Compare(a.State, b.State), cmp.Compare(a.Reason, b.Reason))
	})
	st.TimeToAnswer = durations(answers)
	return st
}

// durations returns the count and the nearest-rank p50 and p95 of secs.
func durations(secs []float64) Durations {
	d := Durations{Count: len(secs)}
	if len(secs) == 0 {
		return d
	}
	slices.Sort(secs)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(secs)))) - 1
		return secs[max(0, min(i, len(secs)-1))]
	}
	d.P50, d.P95 = rank(0.50), rank(0.95)
	return d
}

// PullRequests lists a repository's reviewed pull requests, newest first.
func (s *Reports) PullRequests(ctx context.Context, repo string) ([]PullRequest, error) {
	if s.reports == nil {
		return nil, Errorf(CodeUnavailable, "pull request lists are not available on this server")
	}
	if err := CheckRepoName(repo); err != nil || !sees(ctx, repo) {
		return nil, repositoryNotFound(repo)
	}
	return s.reports.PullRequests(ctx, repo)
}

// FileReader reads lines of a repository's files at a commit, for the
// dashboard's citation view. Implemented by package agentsession.
type FileReader interface {
	// FileLines returns lines start..end of path at commit sha of repo's
	// clone (clipped to the file and to MaxFileLines), with the same path
	// rules as the agents' tools. A bad path is CodeInvalid, a missing file
	// CodeNotFound, a repository without a clone here CodeNeedsClone.
	FileLines(ctx context.Context, repo Repository, sha, path string, start, end int) (FileLines, error)
}

// Bounds of what a file view shows.
const (
	MaxFileLines = 2000
	MaxFileBytes = 4 << 20
)

// FileLines are lines of a file at a commit.
type FileLines struct {
	Path       string   `json:"path"`
	Commit     string   `json:"commit"`
	StartLine  int      `json:"start_line"`
	EndLine    int      `json:"end_line"`
	TotalLines int      `json:"total_lines"`
	Lines      []string `json:"lines"`
}

// FileLines returns lines start..end of a file at the head commit of a
// review version (0 = the latest), masked like every text prchat shows: a
// client reads only the commits that reviews are about.
func (s *Reports) FileLines(ctx context.Context, repo string, pr, version int, path string, start, end int) (FileLines, error) {
	if s.files == nil {
		return FileLines{}, Errorf(CodeUnavailable, "file views are not available on this server")
	}
	s.masker.refresh(ctx, false)
	r, err := s.catalog.repository(ctx, repo)
	if err != nil {
		return FileLines{}, err
	}
	if path == "" {
		return FileLines{}, Errorf(CodeInvalid, "path is required")
	}
	rv, err := s.catalog.review(ctx, repo, pr, version)
	if err != nil {
		return FileLines{}, err
	}
	if rv.HeadSHA == "" {
		return FileLines{}, Errorf(CodeNotFound, "review %d of %s#%d has no head commit", rv.Version, repo, pr)
	}
	fl, err := s.files.FileLines(ctx, r, rv.HeadSHA, path, start, end)
	if err != nil {
		return FileLines{}, err
	}
	for i, l := range fl.Lines {
		fl.Lines[i] = s.masker.String(l)
	}
	return fl, nil
}
