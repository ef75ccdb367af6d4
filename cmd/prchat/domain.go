package main

import (
	"log/slog"
	"time"

	"github.com/prchat/prchat/api"
	"github.com/prchat/prchat/api/dashboard"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/store"
)

// domainParts are the parts chat's roles work with in one process.
type domainParts struct {
	store      *store.Store
	queue      chat.Queue
	pinger     chat.Pinger // the queue's broker
	hosts      chat.Hosts
	workspaces chat.Workspaces // nil unless the process runs turns
	clones     chat.Clones
	files      chat.FileReader
	backends   []chat.Backend
	// masker masks with the configured secrets and the stored keys
	// (chat.NewMasker), for every role and the openai backend.
	masker *chat.Masker
	sealer *chat.Sealer
	// sessionFiles keeps the agent CLIs' sessions, sealed; checkers check
	// an uploaded one, by backend.
	sessionFiles chat.SessionFileStore
	checkers     map[string]chat.SessionChecker
	limiter      chat.RateLimiter
	publisher    chat.Publisher
	follower     chat.Follower
	observer     chat.Observer
	forges       []chat.Forge
	replies      chat.CommentObserver
	log          *slog.Logger
}

// domainSettings are the settings of chat's roles.
type domainSettings struct {
	workerID          string
	policy            chat.TurnPolicy
	maxRepairs        int
	maxSessionBytes   int64
	maxCalls          int
	maxTokens         int64
	defaultBackend    string
	providers         []chat.ProviderConfig
	reposRoots        []string
	anyPath           bool
	allowFileURLs     bool
	cloneAllowPrivate bool
	questionsPerRepo  chat.Rate
	questionsPerToken chat.Rate
	commentPoll       time.Duration
	commentLease      time.Duration
	webhookAskers     string
	commentBackoff    time.Duration
}

// domain is chat's roles in one process, sharing one catalog of
// repositories and reviews.
type domain struct {
	masker        *chat.Masker
	admin         *chat.Admin
	providers     *chat.Providers
	turns         *chat.Turns
	runner        *chat.Runner
	subscriptions *chat.Subscriptions
	reports       *chat.Reports
	webhooks      *chat.Webhooks
	readiness     *chat.Readiness
}

// newDomain makes chat's roles of s over p.
func newDomain(s domainSettings, p domainParts) (*domain, error) {
	names := chat.BackendNames(p.backends)
	catalog := chat.NewCatalog(p.store, nil)
	m := p.masker
	d := &domain{
		masker:    m,
		providers: chat.NewProviders(chat.ProvidersConfig{Providers: s.providers, Default: "openai", Backends: names}, p.store, p.sealer, m),
		readiness: chat.NewReadiness(p.store, p.pinger),
	}
	var err error
	if d.admin, err = chat.NewAdmin(chat.AdminConfig{ReposRoots: s.reposRoots, AnyPath: s.anyPath, AllowFileURLs: s.allowFileURLs, CloneAllowPrivate: s.cloneAllowPrivate, Backends: names, MaxSessionBytes: s.maxSessionBytes},
		chat.AdminDeps{Store: p.store, Catalog: catalog, Clones: p.clones, Histories: p.store, SessionFiles: p.sessionFiles, SessionCheckers: p.checkers, Sealer: p.sealer, Masker: m, Logger: p.log}); err != nil {
		return nil, err
	}
	if d.turns, err = chat.NewTurns(chat.TurnsConfig{WorkerID: s.workerID, Policy: s.policy, DefaultBackend: s.defaultBackend,
		QuestionsPerRepo: s.questionsPerRepo, QuestionsPerToken: s.questionsPerToken},
		chat.TurnsDeps{Store: p.store, Queue: p.queue, Hosts: p.hosts, Catalog: catalog, Providers: d.providers, Workspaces: p.workspaces,
			Limiter: p.limiter, Publisher: p.publisher, Observer: p.observer, Masker: m, Logger: p.log}); err != nil {
		return nil, err
	}
	if d.runner, err = chat.NewRunner(chat.RunnerConfig{WorkerID: s.workerID, Policy: s.policy, MaxRepairs: s.maxRepairs, MaxCalls: s.maxCalls,
		MaxTokens: s.maxTokens, DefaultBackend: s.defaultBackend, MaxSessionBytes: s.maxSessionBytes, ReposRoots: s.reposRoots, AnyPath: s.anyPath},
		chat.RunnerDeps{Store: p.store, Hosts: p.hosts, Catalog: catalog, Providers: d.providers, Workspaces: p.workspaces, Backends: p.backends,
			SessionFiles: p.sessionFiles, Sealer: p.sealer, Masker: m, Publisher: p.publisher, Observer: p.observer, Logger: p.log}); err != nil {
		return nil, err
	}
	if d.subscriptions, err = chat.NewSubscriptions(chat.SubscriptionsDeps{Store: p.store, Catalog: catalog, Follower: p.follower, Logger: p.log}); err != nil {
		return nil, err
	}
	if d.reports, err = chat.NewReports(chat.ReportsDeps{Store: p.store, Files: p.files, Catalog: catalog, Masker: m}); err != nil {
		return nil, err
	}
	// Questions from PR comments, answered back on their forge.
	if d.webhooks, err = chat.NewWebhooks(chat.WebhooksConfig{Poll: s.commentPoll, Lease: s.commentLease, Backoff: s.commentBackoff, QuestionsPerRepo: s.questionsPerRepo, Askers: s.webhookAskers},
		chat.WebhooksDeps{Comments: p.store, Store: p.store, Turns: d.turns, Admin: d.admin, Catalog: catalog, Forges: p.forges,
			Limiter: p.limiter, Observer: p.replies, Masker: m, Logger: p.log}); err != nil {
		return nil, err
	}
	return d, nil
}

// api is the API's view of the roles.
func (d *domain) api() api.Domain {
	return api.Domain{Ready: d.readiness, Repositories: d.admin, Turns: d.turns, Subscriptions: d.subscriptions,
		Providers: d.providers, Reports: d.reports, Webhooks: d.webhooks}
}

// dashboard is the dashboard's view of the roles.
func (d *domain) dashboard() dashboard.Reads {
	return dashboard.Reads{Repositories: d.admin, Conversations: d.turns, Reports: d.reports}
}
