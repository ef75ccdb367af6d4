package api

import (
	"github.com/labstack/echo/v4"
	"github.com/prchat/prchat/chat"
)

func (s *Server) gitlabWebhook(c echo.Context) error {
	return chat.Errorf(chat.CodeUnavailable, "GitLab webhooks are off")
}
