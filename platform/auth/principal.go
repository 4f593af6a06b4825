// Package auth authenticates HTTP requests with HS256 JWT bearer tokens and
// hands handlers the principal: who acts, for which tenant, with which roles.
package auth

import (
	"context"
	"slices"

	"github.com/google/uuid"
)

// RoleAdmin is the role of a platform administrator.
const RoleAdmin = "admin"

// Principal is the authenticated caller.
type Principal struct {
	UserID   uuid.UUID // from the "sub" claim
	TenantID uuid.UUID // from "tenant_id"; uuid.Nil when the token has none
	Roles    []string
}

// IsAdmin reports whether the principal is a platform administrator.
func (p Principal) IsAdmin() bool { return slices.Contains(p.Roles, RoleAdmin) }

// HasTenant reports whether the principal acts for a tenant.
func (p Principal) HasTenant() bool { return p.TenantID != uuid.Nil }

type principalKey struct{}

// WithPrincipal returns a context carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal that the middleware put in ctx.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
