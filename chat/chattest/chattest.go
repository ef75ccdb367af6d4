// Package chattest is what tests of every package share: it builds
// chat's roles (the roles of one process over one store, sharing one
// Catalog, wired as cmd/prchat wires them, from one Config and one Deps),
// and it is the one way a test waits (Eventually, Receive, Context),
// under deadlines that PRCHAT_TEST_TIMEOUT_SCALE lengthens for a slow
// machine.
package chattest

import (
	"log/slog"
	"time"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/mask"
)

// Store is every store interface of chat's roles but the optional ones.
// *store.Store implements it.
type Store interface {
	chat.CatalogStore
	chat.AdminStore
	chat.TurnStore
	chat.RunStore
	chat.EventStore
	chat.Pinger
}

// Queue is a chat.Queue whose broker can be pinged.
type Queue interface {
	chat.Queue
	chat.Pinger
}

// Config holds the settings of the roles (see each role's config).
type Config struct {
	WorkerID          string
	Policy            chat.TurnPolicy
	MaxRepairs        int
	MaxSessionBytes   int64
	MaxCalls          int
	MaxTokens         int64
	DefaultBackend    string
	Providers         []chat.ProviderConfig
	DefaultProvider   string
	ReposRoots        []string
	AnyPath           bool
	AllowFileURLs     bool
	CloneAllowPrivate bool
	QuestionsPerRepo  chat.Rate
	QuestionsPerToken chat.Rate
	CommentPoll       time.Duration
	CommentLease      time.Duration
	CommentBackoff    time.Duration
}

// Deps are the parts the roles work with. Store, Queue and Hosts are
// required; the others as each role says.
type Deps struct {
	Store           Store
	Queue           Queue
	Hosts           chat.Hosts
	Workspaces      chat.Workspaces
	Backends        []chat.Backend
	Masker          *mask.Masker
	Settings        chat.SettingsStore
	Sealer          *chat.Sealer
	Histories       chat.HistoryStore
	SessionFiles    chat.SessionFileStore
	SessionCheckers map[string]chat.SessionChecker
	Reports         chat.ReportStore
	Files           chat.FileReader
	Observer        chat.Observer
	Clones          chat.Clones
	Limiter         chat.RateLimiter
	Comments        chat.CommentStore
	Forges          []chat.Forge
	CommentObserver chat.CommentObserver
	Publisher       chat.Publisher
	Follower        chat.Follower
	Logger          *slog.Logger
	Now             chat.Clock
}

// Domain is the roles of one process.
type Domain struct {
	Catalog       *chat.Catalog
	Masker        *chat.Masker
	Admin         *chat.Admin
	Providers     *chat.Providers
	Turns         *chat.Turns
	Runner        *chat.Runner
	Subscriptions *chat.Subscriptions
	Reports       *chat.Reports
	// Webhooks is nil without Deps.Comments.
	Webhooks  *chat.Webhooks
	Readiness *chat.Readiness
}

// New returns the roles of cfg and d.
func New(cfg Config, d Deps) (*Domain, error) {
	names := chat.BackendNames(d.Backends)
	m := chat.NewMasker(d.Masker, d.Settings, d.Sealer, d.Logger, d.Now)
	dom := &Domain{Catalog: chat.NewCatalog(d.Store, d.Now), Masker: m}
	dom.Providers = chat.NewProviders(chat.ProvidersConfig{Providers: cfg.Providers, Default: cfg.DefaultProvider, Backends: names}, d.Settings, d.Sealer, m)
	var err error
	if dom.Admin, err = chat.NewAdmin(chat.AdminConfig{ReposRoots: cfg.ReposRoots, AnyPath: cfg.AnyPath, AllowFileURLs: cfg.AllowFileURLs, CloneAllowPrivate: cfg.CloneAllowPrivate, Backends: names, MaxSessionBytes: cfg.MaxSessionBytes},
		chat.AdminDeps{Store: d.Store, Catalog: dom.Catalog, Clones: d.Clones, Histories: d.Histories, SessionFiles: d.SessionFiles, SessionCheckers: d.SessionCheckers, Sealer: d.Sealer, Masker: m, Logger: d.Logger}); err != nil {
		return nil, err
	}
	if dom.Turns, err = chat.NewTurns(chat.TurnsConfig{WorkerID: cfg.WorkerID, Policy: cfg.Policy, DefaultBackend: cfg.DefaultBackend,
		QuestionsPerRepo: cfg.QuestionsPerRepo, QuestionsPerToken: cfg.QuestionsPerToken},
		chat.TurnsDeps{Store: d.Store, Queue: d.Queue, Hosts: d.Hosts, Catalog: dom.Catalog, Providers: dom.Providers, Workspaces: d.Workspaces,
			Limiter: d.Limiter, Publisher: d.Publisher, Observer: d.Observer, Masker: m, Logger: d.Logger, Now: d.Now}); err != nil {
		return nil, err
	}
	if dom.Runner, err = chat.NewRunner(chat.RunnerConfig{WorkerID: cfg.WorkerID, Policy: cfg.Policy, MaxRepairs: cfg.MaxRepairs, MaxCalls: cfg.MaxCalls,
		MaxTokens: cfg.MaxTokens, DefaultBackend: cfg.DefaultBackend, MaxSessionBytes: cfg.MaxSessionBytes, ReposRoots: cfg.ReposRoots, AnyPath: cfg.AnyPath},
		chat.RunnerDeps{Store: d.Store, Hosts: d.Hosts, Catalog: dom.Catalog, Providers: dom.Providers, Workspaces: d.Workspaces, Backends: d.Backends,
			SessionFiles: d.SessionFiles, Sealer: d.Sealer, Masker: m, Publisher: d.Publisher, Observer: d.Observer, Logger: d.Logger, Now: d.Now}); err != nil {
		return nil, err
	}
	if dom.Subscriptions, err = chat.NewSubscriptions(chat.SubscriptionsDeps{Store: d.Store, Catalog: dom.Catalog, Follower: d.Follower, Logger: d.Logger}); err != nil {
		return nil, err
	}
	if dom.Reports, err = chat.NewReports(chat.ReportsDeps{Store: d.Reports, Files: d.Files, Catalog: dom.Catalog, Masker: m, Now: d.Now}); err != nil {
		return nil, err
	}
	if d.Comments != nil {
		if dom.Webhooks, err = chat.NewWebhooks(chat.WebhooksConfig{Poll: cfg.CommentPoll, Lease: cfg.CommentLease, Backoff: cfg.CommentBackoff, QuestionsPerRepo: cfg.QuestionsPerRepo},
			chat.WebhooksDeps{Comments: d.Comments, Store: d.Store, Turns: dom.Turns, Admin: dom.Admin, Catalog: dom.Catalog, Forges: d.Forges,
				Limiter: d.Limiter, Observer: d.CommentObserver, Masker: m, Logger: d.Logger, Now: d.Now}); err != nil {
			return nil, err
		}
	}
	dom.Readiness = chat.NewReadiness(d.Store, d.Queue)
	return dom, nil
}
