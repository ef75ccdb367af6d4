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
)

// AdminStore keeps the repositories and their reviews. Implemented by
// package store.
type AdminStore interface {
	// UpsertRepository registers r by name, or updates the clone path and URL
	// and the forge project of the repository with that name. It fills r's
	// ID and CreatedAt and reports whether the repository is new; a forge
	// project another repository names is CodeConflict.
	UpsertRepository(ctx context.Context, r *Repository) (created bool, err error)
	Repositories(ctx context.Context) ([]Repository, error)
	// CreateReview stores r as the next version (1, 2, ...) of its PR and fills
	// r's ID, Version and CreatedAt.
	CreateReview(ctx context.Context, r *Review) error
	// CreateFirstReview stores r as version 1 of its PR if the PR has no
	// review and reports true; else it fills r with the PR's latest review
	// and reports false. Of racing calls (from any processes) exactly one
	// creates the review.
	CreateFirstReview(ctx context.Context, r *Review) (bool, error)
	// Reviews lists a PR's review versions, oldest first.
	Reviews(ctx context.Context, repo string, pr int) ([]Review, error)
}

// HistoryStore keeps the message histories of sessions that live in the
// database (the openai backend's). Implemented by package store.
type HistoryStore interface {
	SaveHistory(ctx context.Context, backend, sessionID string, history json.RawMessage) error
}

// AdminConfig holds the settings of Admin.
type AdminConfig struct {
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
	// Backends are the names of backends a review may name besides the
	// contract's (BackendNames of the deployment's backends).
	Backends []string
	// MaxSessionBytes is the largest agent session file a review may
	// upload. Default DefaultMaxSessionBytes (64 MiB).
	MaxSessionBytes int64
}

// AdminDeps are the parts Admin works with. Store and Catalog are
// required.
type AdminDeps struct {
	Store   AdminStore
	Catalog *Catalog
	// Clones checks clone paths and review commits when they are
	// registered and recorded (required to register a clone path or to
	// record a review of a repository with a clone).
	Clones Clones
	// Histories stores the histories of recorded reviews' sessions
	// (optional: without it a review records no history).
	Histories HistoryStore
	// SessionFiles keeps the agent CLIs' session files of reviews, sealed
	// with Sealer; SessionCheckers check an uploaded one, by backend name
	// (without them, no review session file is taken).
	SessionFiles    SessionFileStore
	SessionCheckers map[string]SessionChecker
	Sealer          *Sealer
	// Masker hides secrets in recorded histories; default the built-in
	// rules only.
	Masker *Masker
	Logger *slog.Logger
}

// Admin registers repositories and records their reviews, and looks them
// up for the request's token.
type Admin struct {
	cfg             AdminConfig
	roots           repoRoots
	store           AdminStore
	catalog         *Catalog
	clones          Clones
	histories       HistoryStore
	sessionFiles    SessionFileStore
	sessionCheckers map[string]SessionChecker
	sealer          *Sealer
	masker          *Masker
	log             *slog.Logger
}

// NewAdmin returns an Admin.
func NewAdmin(cfg AdminConfig, d AdminDeps) (*Admin, error) {
	if d.Store == nil || d.Catalog == nil {
		return nil, errors.New("chat admin: Store and Catalog are required")
	}
	cfg.MaxSessionBytes = cmp.Or(cfg.MaxSessionBytes, DefaultMaxSessionBytes)
	return &Admin{cfg: cfg, roots: repoRoots{roots: cfg.ReposRoots, any: cfg.AnyPath}, store: d.Store, catalog: d.Catalog,
		clones: d.Clones, histories: d.Histories, sessionFiles: d.SessionFiles, sessionCheckers: d.SessionCheckers, sealer: d.Sealer,
		masker: orMasker(d.Masker), log: cmp.Or(d.Logger, slog.New(slog.DiscardHandler))}, nil
}

// BackendNames returns the names of backends.
func BackendNames(backends []Backend) []string {
	names := make([]string, 0, len(backends))
	for _, b := range backends {
		names = append(names, b.Name())
	}
	return names
}

// allBackends lists the backend names questions and reviews may name: the
// contract's and extra.
func allBackends(extra []string) []string {
	names := KnownBackends()
	for _, n := range extra {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// RegisterRepository registers a repository, or updates the clone path and
// URL and the forge project of one with the same name. It reports whether
// it was new.
func (a *Admin) RegisterRepository(ctx context.Context, r Repository) (Repository, bool, error) {
	if err := CheckRepoName(r.Name); err != nil {
		return Repository{}, false, err
	}
	if len(r.ClonePath) > maxPathBytes || len(r.CloneURL) > maxPathBytes {
		return Repository{}, false, Errorf(CodeInvalid, "clone_path and clone_url are at most %d bytes", maxPathBytes)
	}
	if r.ForgeProject == r.Name {
		r.ForgeProject = ""
	}
	if r.ForgeProject != "" {
		if err := CheckForgeProject(r.ForgeProject); err != nil {
			return Repository{}, false, err
		}
	}
	if _, ok := limitedToken(ctx); ok {
		// Registering says where a repository is cloned from: pointing a
		// repository of the token's at another's clone would read that one.
		return Repository{}, false, Errorf(CodeForbidden, "only a token for every repository registers repositories or changes where one is cloned from")
	}
	if err := a.checkRegistration(ctx, &r); err != nil {
		return Repository{}, false, err
	}
	if err := a.checkForgeProject(ctx, r); err != nil {
		return Repository{}, false, err
	}
	created, err := a.store.UpsertRepository(ctx, &r)
	if err == nil {
		a.catalog.remember(r)
	}
	return r, created, err
}

// Repository returns a registered repository.
func (a *Admin) Repository(ctx context.Context, name string) (Repository, error) {
	return a.catalog.repository(ctx, name)
}

// Repositories lists the registered repositories (those the request's
// token may see).
func (a *Admin) Repositories(ctx context.Context) ([]Repository, error) {
	rs, err := a.store.Repositories(ctx)
	if t, ok := limitedToken(ctx); ok && err == nil {
		rs = slices.DeleteFunc(rs, func(r Repository) bool { return !t.Sees(r.Name) })
	}
	return rs, err
}

// RecordReview saves r as the next version of the PR's review.
func (a *Admin) RecordReview(ctx context.Context, repo string, r Review) (Review, error) {
	rp, err := a.checkedReview(ctx, repo, &r)
	if err != nil {
		return Review{}, err
	}
	return a.storeReview(ctx, rp, r)
}

// recordFirstReview saves r, checked as RecordReview checks it, as
// version 1 of a PR that has no review, and reports true; when the PR has
// one by then (another process made it meanwhile) it saves nothing and
// returns the latest.
func (a *Admin) recordFirstReview(ctx context.Context, repo string, r Review) (Review, bool, error) {
	rp, err := a.checkedReview(ctx, repo, &r)
	if err != nil {
		return Review{}, false, err
	}
	r.RepositoryID, r.Repository = rp.ID, rp.Name
	if r.Sections == nil {
		r.Sections = []Section{}
	}
	created, err := a.store.CreateFirstReview(ctx, &r)
	if err != nil {
		return Review{}, false, err
	}
	return r, created, nil
}

// checkedReview checks a review to record in repo and returns the
// repository.
func (a *Admin) checkedReview(ctx context.Context, repo string, r *Review) (Repository, error) {
	if err := r.Validate(allBackends(a.cfg.Backends)); err != nil {
		return Repository{}, err
	}
	rp, err := a.catalog.repository(ctx, repo)
	if err != nil {
		return Repository{}, err
	}
	return rp, a.checkReview(ctx, rp, r)
}

func (a *Admin) storeReview(ctx context.Context, rp Repository, r Review) (Review, error) {
	r.RepositoryID, r.Repository = rp.ID, rp.Name
	if r.Sections == nil {
		r.Sections = []Section{}
	}
	if len(r.History) > 0 && string(r.History) != "null" {
		if r.Backend != BackendOpenAI || a.histories == nil {
			return Review{}, Errorf(CodeInvalid, "a session history can be recorded only for the openai backend, whose sessions live in the database")
		}
		var msgs []json.RawMessage
		if err := json.Unmarshal(r.History, &msgs); err != nil {
			return Review{}, Errorf(CodeInvalid, "session_history must be a JSON array of messages")
		}
		r.SessionID = cmp.Or(r.SessionID, newSessionID())
		masked := json.RawMessage(a.masker.String(string(r.History)))
		if !json.Valid(masked) {
			masked = r.History
		}
		if err := a.histories.SaveHistory(ctx, r.Backend, r.SessionID, masked); err != nil {
			return Review{}, err
		}
		r.SessionHost = "" // the database holds it: any worker can fork it
	}
	if err := a.store.CreateReview(ctx, &r); err != nil {
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
func (a *Admin) Review(ctx context.Context, repo string, pr, version int) (Review, error) {
	if _, err := a.catalog.repository(ctx, repo); err != nil {
		return Review{}, err
	}
	return a.catalog.review(ctx, repo, pr, version)
}

// Reviews lists a PR's review versions.
func (a *Admin) Reviews(ctx context.Context, repo string, pr int) ([]Review, error) {
	if _, err := a.catalog.repository(ctx, repo); err != nil {
		return nil, err
	}
	return a.store.Reviews(ctx, repo, pr)
}
