package api

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/prchat/prchat/chat"
)

func (s *Server) listProviders(c echo.Context) error {
	p, err := s.domain.Providers.Settings(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

type activeProvider struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

func (s *Server) getActiveProvider(c echo.Context) error {
	p, err := s.domain.Providers.Settings(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, activeProvider{Provider: p.Active, Model: p.Model})
}

func (s *Server) setActiveProvider(c echo.Context) error {
	var req activeProvider
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.Provider == "" {
		return chat.Errorf(chat.CodeInvalid, "provider is required")
	}
	p, err := s.domain.Providers.SetActive(c.Request().Context(), req.Provider, req.Model)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

type keyRequest struct {
	Key string `json:"key"`
}

func (s *Server) setProviderKey(c echo.Context) error {
	var req keyRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if err := s.domain.Providers.SetKey(c.Request().Context(), c.Param("id"), req.Key); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) deleteProviderKey(c echo.Context) error {
	if err := s.domain.Providers.DeleteKey(c.Request().Context(), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
