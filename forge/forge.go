package forge

import (
	"cmp"
	"context"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prchat/prchat/chat"
)

// WebhookConfig configures the webhook deliveries of one forge.
type WebhookConfig struct {
	// Secrets verify deliveries: the current one first, then the previous
	// one while a secret is rotated. None: every delivery is refused.
	Secrets []string
	// AutoRegister registers an unknown repository from a signed event's
	// clone URL; else events of unregistered repositories are ignored.
	AutoRegister bool
	// Self returns the account prchat posts as, whose comments are
	// ignored (optional; the forge's client's Login).
	Self   func(ctx context.Context) (string, error)
	Logger *slog.Logger
}

// SecretBytes returns the secrets that are set.
func (w WebhookConfig) SecretBytes() [][]byte {
	var out [][]byte
	for _, s := range w.Secrets {
		if s != "" {
			out = append(out, []byte(s))
		}
	}
	return out
}

// Self caches the account prchat posts as on a forge.
type Self struct {
	get func(ctx context.Context) (string, error)
	log *slog.Logger
	mu  sync.Mutex
	v   string
	at  time.Time
}

// NewSelf returns a cache of get's account; get may be nil (no account is
// known, none is ignored).
func NewSelf(get func(ctx context.Context) (string, error), log *slog.Logger) *Self {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Self{get: get, log: log}
}

// Login returns the account, looking it up at most once a minute after a
// failure ("" while unknown).
func (l *Self) Login(ctx context.Context) string {
	if l == nil || l.get == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.v != "" || time.Since(l.at) < time.Minute {
		return l.v
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	v, err := l.get(ctx)
	l.at = time.Now()
	if err != nil {
		l.log.WarnContext(ctx, "find the account prchat posts as", slog.Any("err", err))
		return ""
	}
	l.v = v
	return v
}

// EventLabel bounds the event label of the metrics to names the forge
// knows: one of known, else "other".
func EventLabel(event string, known ...string) string {
	for _, k := range known {
		if strings.EqualFold(event, k) {
			return k
		}
	}
	return "other"
}

// LinkPath escapes each segment of a repository path for a web link.
func LinkPath(path string) string {
	segs := strings.Split(path, "/")
	for i, p := range segs {
		segs[i] = url.PathEscape(p)
	}
	return strings.Join(segs, "/")
}

// GitHost is a forge whose credentials git may use: the scheme and host of
// its git addresses, and the credentials for one repository.
type GitHost interface {
	GitHost() (scheme, host string)
	GitCredentials(ctx context.Context, repo string) (user, password string, err error)
}

// Credentials gives git a forge's credentials for a clone URL on that
// forge's own host (and scheme: https, or http when the API itself is
// served so), and nothing for any other host.
func Credentials(ctx context.Context, repo chat.Repository, hosts ...GitHost) (string, string, error) {
	u, err := url.Parse(repo.CloneURL)
	if err != nil {
		return "", "", nil
	}
	for _, h := range hosts {
		scheme, host := h.GitHost()
		if strings.EqualFold(u.Hostname(), host) && (u.Scheme == "https" || u.Scheme == scheme) {
			return h.GitCredentials(ctx, cmp.Or(repo.ForgeProject, repo.Name))
		}
	}
	return "", "", nil
}
