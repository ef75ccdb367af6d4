package api

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/prchat/prchat/chat"
	"github.com/prometheus/client_golang/prometheus"
)

// WebhookBodyLimit caps a webhook's body: GitHub sends at most 25 MB.
const WebhookBodyLimit = 25 << 20

// WebhookReader reads one forge's webhook deliveries: it checks that a
// delivery comes from the forge (its signature or token) and reads its
// question. body reads the raw body, at most WebhookBodyLimit bytes; a
// refused delivery is an error with chat's code. Implemented by packages
// forge/github and forge/gitlab.
type WebhookReader interface {
	Read(ctx context.Context, h http.Header, body func() ([]byte, error)) (chat.Delivery, error)
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
			Help: "Webhook deliveries by forge, event and outcome (queued, waiting, duplicate, ignored, declined, ping, unauthorized, invalid, error).",
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

// webhook answers the deliveries of one forge (name, as chat.ForgeGitHub)
// that r reads: a ping, an ignored event, or a question handed to
// Webhooks.ReceiveComment.
func (s *Server) webhook(name string, r WebhookReader) echo.HandlerFunc {
	return func(c echo.Context) error {
		if r == nil {
			s.webhookMetrics.deliveries.WithLabelValues(name, "other", "unauthorized").Inc()
			return chat.Errorf(chat.CodeUnavailable, "the %s webhook is off: this process reads no deliveries of it", name)
		}
		d, err := r.Read(c.Request().Context(), c.Request().Header, func() ([]byte, error) { return webhookBody(c) })
		switch {
		case err != nil:
			outcome := "invalid"
			if code := chat.ErrorCode(err); code == chat.CodeUnauthorized || code == chat.CodeUnavailable {
				outcome = "unauthorized"
			}
			s.webhookMetrics.deliveries.WithLabelValues(name, d.Event, outcome).Inc()
			return err
		case d.Ping:
			s.webhookMetrics.deliveries.WithLabelValues(name, d.Event, "ping").Inc()
			return c.JSON(http.StatusOK, map[string]string{"status": "pong"})
		case d.Ignored != "":
			return s.ignore(c, name, d.Event, d.Ignored)
		}
		return s.receive(c, name, d.Event, d.Comment, d.AutoRegister)
	}
}

// receive hands a comment question to the service and answers the
// webhook: 202 for a question taken, 200 for a duplicate, an ignored or a
// declined one.
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
	case chat.ReceiptDeclined:
		// Answered: a reply in its thread says why it is not answered.
		s.log.InfoContext(c.Request().Context(), "webhook question declined", slog.String("forge", forge),
			slog.String("repository", q.Repository), slog.Int("pr", q.PR))
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
