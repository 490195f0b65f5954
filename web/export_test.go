package web

import "github.com/labstack/echo/v4"

// Routes are every route of the server, for tests that check each one.
func (s *Server) Routes() []*echo.Route { return s.echo.Routes() }
