package auth

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/labstack/echo/v5"

	"github.com/pinmarket/pin/platform/apperror"
)

// MinSecretLength is the shortest accepted HS256 key: RFC 7518 §3.2 asks for
// a key at least as long as the hash output (256 bits).
const MinSecretLength = 32

// Slugs of the authentication and authorization problems.
const (
	SlugMissingToken   = "missing-token"
	SlugInvalidToken   = "invalid-token"
	SlugTenantRequired = "tenant-required"
	SlugAdminRequired  = "admin-required"
)

// signingMethod is the only algorithm accepted or produced. Pinning it keeps
// "alg": "none" and RS/ES tokens (the key-confusion attack) out for good.
var signingMethod = jwt.SigningMethodHS256

// DefaultMaxTTL is the longest lifetime a token may have unless
// WithMaxTTL says otherwise: long enough for every token `pin token` mints
// by default (24 h), short enough that a leaked token does not live for years.
const DefaultMaxTTL = 30 * 24 * time.Hour

// ClockLeeway is the clock skew forgiven between the token's issuer and this
// instance: a token is refused when its iat or nbf is further ahead than
// this, or its exp further behind (docs/adr/0003-http-errors-and-auth.md).
const ClockLeeway = 30 * time.Second

// MaxTokenBytes caps a bearer token; a longer one is refused before any
// parsing or signature work (real tokens are a few hundred bytes).
const MaxTokenBytes = 8 << 10

// Authenticator verifies and issues the service's bearer tokens.
type Authenticator struct {
	secret   []byte
	issuer   string
	audience string
	maxTTL   time.Duration
	now      func() time.Time
	parser   *jwt.Parser
}

// Option configures an Authenticator.
type Option func(*Authenticator)

// WithIssuer makes the `iss` claim required and equal to iss; Issue sets it.
func WithIssuer(iss string) Option { return func(a *Authenticator) { a.issuer = iss } }

// WithAudience makes the `aud` claim required and include aud; Issue sets it.
func WithAudience(aud string) Option { return func(a *Authenticator) { a.audience = aud } }

// WithMaxTTL refuses tokens whose lifetime (exp - iat, and exp - now) is
// longer than d, and Issue refuses to mint them.
func WithMaxTTL(d time.Duration) Option { return func(a *Authenticator) { a.maxTTL = d } }

// claims is the token body: the registered claims plus Pin's own. The time
// claims shadow jwt's, which would also take a number written as a string.
type claims struct {
	jwt.RegisteredClaims
	ExpiresAt *numericDate `json:"exp,omitempty"`
	NotBefore *numericDate `json:"nbf,omitempty"`
	IssuedAt  *numericDate `json:"iat,omitempty"`
	TenantID  string       `json:"tenant_id,omitempty"`
	Roles     []string     `json:"roles,omitempty"`
}

// numericDate is a NumericDate (RFC 7519 §2) that must be a JSON number.
type numericDate struct{ jwt.NumericDate }

// UnmarshalJSON refuses anything but a JSON number.
func (d *numericDate) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		return errors.New("a time claim must be a JSON number")
	}
	return d.NumericDate.UnmarshalJSON(b)
}

func (d *numericDate) date() *jwt.NumericDate {
	if d == nil {
		return nil
	}
	return &d.NumericDate
}

func newNumericDate(t time.Time) *numericDate { return &numericDate{*jwt.NewNumericDate(t)} }

// GetExpirationTime is the strict exp.
func (c claims) GetExpirationTime() (*jwt.NumericDate, error) { return c.ExpiresAt.date(), nil }

// GetNotBefore is the strict nbf.
func (c claims) GetNotBefore() (*jwt.NumericDate, error) { return c.NotBefore.date(), nil }

// GetIssuedAt is the strict iat.
func (c claims) GetIssuedAt() (*jwt.NumericDate, error) { return c.IssuedAt.date(), nil }

// NewAuthenticator returns an authenticator for HS256 tokens signed with
// secret, which must be at least MinSecretLength bytes.
func NewAuthenticator(secret []byte, opts ...Option) (*Authenticator, error) {
	if len(secret) < MinSecretLength {
		return nil, fmt.Errorf("auth: JWT secret is %d bytes, need at least %d", len(secret), MinSecretLength)
	}
	a := &Authenticator{
		// Copied so that a caller reusing its buffer cannot change the key.
		secret: append([]byte(nil), secret...),
		maxTTL: DefaultMaxTTL,
		now:    time.Now,
	}
	for _, opt := range opts {
		opt(a)
	}
	if a.maxTTL <= 0 {
		return nil, fmt.Errorf("auth: max token lifetime %s is not positive", a.maxTTL)
	}
	parserOpts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{signingMethod.Alg()}),
		jwt.WithExpirationRequired(),
		// A token from the future is forged or from a broken clock.
		jwt.WithIssuedAt(),
		jwt.WithLeeway(ClockLeeway),
		jwt.WithTimeFunc(func() time.Time { return a.now() }),
		// Non-canonical base64 would let one token have many spellings.
		jwt.WithStrictDecoding(),
	}
	if a.issuer != "" {
		parserOpts = append(parserOpts, jwt.WithIssuer(a.issuer))
	}
	if a.audience != "" {
		parserOpts = append(parserOpts, jwt.WithAudience(a.audience))
	}
	a.parser = jwt.NewParser(parserOpts...)
	return a, nil
}

// Issue signs a token for p that expires after ttl. It is meant for
// `pin token`, `pin dev` and tests; production tokens come from the Pin
// identity service with the same claims.
func (a *Authenticator) Issue(p Principal, ttl time.Duration) (string, error) {
	if p.UserID == uuid.Nil {
		return "", errors.New("auth: issue token: user id is nil")
	}
	if ttl <= 0 || ttl > a.maxTTL {
		return "", fmt.Errorf("auth: issue token: ttl %s is not between 0 and the maximum token lifetime %s", ttl, a.maxTTL)
	}
	now := a.now()
	c := claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: p.UserID.String(), Issuer: a.issuer},
		IssuedAt:         newNumericDate(now),
		ExpiresAt:        newNumericDate(now.Add(ttl)),
		Roles:            p.Roles,
	}
	if a.audience != "" {
		c.Audience = jwt.ClaimStrings{a.audience}
	}
	if p.HasTenant() {
		c.TenantID = p.TenantID.String()
	}
	token, err := jwt.NewWithClaims(signingMethod, c).SignedString(a.secret)
	if err != nil {
		return "", fmt.Errorf("auth: sign token: %w", err)
	}
	return token, nil
}

// Authenticate verifies a raw token (without the "Bearer " prefix) and
// returns its principal. The error is an apperror of KindUnauthenticated.
func (a *Authenticator) Authenticate(raw string) (Principal, error) {
	if len(raw) > MaxTokenBytes {
		return Principal{}, &apperror.Error{
			Kind: apperror.KindUnauthenticated, Slug: SlugInvalidToken, Detail: "The bearer token is invalid.",
			Err: fmt.Errorf("auth: token of %d bytes is over %d", len(raw), MaxTokenBytes),
		}
	}
	var c claims
	_, err := a.parser.ParseWithClaims(raw, &c, func(t *jwt.Token) (any, error) {
		// WithValidMethods already checks the alg; the type check guards against
		// that option ever being dropped.
		if _, ok := t.Method.(*jwt.SigningMethodHMAC); !ok || t.Method.Alg() != signingMethod.Alg() {
			return nil, fmt.Errorf("unexpected signing method %q", t.Header["alg"])
		}
		return a.secret, nil
	})
	if err != nil {
		detail := "The bearer token is invalid."
		if errors.Is(err, jwt.ErrTokenExpired) {
			detail = "The bearer token has expired."
		}
		return Principal{}, &apperror.Error{
			Kind: apperror.KindUnauthenticated, Slug: SlugInvalidToken, Detail: detail,
			Err: fmt.Errorf("auth: parse token: %w", err),
		}
	}
	if err := a.checkLifetime(c); err != nil {
		return Principal{}, invalidClaim("exp", err)
	}
	return c.principal()
}

// checkLifetime refuses a token that lives longer than the maximum, measured
// from its iat and from now (a token without iat, or with a forged one,
// cannot outlive the maximum from the moment it is presented); from now, a
// clock up to ClockLeeway ahead is forgiven, as for iat.
func (a *Authenticator) checkLifetime(c claims) error {
	exp := c.ExpiresAt.date().Time
	if left := exp.Sub(a.now()); left > a.maxTTL+ClockLeeway {
		return fmt.Errorf("expires in %s, over the maximum lifetime %s", left, a.maxTTL)
	}
	if iat := c.IssuedAt.date(); iat != nil && exp.Sub(iat.Time) > a.maxTTL {
		return fmt.Errorf("lifetime %s is over the maximum %s", exp.Sub(iat.Time), a.maxTTL)
	}
	return nil
}

// principal checks Pin's claims and turns them into a Principal.
func (c claims) principal() (Principal, error) {
	userID, err := parseID(c.Subject)
	if err != nil {
		return Principal{}, invalidClaim("sub", err)
	}
	p := Principal{UserID: userID, Roles: c.Roles}
	if c.TenantID != "" {
		if p.TenantID, err = parseID(c.TenantID); err != nil {
			return Principal{}, invalidClaim("tenant_id", err)
		}
	}
	return p, nil
}

// parseID accepts only the canonical 36-character form, not the braced, URN
// or hyphen-less spellings uuid.Parse also takes, and never the nil UUID.
func parseID(s string) (uuid.UUID, error) {
	if len(s) != 36 {
		return uuid.Nil, fmt.Errorf("%q is not a canonical UUID", s)
	}
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, fmt.Errorf("%q: %w", s, err)
	}
	if id == uuid.Nil {
		return uuid.Nil, errors.New("nil UUID")
	}
	return id, nil
}

func invalidClaim(name string, err error) error {
	return &apperror.Error{
		Kind: apperror.KindUnauthenticated, Slug: SlugInvalidToken,
		Detail: "The bearer token is invalid.",
		Err:    fmt.Errorf("auth: claim %s: %w", name, err),
	}
}

// Middleware authenticates every request with an `Authorization: Bearer
// <JWT>` header and puts the Principal into the request context. A missing or
// invalid token ends the request with 401 and a `WWW-Authenticate: Bearer`
// challenge (RFC 6750).
func (a *Authenticator) Middleware() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			raw, ok := bearerToken(c.Request().Header.Get(echo.HeaderAuthorization))
			if !ok {
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="pin"`)
				return apperror.Unauthenticated(SlugMissingToken, "A bearer token is required.")
			}
			p, err := a.Authenticate(raw)
			if err != nil {
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="pin", error="invalid_token"`)
				return err
			}
			req := c.Request()
			c.SetRequest(req.WithContext(WithPrincipal(req.Context(), p)))
			return next(c)
		}
	}
}

// bearerToken extracts the token of a Bearer authorization header. The
// scheme is case-insensitive (RFC 9110 §11.1).
func bearerToken(header string) (string, bool) {
	scheme, token, found := strings.Cut(strings.TrimSpace(header), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// RequireTenant lets through only principals acting for a tenant (a token
// with tenant_id); others get 403. Mount it after Middleware.
func RequireTenant() echo.MiddlewareFunc {
	return requirePrincipal(func(p Principal) error {
		if !p.HasTenant() {
			return apperror.Forbidden(SlugTenantRequired, "This operation needs a token with a tenant.")
		}
		return nil
	})
}

// RequireAdmin lets through only platform administrators; others get 403.
// Mount it after Middleware.
func RequireAdmin() echo.MiddlewareFunc {
	return requirePrincipal(func(p Principal) error {
		if !p.IsAdmin() {
			return apperror.Forbidden(SlugAdminRequired, "This operation needs the admin role.")
		}
		return nil
	})
}

// RequireTenantOrAdmin lets through principals acting for a tenant and
// platform administrators; others get 403. Mount it after Middleware.
func RequireTenantOrAdmin() echo.MiddlewareFunc {
	return requirePrincipal(func(p Principal) error {
		if !p.HasTenant() && !p.IsAdmin() {
			return apperror.Forbidden(SlugTenantRequired, "This operation needs a token with a tenant or the admin role.")
		}
		return nil
	})
}

func requirePrincipal(check func(Principal) error) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			p, ok := FromContext(c.Request().Context())
			if !ok {
				// Reached only when a route forgot Middleware: fail closed.
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="pin"`)
				return apperror.Unauthenticated(SlugMissingToken, "A bearer token is required.")
			}
			if err := check(p); err != nil {
				return err
			}
			return next(c)
		}
	}
}
