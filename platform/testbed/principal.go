package testbed

import (
	"github.com/google/uuid"
	"github.com/labstack/echo/v5"

	"github.com/pinmarket/pin/platform/apperror"
	"github.com/pinmarket/pin/platform/auth"
)

// HeaderTestTenant is the header AuthenticateTenantHeader trusts.
const HeaderTestTenant = "X-Test-Tenant"

// AuthenticateTenantHeader is a host's authenticator as a module receives
// it (promotion.Deps.Authenticate), standing in for another host's: it
// takes the caller to be a fresh user of the tenant named in
// X-Test-Tenant, and answers 401 without it. Tests only: it trusts the
// client.
func AuthenticateTenantHeader() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			tenant, err := uuid.Parse(c.Request().Header.Get(HeaderTestTenant))
			if err != nil {
				return apperror.Unauthenticated(auth.SlugMissingToken, "The "+HeaderTestTenant+" header is required.")
			}
			req := c.Request()
			p := auth.Principal{UserID: uuid.New(), TenantID: tenant}
			c.SetRequest(req.WithContext(auth.WithPrincipal(req.Context(), p)))
			return next(c)
		}
	}
}
