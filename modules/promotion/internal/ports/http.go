// Package ports is how the outside world reaches the promotion module: the
// HTTP handlers of its API (and the module's background runners). Handlers
// only translate: authenticate, bind, call one use case, render.
package ports

import (
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v5"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/apperror"
	"github.com/pinmarket/pin/platform/auth"
	"github.com/pinmarket/pin/platform/httpserver"
)

// Route paths of the module (interfaces.md), in Echo's syntax.
const (
	PathDeveloperPackages = "/api/developers/v1/promotion-packages"
	PathAdminPackages     = "/api/admin/v1/promotion-packages"
	PathAdminPackage      = "/api/admin/v1/promotion-packages/:id"
	PathPurchases         = "/api/developers/v1/promotions"
	PathPurchase          = "/api/developers/v1/promotions/:purchaseId"
	PathPurchaseCancel    = "/api/developers/v1/promotions/:purchaseId/cancel"
)

// HeaderIdempotencyKey is the optional header of POST /promotions.
const HeaderIdempotencyKey = "Idempotency-Key"

// HeaderIdempotentReplayed is set to "true" on a response that repeats the
// result of an earlier request with the same Idempotency-Key.
const HeaderIdempotentReplayed = "Idempotent-Replayed"

// HTTPServer holds the module's HTTP handlers.
type HTTPServer struct {
	app          app.Application
	authenticate echo.MiddlewareFunc
}

// NewHTTPServer returns the handlers of application; authenticate puts the
// caller's auth.Principal into the request context or fails the request.
func NewHTTPServer(application app.Application, authenticate echo.MiddlewareFunc) *HTTPServer {
	return &HTTPServer{app: application, authenticate: authenticate}
}

// RegisterRoutes adds the module's routes to g. Middleware is attached per
// route rather than with g.Use: an Echo group with middleware also
// registers catch-all routes, which would answer unknown paths with 401
// instead of 404. RenderProblems comes first so that the authenticator's
// errors, too, are problem documents on any host.
func (s *HTTPServer) RegisterRoutes(g *echo.Group) {
	chain := func(role echo.MiddlewareFunc) []echo.MiddlewareFunc {
		return []echo.MiddlewareFunc{httpserver.RenderProblems(), s.authenticate, role}
	}
	tenant, admin, tenantOrAdmin := chain(auth.RequireTenant()), chain(auth.RequireAdmin()), chain(auth.RequireTenantOrAdmin())

	g.GET(PathDeveloperPackages, s.listActivePackages, tenant...)
	g.POST(PathAdminPackages, s.createPackage, admin...)
	g.PATCH(PathAdminPackage, s.updatePackage, admin...)
	g.POST(PathPurchases, s.purchasePromotion, tenant...)
	g.GET(PathPurchases, s.listPurchases, tenant...)
	g.GET(PathPurchase, s.getPurchase, tenantOrAdmin...)
	g.POST(PathPurchaseCancel, s.cancelPromotion, tenantOrAdmin...)
}

func (s *HTTPServer) listActivePackages(c *echo.Context) error {
	pkgs, err := s.app.ListActivePackages.Handle(c.Request().Context())
	if err != nil {
		return err
	}
	out := packageListResponse{Items: make([]packageResponse, len(pkgs))}
	for i, p := range pkgs {
		out.Items[i] = toHTTPPackage(p)
	}
	return c.JSON(http.StatusOK, out)
}

func (s *HTTPServer) createPackage(c *echo.Context) error {
	var req createPackageRequest
	if err := httpserver.Bind(c, &req); err != nil {
		return err
	}
	cmd := app.CreatePackage{
		Code: req.Code, Name: req.Name, Kind: req.Kind, DurationDays: req.DurationDays,
		BoostWeight: req.BoostWeight, CurrencyID: req.Price.CurrencyID, IsActive: req.IsActive,
	}
	if req.Price.Amount != nil {
		cmd.Amount = &req.Price.Amount.Decimal
	}
	pkg, err := s.app.CreatePackage.Handle(c.Request().Context(), cmd)
	if err != nil {
		return err
	}
	// c.Path() is the route's template with the host's prefix, if any.
	c.Response().Header().Set(echo.HeaderLocation, c.Path()+"/"+pkg.ID().String())
	return c.JSON(http.StatusCreated, toHTTPPackage(pkg))
}

func (s *HTTPServer) updatePackage(c *echo.Context) error {
	id, err := pathID(c, "id", domain.PackageNotFound)
	if err != nil {
		return err
	}
	var req updatePackageRequest
	if err := httpserver.Bind(c, &req); err != nil {
		return err
	}
	pkg, err := s.app.UpdatePackage.Handle(c.Request().Context(), app.UpdatePackage{
		PackageID: id, Changes: toDomainPackageChanges(req),
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toHTTPPackage(pkg))
}

func (s *HTTPServer) purchasePromotion(c *echo.Context) error {
	keys := c.Request().Header.Values(HeaderIdempotencyKey)
	if len(keys) > 1 {
		// Proxies and servers differ on which of several they keep.
		return apperror.Invalid("The Idempotency-Key header is given more than once.",
			apperror.FieldError{Field: app.IdempotencyKeyField, Message: "must be given once"})
	}
	var req purchaseRequest
	if err := httpserver.Bind(c, &req); err != nil {
		return err
	}
	res, err := s.app.PurchasePromotion.Handle(c.Request().Context(), app.PurchasePromotion{
		Actor:          actor(c),
		PackageID:      req.PackageID,
		Targets:        toDomainTargetRefs(req.Targets),
		IdempotencyKey: strings.Join(keys, ""),
	})
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, c.Path()+"/"+res.Purchase.ID().String())
	if !res.Created {
		c.Response().Header().Set(HeaderIdempotentReplayed, "true")
		return c.JSON(http.StatusOK, toHTTPPurchase(res.Purchase))
	}
	return c.JSON(http.StatusCreated, toHTTPPurchase(res.Purchase))
}

func (s *HTTPServer) listPurchases(c *echo.Context) error {
	a := actor(c)
	page, err := s.app.ListPurchases.Handle(c.Request().Context(), app.ListPurchases{
		TenantID: a.TenantID,
		Status:   c.QueryParam("status"),
		Limit:    c.QueryParam("limit"),
		Cursor:   c.QueryParam("cursor"),
	})
	if err != nil {
		return err
	}
	out := purchaseListResponse{Items: make([]purchaseResponse, len(page.Items))}
	for i, p := range page.Items {
		out.Items[i] = toHTTPPurchase(p)
	}
	if page.NextCursor != "" {
		out.NextCursor = &page.NextCursor
	}
	return c.JSON(http.StatusOK, out)
}

func (s *HTTPServer) getPurchase(c *echo.Context) error {
	id, err := pathID(c, "purchaseId", domain.PurchaseNotFound)
	if err != nil {
		return err
	}
	p, err := s.app.GetPurchase.Handle(c.Request().Context(), app.GetPurchase{Actor: actor(c), PurchaseID: id})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toHTTPPurchase(p))
}

func (s *HTTPServer) cancelPromotion(c *echo.Context) error {
	id, err := pathID(c, "purchaseId", domain.PurchaseNotFound)
	if err != nil {
		return err
	}
	var req cancelRequest
	if err := httpserver.Bind(c, &req); err != nil {
		return err
	}
	p, err := s.app.CancelPromotion.Handle(c.Request().Context(), app.CancelPromotion{
		Actor: actor(c), PurchaseID: id, Reason: req.Reason,
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toHTTPPurchase(p))
}

// actor is the authenticated caller; the auth middleware of every route
// guarantees there is one.
func actor(c *echo.Context) app.Actor {
	p, _ := auth.FromContext(c.Request().Context())
	return app.Actor{UserID: p.UserID, TenantID: p.TenantID, IsAdmin: p.IsAdmin()}
}

// pathID parses a UUID path parameter. A malformed id names nothing that
// can exist, so it is the same not-found as an unknown one; the detail does
// not repeat it (the problem's instance carries the path).
func pathID(c *echo.Context, name string, notFound func(id string) error) (uuid.UUID, error) {
	id, err := httpserver.ParseUUID(c.Param(name))
	if err != nil {
		return uuid.Nil, notFound("(not a UUID)")
	}
	return id, nil
}
