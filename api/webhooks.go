package api

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prchat/prchat/chat"
	"github.com/prometheus/client_golang/prometheus"
)

// WebhookBodyLimit caps a webhook's body: GitHub sends at most 25 MB.
const WebhookBodyLimit = 25 << 20

// WebhookConfig configures the webhook routes of one forge.
type WebhookConfig struct {
	// Secrets verify deliveries: the current one first, then the previous
	// one while a secret is rotated. None: every delivery is refused.
	Secrets []string
	// AutoRegister registers an unknown repository from a signed event's
	// clone URL; else events of unregistered repositories are ignored.
	AutoRegister bool
	// Self returns the account prchat posts as, whose comments are
	// ignored (optional).
	Self func(ctx context.Context) (string, error)
}

func (w WebhookConfig) secrets() [][]byte {
	var out [][]byte
	for _, s := range w.Secrets {
		if s != "" {
			out = append(out, []byte(s))
		}
	}
	return out
}

// webhookMetrics count deliveries by forge, event and outcome.
type webhookMetrics struct {
	deliveries *prometheus.CounterVec
	duplicates *prometheus.CounterVec
}

func newWebhookMetrics(reg prometheus.Registerer) *webhookMetrics {
	m := &webhookMetrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prchat_webhook_deliveries_total",
			Help: "Webhook deliveries by forge, event and outcome (queued, waiting, duplicate, ignored, ping, unauthorized, invalid, error).",
		}, []string{"forge", "event", "outcome"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prchat_webhook_duplicates_total",
			Help: "Webhook deliveries of a delivery id or comment received before, by forge.",
		}, []string{"forge"}),
	}
	reg.MustRegister(m.deliveries, m.duplicates)
	return m
}

// webhookBody reads a webhook's raw body, at most WebhookBodyLimit bytes.
func webhookBody(c echo.Context) ([]byte, error) {
	r := c.Request()
	if r.ContentLength > WebhookBodyLimit {
		return nil, tooLarge(WebhookBodyLimit)
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, WebhookBodyLimit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(mbe.Limit)
		}
		return nil, chat.Errorf(chat.CodeInvalid, "read request body: %v", err)
	}
	return body, nil
}

// selfLogin caches the account prchat posts as.
type selfLogin struct {
	get func(ctx context.Context) (string, error)
	mu  sync.Mutex
	v   string
	at  time.Time
}

// login returns the account, looking it up at most once a minute after a
// failure ("" while unknown).
func (l *selfLogin) login(ctx context.Context, log *slog.Logger) string {
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
		log.WarnContext(ctx, "find the account prchat posts as", slog.Any("err", err))
		return ""
	}
	l.v = v
	return v
}

// receive hands a comment question to the service and answers the
// webhook: 202 for a question taken, 200 for a duplicate.
func (s *Server) receive(c echo.Context, forge, event string, q chat.Comment, autoRegister bool) error {
	if s.domain.Webhooks == nil {
		return chat.Errorf(chat.CodeUnavailable, "this process keeps no webhook questions")
	}
	r, err := s.domain.Webhooks.ReceiveComment(c.Request().Context(), q, autoRegister)
	if err != nil {
		s.webhookMetrics.deliveries.WithLabelValues(forge, event, "error").Inc()
		return err
	}
	s.webhookMetrics.deliveries.WithLabelValues(forge, event, r.Status).Inc()
	switch r.Status {
	case chat.ReceiptDuplicate:
		s.webhookMetrics.duplicates.WithLabelValues(forge).Inc()
		return c.JSON(http.StatusOK, r)
	case chat.ReceiptIgnored:
		return c.JSON(http.StatusOK, r)
	}
	s.log.InfoContext(c.Request().Context(), "webhook question", slog.String("forge", forge),
		slog.String("repository", q.Repository), slog.Int("pr", q.PR), slog.String("status", r.Status),
		slog.String("conversation", r.ConversationID), slog.Int("turn", r.Turn))
	return c.JSON(http.StatusAccepted, r)
}

func (s *Server) ignore(c echo.Context, forge, event, reason string) error {
	s.webhookMetrics.deliveries.WithLabelValues(forge, event, chat.ReceiptIgnored).Inc()
	return c.JSON(http.StatusOK, chat.Receipt{Status: chat.ReceiptIgnored, Reason: reason})
}

// eventLabel bounds the event label of the metrics to names prchat knows.
func eventLabel(event string, known ...string) string {
	for _, k := range known {
		if strings.EqualFold(event, k) {
			return k
		}
	}
	return "other"
}
